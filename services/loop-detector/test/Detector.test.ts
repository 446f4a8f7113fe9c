import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as LoopConfig from "../src/LoopConfig.ts"
import * as Detector from "../src/Detector.ts"
import { callMessage, exchange, repeat, resultMessage, say, start, system, user } from "./Synthetic.ts"

const patterns = (messages: ReadonlyArray<Conversation.Message>, config?: LoopConfig.Config) =>
  Detector.check(messages, config).findings.map((f) => f.pattern)

const finding = (messages: ReadonlyArray<Conversation.Message>, pattern: Detector.Pattern, config?: LoopConfig.Config) =>
  Detector.check(messages, config).findings.find((f) => f.pattern === pattern)

const lookup = () => exchange("get_user", { id: "u1" }, '{"name":"Ada"}')

describe("repeated_call", () => {
  it("fires at the third identical call and result, not at the second", () => {
    expect(Detector.check([...start(), ...repeat(2, lookup)])).toEqual(Detector.none)
    const messages = [...start(), ...repeat(3, lookup)]
    expect(Detector.check(messages)).toEqual({
      looping: true,
      findings: [
        {
          pattern: "repeated_call",
          repeats: 3,
          evidence: [2, 3, 4, 5, 6, 7],
          detail: 'get_user({"id":"u1"}) returned the same result 3 times in a row',
        },
      ],
    })
  })

  it("honours a configured threshold exactly", () => {
    const config = LoopConfig.make({ repeatedCall: { threshold: 5 } })
    expect(patterns([...start(), ...repeat(4, lookup)], config)).toEqual([])
    expect(finding([...start(), ...repeat(5, lookup)], "repeated_call", config)?.repeats).toBe(5)
    expect(patterns([...start(), ...repeat(9, lookup)], LoopConfig.make({ repeatedCall: { threshold: 0 } }))).toEqual([])
  })

  it("compares arguments canonically: key order and whitespace do not matter", () => {
    const messages = [
      ...exchange("search", { from: "JFK", to: "SFO", date: "2024-05-20" }, "[]"),
      ...exchange("search", { date: "2024-05-20", to: "SFO", from: "JFK" }, "[]"),
      ...exchange("search", undefined, "[]", { raw: '{ "to": "SFO",\n  "from": "JFK", "date": "2024-05-20" }' }),
    ]
    expect(finding(messages, "repeated_call")?.repeats).toBe(3)
  })

  it("does not fire when the results differ (the agent is learning something)", () => {
    const poll = (n: number) => exchange("job_status", { id: 7 }, `{"progress":${n}}`)
    expect(patterns([...poll(10), ...poll(50), ...poll(90), ...poll(100)])).toEqual([])
  })

  it("does not fire when the arguments differ", () => {
    const read = (page: number) => exchange("read_page", { page }, "same text")
    expect(patterns([...read(1), ...read(2), ...read(3)])).toEqual([])
  })

  it("needs the calls in a row: another call between breaks the run", () => {
    const other = exchange("list_files", { dir: "." }, "a.txt")
    expect(patterns([...lookup(), ...lookup(), ...other, ...lookup()])).toEqual([])
  })

  it("is reset by user input, not by assistant text or system messages", () => {
    expect(patterns([...lookup(), ...lookup(), user("check again please"), ...lookup()])).toEqual([])
    expect(patterns([...lookup(), ...lookup(), say("Let me retry."), system("note"), ...lookup()])).toEqual(["repeated_call"])
  })

  it("counts only answered calls and reports the loop only while it lasts", () => {
    const pending = callMessage({ name: "get_user", input: { id: "u1" } })
    expect(patterns([...lookup(), ...lookup(), pending])).toEqual([])
    const looped = [...repeat(3, lookup)]
    expect(patterns(looped)).toEqual(["repeated_call"])
    expect(patterns([...looped, ...exchange("update_user", { id: "u1" }, "ok")])).toEqual([])
  })

  it("counts identical parallel calls in one message", () => {
    const call = callMessage(
      { name: "get_user", input: { id: "u1" }, id: "p1" },
      { name: "get_user", input: { id: "u1" }, id: "p2" },
      { name: "get_user", input: { id: "u1" }, id: "p3" },
    )
    const results = ["p1", "p2", "p3"].map((id) => resultMessage(id, "same"))
    const f = finding([call, ...results], "repeated_call")
    expect(f?.repeats).toBe(3)
    expect(f?.evidence).toEqual([0, 1, 2, 3])
  })
})

