import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import type * as CachePlanner from "../src/CachePlanner.ts"
import * as Models from "../src/Models.ts"
import * as Pipeline from "../src/Pipeline.ts"
import * as Reasoning from "../src/Reasoning.ts"
import * as RenderAnthropic from "../src/providers/anthropic/Render.ts"
import { call, claude, input, result, results, stored, text, user } from "./Helpers.ts"

type Json = Record<string, unknown>

const thinking = (k: number): Conversation.OpaquePart => ({
  type: "opaque",
  format: "anthropic",
  block: { type: "thinking", thinking: `thought ${k}`, signature: `sig${k}` },
})
const redacted = (k: number): Conversation.OpaquePart => ({
  type: "opaque",
  format: "anthropic",
  block: { type: "redacted_thinking", data: `data${k}` },
})
const reasoningItem = (k: number): Conversation.OpaquePart => ({
  type: "opaque",
  format: "openai-responses",
  block: { type: "reasoning", id: `rs_${k}`, summary: [], encrypted_content: `enc${k}` },
})
const thinkingCall = (id: string, thought: Conversation.Part = thinking(Number(id.slice(1)))): Conversation.Message => ({
  role: "assistant",
  parts: [thought, call(id)],
})
const thinkingText = (k: number, t = `answer ${k}`, thought: Conversation.Part = thinking(k)): Conversation.Message => ({
  role: "assistant",
  parts: [thought, text(t)],
})

/** Turn k: a user message, a tool loop of `loop` calls (thinking before each), a final answer with thinking. */
const turn = (k: number, loop = 1, part: (n: number) => Conversation.Part = thinking): Array<Conversation.Message> => {
  const out: Array<Conversation.Message> = [user(`question ${k}`)]
  for (let j = 0; j < loop; j++) {
    const id = `c${k * 10 + j}`
    out.push({ role: "assistant", parts: [part(k * 10 + j), call(id)] }, results(id))
  }
  out.push(thinkingText(k, `answer ${k}`, part(k * 10 + 9)))
  return out
}

const blocks = (m: Json): Array<Json> => (Array.isArray(m["content"]) ? (m["content"] as Array<Json>) : [])
const thoughtsIn = (body: Json): Array<string> =>
  (body["messages"] as Array<Json>).flatMap((m) =>
    blocks(m)
      .filter((b) => b["type"] === "thinking" || b["type"] === "redacted_thinking")
      .map((b) => String(b["signature"] ?? b["data"])),
  )

describe("Reasoning.isReasoning", () => {
  it("knows Anthropic thinking and redacted_thinking and Responses reasoning items, nothing else", () => {
    expect(Reasoning.isReasoning(thinking(1))).toBe(true)
    expect(Reasoning.isReasoning(redacted(1))).toBe(true)
    expect(Reasoning.isReasoning(reasoningItem(1))).toBe(true)
    expect(Reasoning.isReasoning({ type: "opaque", format: "anthropic", block: { type: "document" } })).toBe(false)
    expect(Reasoning.isReasoning({ type: "opaque", format: "openai-responses", block: { type: "refusal" } })).toBe(false)
    expect(Reasoning.isReasoning({ type: "opaque", format: "openai", block: { type: "reasoning" } })).toBe(false)
    expect(Reasoning.isReasoning(text("thinking"))).toBe(false)
  })
})

describe("Reasoning.withoutReasoning", () => {
  it("drops reasoning parts and removes thought signatures (Gemini's `signature` on text and calls), keeping the rest", () => {
    const signedText: Conversation.TextPart = { type: "text", text: "checking", signature: "sigT" }
    const signedCall: Conversation.ToolCallPart = { ...call("c1"), signature: "sigC" }
    const message: Conversation.Message = { role: "assistant", parts: [thinking(1), signedText, signedCall] }
    expect(Reasoning.hasReasoning(message)).toBe(true)
    expect(Reasoning.hasReasoning({ role: "assistant", parts: [signedText] })).toBe(true)
    expect(Reasoning.hasReasoning({ role: "user", parts: [thinking(2)] })).toBe(false)
    expect(Reasoning.withoutReasoning(message).parts).toEqual([text("checking"), call("c1")])
  })
})