describe("repeated_error", () => {
  const failing = (n: number) => exchange("book", { flight: "HAT030" }, `Error: not available (request ${n})`)

  it("fires at the third failure of the same call, whatever the error text, not at the second", () => {
    expect(patterns([...failing(1), ...failing(2)])).toEqual([])
    const f = finding([...failing(1), ...failing(2), ...failing(3)], "repeated_error")
    expect(f).toEqual({
      pattern: "repeated_error",
      repeats: 3,
      evidence: [0, 1, 2, 3, 4, 5],
      detail: 'book({"flight":"HAT030"}) failed 3 times in a row',
    })
  })

  it("uses the isError flag as well as error-looking text", () => {
    const flagged = (n: number) => exchange("deploy", { env: "prod" }, `denied #${n}`, { isError: true })
    expect(patterns([...flagged(1), ...flagged(2)])).toEqual([])
    expect(patterns([...flagged(1), ...flagged(2), ...flagged(3)])).toEqual(["repeated_error"])
    const traceback = (n: number) => exchange("shell", { command: "python t.py" }, `Traceback (most recent call last):\n line ${n}`)
    expect(patterns([...traceback(1), ...traceback(2), ...traceback(3)])).toEqual(["repeated_error"])
  })

  it("is not fired by a failure, a success and a failure again, nor by different arguments", () => {
    const ok = exchange("book", { flight: "HAT030" }, "booked")
    expect(patterns([...failing(1), ...failing(2), ...ok, ...failing(3)])).toEqual([])
    const other = exchange("book", { flight: "HAT031" }, "Error: not available")
    expect(patterns([...failing(1), ...failing(2), ...other])).toEqual([])
  })

  it("identical failures are a repeated_error, never also a repeated_call", () => {
    const same = () => exchange("book", { flight: "HAT030" }, "Error: not available")
    expect(patterns(repeat(4, same))).toEqual(["repeated_error"])
  })
})

describe("alternation", () => {
  const a = () => exchange("search", { q: "flights" }, "3 results")
  const b = () => exchange("open", { id: 1 }, "details")
  const c = () => exchange("scroll", { dir: "down" }, "more")
  const d = () => exchange("back", {}, "list")

  it("fires at the third A-B cycle with identical results, not at two and a half", () => {
    const almost = [...a(), ...b(), ...a(), ...b(), ...a()]
    expect(patterns(almost)).toEqual([])
    const messages = [...almost, ...b()]
    const f = finding(messages, "alternation")
    expect(f?.repeats).toBe(3)
    expect(f?.evidence).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
    expect(f?.detail).toBe('the cycle search({"q":"flights"}) → open({"id":1}) repeated 3 times with the same results')
  })

  it("fires for A-B-C cycles at the ninth call, not the eighth", () => {
    const cycle = () => [...a(), ...b(), ...c()]
    const eight = [...cycle(), ...cycle(), ...a(), ...b()]
    expect(patterns(eight)).toEqual([])
    expect(patterns([...eight, ...c()])).toEqual(["alternation"])
  })

  it("catches 4-cycles only when configured (maxPeriod 4)", () => {
    const cycle = () => [...a(), ...b(), ...c(), ...d()]
    const messages = [...cycle(), ...cycle(), ...cycle()]
    expect(patterns(messages)).toEqual([])
    expect(finding(messages, "alternation", LoopConfig.make({ alternation: { maxPeriod: 4 } }))?.repeats).toBe(3)
  })

  it("honours a configured cycle count", () => {
    const config = LoopConfig.make({ alternation: { cycles: 2 } })
    expect(patterns([...a(), ...b(), ...a()], config)).toEqual([])
    expect(patterns([...a(), ...b(), ...a(), ...b()], config)).toEqual(["alternation"])
  })

  it("does not fire when a result changes (edit-test cycles that make progress)", () => {
    const edit = (n: number) => exchange("edit", { line: 4 }, `saved v${n}`)
    const test = (n: number) => exchange("run_tests", {}, `${n} failing`)
    expect(patterns([...edit(1), ...test(3), ...edit(2), ...test(2), ...edit(3), ...test(1)])).toEqual([])
  })

  it("is not reported for a single repeated call (that is a repeated_call)", () => {
    expect(patterns(repeat(6, a))).toEqual(["repeated_call"])
  })
})