describe("Reasoning.frontier", () => {
  const view = (messages: ReadonlyArray<Conversation.Message>) => messages.map((message, index) => ({ index, message }))

  it("keeps the last N thinking turns: the frontier is the user message opening the oldest of them", () => {
    const history = [...turn(1), ...turn(2), ...turn(3), ...turn(4)] // each turn: 4 messages
    expect(Reasoning.frontier(view(history), 1)).toBe(12)
    expect(Reasoning.frontier(view(history), 3)).toBe(4)
    expect(Reasoning.frontier(view(history), 4)).toBe(0)
    expect(Reasoning.frontier(view(history), 0)).toBe(12) // at least 1
  })

  it("counts only turns whose assistant messages carry reasoning; a tool loop is one turn however many thoughts it has", () => {
    const plain = [
      user("q"),
      { role: "assistant" as const, parts: [call("p1")] },
      results("p1"),
      { role: "assistant" as const, parts: [text("ok")] },
    ]
    const history = [...turn(1, 3), ...plain, ...turn(2, 2)]
    // turn 2 (the last thinking turn) starts after turn 1 (8 messages) and the plain turn (4)
    expect(Reasoning.frontier(view(history), 1)).toBe(12)
    expect(Reasoning.frontier(view(history), 2)).toBe(0)
  })

  it("keeps the current tool loop's reasoning even when it is the only thinking turn", () => {
    const history = [user("q"), thinkingCall("c1"), results("c1"), thinkingCall("c2"), results("c2")]
    expect(Reasoning.frontier(view(history), 1)).toBe(0)
  })
})

describe("the thinking stage", () => {
  const run = (history: ReadonlyArray<Conversation.Message>, over: Partial<Pipeline.Input> = {}, keep?: number) =>
    Pipeline.run(
      input(stored(history, 40), {
        options: Pipeline.resolveOptions(keep === undefined ? undefined : { keepThinkingTurns: keep }),
        ...over,
      }),
    )

  it("N = 1 (default): only the last thinking turn's thinking is sent, the current loop's included, and the report says what went", () => {
    const history = [...turn(1), ...turn(2), ...turn(3), user("question 4"), thinkingCall("c40"), results("c40")]
    const out = run(history)
    expect(thoughtsIn(out.request)).toEqual(["sig40"])
    const messages = out.request["messages"] as Array<Json>
    expect(blocks(messages.at(-2)!)[0]!["type"]).toBe("thinking")
    expect(out.report.reasoning).toMatchObject({ keepTurns: 1, sent: 1, dropped: 6, held: 0 })
    expect(out.report.reasoning!.tokensSaved).toBeGreaterThan(0)
    const stage = out.report.stages!.find((s) => s.stage === "thinking")!
    expect(stage.tokensIn - stage.tokensOut).toBe(out.report.reasoning!.tokensSaved)
    expect(out.report.stages!.map((s) => s.stage)).toEqual(Pipeline.STAGES.filter((s) => s !== "proactive"))
  })

  it("N = 3: the last three thinking turns keep every thought (interleaved tool loops included)", () => {
    const history = [...turn(1, 2), ...turn(2, 2), ...turn(3, 3), ...turn(4, 1)]
    const out = run(history, {}, 3)
    expect(thoughtsIn(out.request)).toEqual(["sig20", "sig21", "sig29", "sig30", "sig31", "sig32", "sig39", "sig40", "sig49"])
    expect(out.report.reasoning).toMatchObject({ keepTurns: 3, sent: 9, dropped: 3 })
  })

  it("redacted_thinking goes and stays like thinking", () => {
    const history = [...turn(1, 1, redacted), ...turn(2, 1, redacted)]
    const out = run(history)
    expect(thoughtsIn(out.request)).toEqual(["data20", "data29"])
  })

  it("Responses: older turns' reasoning items are left out, the last turn's go before the call they led to", () => {
    const history = [...turn(1, 1, reasoningItem), ...turn(2, 2, reasoningItem)]
    const out = run(history, { format: "openai-responses" })
    const items = out.request["input"] as Array<Json>
    const reasoning = items.flatMap((item, i) => (item["type"] === "reasoning" ? [i] : []))
    expect(reasoning.map((i) => items[i]!["id"])).toEqual(["rs_20", "rs_21", "rs_29"])
    for (const i of reasoning) expect(["function_call", "message"]).toContain(items[i + 1]!["type"])
    expect(out.report.reasoning).toMatchObject({ sent: 3, dropped: 2 })
  })

  it("Gemini: older turns' thoughts and thought signatures are left out, the current loop's stay", () => {
    const thought = (k: number): Conversation.OpaquePart => ({
      type: "opaque",
      format: "gemini",
      block: { text: `plan ${k}`, thought: true, thoughtSignature: `ts${k}` },
    })
    const signedCall = (id: string, k: number): Conversation.ToolCallPart => ({ ...call(id), signature: `cs${k}` })
    const history: Array<Conversation.Message> = [
      user("question 1"),
      { role: "assistant", parts: [thought(1), signedCall("c1", 1)] },
      results("c1"),
      { role: "assistant", parts: [text("answer 1")] },
      user("question 2"),
      { role: "assistant", parts: [thought(2), signedCall("c2", 2)] },
      results("c2"),
    ]
    const out = Pipeline.run(
      input(stored(history, 40), { format: "gemini", model: Models.resolve({ provider: "google", name: "gemini-2.5-flash" }) }),
    )
    const body = JSON.stringify(out.request)
    expect(body).not.toContain("plan 1")
    expect(body).not.toContain("cs1")
    expect(body).toContain("plan 2")
    expect(body).toContain("cs2")
    expect(out.report.reasoning).toMatchObject({ sent: 1, dropped: 1 })
  })

  it("a history without reasoning reports none and changes nothing", () => {
    const history = [user("q"), { role: "assistant" as const, parts: [call("a")] }, results("a")]
    const out = run(history)
    expect(out.report.reasoning).toBeUndefined()
    const stage = out.report.stages!.find((s) => s.stage === "thinking")!
    expect(stage.tokensIn).toBe(stage.tokensOut)
  })

  it("drops a turn's thinking once, when it leaves the last N, and never sends it again as the session goes on", () => {
    const history = [...turn(1), ...turn(2), ...turn(3), ...turn(4)]
    let gone = new Set<string>()
    for (let n = 1; n <= history.length; n++) {
      // a request ends with user input or tool results (an unanswered call would be an orphan)
      if (history[n - 1]!.role === "assistant") continue
      const sent = new Set(thoughtsIn(run(history.slice(0, n)).request))
      const all = new Set(
        history
          .slice(0, n)
          .flatMap((m) =>
            m.parts.filter(Reasoning.isReasoning).map((p) => String((p as Conversation.OpaquePart & { block: Json }).block["signature"])),
          ),
      )
      for (const s of gone) expect(sent.has(s)).toBe(false)
      gone = new Set([...all].filter((s) => !sent.has(s)))
    }
    expect(gone.size).toBeGreaterThan(0)
  })

  describe("under the cache planner", () => {
    const plan = (previous: CachePlanner.Candidate | undefined, over: Partial<CachePlanner.Plan> = {}): CachePlanner.Plan => ({
      previous,
      read: 0.1,
      write: 1.25,
      expectedTurns: 20,
      cold: false,
      ttlSeconds: 300,
      minCacheable: 0,
      ...over,
    })
    // turn 1: long thoughts (2,000 tokens) and a tool loop after the first: leaving them out rewrites the loop
    const big = (k: number): Conversation.OpaquePart => ({
      type: "opaque",
      format: "anthropic",
      block: { type: "thinking", thinking: `thought ${k} `.repeat(600), signature: `sig${k}` },
    })
    const long = (k: number) => [
      user(`question ${k}`),
      thinkingCall(`c${k}0`, big(k * 10)),
      results(`c${k}0`),
      ...Array.from({ length: 6 }, (_, j) => [
        { role: "assistant" as const, parts: [call(`c${k}${j + 1}`)] },
        results(`c${k}${j + 1}`),
      ]).flat(),
      thinkingText(k, `answer ${k}`, big(k)),
    ]
    const run = (history: ReadonlyArray<Conversation.Message>, over: Partial<Pipeline.Input> = {}) =>
      Pipeline.run(
        input(
          stored(history, (i) => (Reasoning.hasReasoning(history[i]!) ? 2_100 : 40)),
          over,
        ),
      )
    const before = [...long(1)]
    const after = [...before, user("question 2"), thinkingCall("c20"), results("c20")]

    it("holds a due drop while the cache is warm and the premium is not yet paid back, and makes it when the cache is cold", () => {
      const first = run(before, { cachePlan: plan(undefined) })
      expect(first.shape!.thinking).toEqual({ from: 0, rent: 0 })
      const warm = run(after, { cachePlan: plan(first.shape) })
      expect(thoughtsIn(warm.request)).toEqual(["sig10", "sig1", "sig20"])
      expect(warm.report.reasoning).toMatchObject({ dropped: 0, held: 2 })
      expect(warm.shape!.thinking!.from).toBe(0)
      expect(warm.shape!.thinking!.rent).toBeGreaterThan(0)
      const cold = run(after, { cachePlan: plan(first.shape, { cold: true }) })
      expect(thoughtsIn(cold.request)).toEqual(["sig20"])
      expect(cold.report.reasoning).toMatchObject({ dropped: 2, held: 0 })
      // without the planner: dropped at once
      expect(thoughtsIn(run(after).request)).toEqual(["sig20"])
    })

    it("makes the drop once its held rent pays for the rewrite, and the cache report breaks the prefix at the dropped thought", () => {
      const first = run(before, { cachePlan: plan(undefined) })
      let previous = run(after, { cachePlan: plan(first.shape) }).shape!
      let made = false
      for (let k = 0; k < 200 && !made; k++) {
        const next = run(after, { cachePlan: plan(previous) })
        made = next.report.reasoning!.dropped > 0
        if (made) {
          expect(next.report.cache.reason).toBe("mask")
          expect(next.report.cache.changedAtTokens).toBeLessThan(next.report.cache.prefixTokens!)
        }
        previous = next.shape!
      }
      expect(made).toBe(true)
    })

    it("drops at once when the prompt is rewritten anyway (a new view)", () => {
      const first = run(before, { cachePlan: plan(undefined) })
      const changed = run(after, { cachePlan: plan(first.shape, { viewChanged: true }) })
      expect(changed.report.reasoning).toMatchObject({ dropped: 2, held: 0 })
    })
  })
})