describe("monologue", () => {
  it("fires at the fourth assistant message in a row without tool calls, not at the third", () => {
    const three = [...start(), say("one"), say("two"), say("three")]
    expect(patterns(three)).toEqual([])
    expect(finding([...three, say("four")], "monologue")).toEqual({
      pattern: "monologue",
      repeats: 4,
      evidence: [2, 3, 4, 5],
      detail: "4 assistant messages in a row without a tool call or any new input",
    })
  })

  it("is broken by a tool call, a tool result or user input, not by a system message", () => {
    expect(patterns([say("1"), say("2"), ...lookup(), say("3"), say("4")])).toEqual([])
    expect(patterns([say("1"), say("2"), user("go on"), say("3"), say("4")])).toEqual([])
    expect(patterns([say("1"), say("2"), system("keep going"), say("3"), say("4")])).toEqual(["monologue"])
  })
})

describe("context_overflow", () => {
  const overflow = (n: number) => exchange("fetch_logs", { n }, "Error code: 400 - This model's maximum context length is 128000 tokens.")

  it("fires at the second overflow error within 20 messages, not at the first", () => {
    expect(patterns([...start(), ...overflow(1)])).toEqual([])
    const f = finding([...start(), ...overflow(1), ...overflow(2)], "context_overflow")
    expect(f).toEqual({
      pattern: "context_overflow",
      repeats: 2,
      evidence: [3, 5],
      detail: "2 context-overflow errors in the last 20 messages",
    })
  })

  it("recognises the providers' wordings in tool results and runtime (user/system) messages", () => {
    for (const text of [
      "prompt is too long: 210000 tokens > 200000 maximum",
      '{"error":{"code":"context_length_exceeded"}}',
      "Input is too long for requested model.",
      "The request exceeds the model's context window.",
    ]) {
      expect(patterns([user(text), say("retrying"), user(text)])).toEqual(["context_overflow"])
    }
  })

  it("ignores assistant talk about context and overflows that are far apart", () => {
    expect(patterns([say("the maximum context length is 128k"), say("prompt is too long, I think")])).toEqual([])
    const far = [...overflow(1), ...Array.from({ length: 10 }, (_, n) => exchange("step", { n }, "ok")).flat(), ...overflow(2)]
    expect(far).toHaveLength(24)
    expect(patterns(far)).toEqual([])
    expect(patterns(far, LoopConfig.make({ contextOverflow: { withinMessages: 30 } }))).toEqual(["context_overflow"])
  })
})

describe("verdict", () => {
  it("reports nothing under policy off", () => {
    expect(Detector.check(repeat(5, lookup), LoopConfig.make({ policy: "off" }))).toEqual(Detector.none)
  })

  it("reports several patterns at once, in pattern order", () => {
    const overflowMsg = system("Error: prompt is too long")
    const messages = [overflowMsg, ...repeat(3, lookup), say("a"), say("b"), say("c"), say("d"), overflowMsg]
    expect(patterns(messages)).toEqual(["repeated_call", "monologue", "context_overflow"])
  })

  it("ignores orphan results and tool calls outside assistant messages", () => {
    const odd: ReadonlyArray<Conversation.Message> = [
      resultMessage("nobody", "x"),
      resultMessage("nobody", "x"),
      resultMessage("nobody", "x"),
      { role: "user", parts: [{ type: "tool_call", id: "u", name: "x", input: {} }] },
    ]
    expect(Detector.check(odd)).toEqual(Detector.none)
  })
})