describe("RenderAnthropic: thinking placement", () => {
  const render = (messages: ReadonlyArray<Conversation.Message>) =>
    RenderAnthropic.render({ model: claude, system: [], tools: [{ name: "lookup", inputSchema: { type: "object" } }], messages }).body[
      "messages"
    ] as Array<Json>

  it("drops thinking in a user message (the API takes it only from the assistant)", () => {
    const messages = render([{ role: "user", parts: [thinking(1), text("hi")] }])
    expect(blocks(messages[0]!).map((b) => b["type"])).toEqual(["text"])
  })

  it("drops thinking left with nothing after it in its message (its call removed as an orphan)", () => {
    const out = Pipeline.run(input(stored([user("q"), thinkingCall("c1"), user("again"), thinkingCall("c2"), results("c2")])))
    const messages = out.request["messages"] as Array<Json>
    expect(out.report.orphans.calls).toBe(1)
    expect(thoughtsIn(out.request)).toEqual(["sig2"])
    expect(messages.every((m) => blocks(m).length === 0 || !(blocks(m).at(-1)!["type"] === "thinking"))).toBe(true)
  })

  it("drops the thinking that led to a call removed as an orphan, in the middle of a message too (and Responses' reasoning items)", () => {
    const interleaved: Conversation.Message = { role: "assistant", parts: [thinking(1), call("a"), thinking(2), call("b")] }
    const history = [user("q"), interleaved, { role: "tool" as const, parts: [result("b")] }]
    const out = Pipeline.run(input(stored(history)))
    expect(out.report.orphans.calls).toBe(1)
    const messages = out.request["messages"] as Array<Json>
    expect(blocks(messages[1]!).map((b) => b["type"])).toEqual(["thinking", "tool_use"])
    expect(thoughtsIn(out.request)).toEqual(["sig2"])
    expect(out.report.reasoning).toMatchObject({ sent: 1 })
    const items: Conversation.Message = { role: "assistant", parts: [reasoningItem(1), call("a"), reasoningItem(2), call("b")] }
    const responses = Pipeline.run(
      input(stored([user("q"), items, { role: "tool", parts: [result("b")] }]), { format: "openai-responses" }),
    )
    expect((responses.request["input"] as Array<Json>).map((i) => i["type"])).toEqual([
      "message",
      "reasoning",
      "function_call",
      "function_call_output",
    ])
    expect((responses.request["input"] as Array<Json>)[1]!["id"]).toBe("rs_2")
  })

  it("puts a later message's leading thinking first when a run of assistant messages merges", () => {
    const messages = render([user("q"), { role: "assistant", parts: [text("Let me check.")] }, thinkingCall("c1"), results("c1")])
    expect(blocks(messages[1]!).map((b) => b["type"])).toEqual(["thinking", "text", "tool_use"])
    // thinking already first: kept in order (interleaved thinking)
    const interleaved = render([user("q"), thinkingText(1), thinkingCall("c2"), results("c2")])
    expect(blocks(interleaved[1]!).map((b) => b["type"])).toEqual(["thinking", "text", "thinking", "tool_use"])
  })

  it("passes signed blocks through unmodified", () => {
    const messages = render([user("q"), thinkingCall("c1", redacted(7)), { role: "tool", parts: [result("c1")] }])
    expect(blocks(messages[1]!)[0]).toEqual({ type: "redacted_thinking", data: "data7" })
  })
})
