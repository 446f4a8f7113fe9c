import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as Masking from "../src/Masking.ts"
import * as Normalize from "../src/Normalize.ts"
import * as Pipeline from "../src/Pipeline.ts"
import * as Recall from "../src/Recall.ts"
import * as Toolsets from "../src/Toolsets.ts"
import { anthropicPairingProblems, call, input, openaiPairingProblems, stored, text, user } from "./Helpers.ts"

type Json = Record<string, unknown>

/** user, then `n` steps of (call `c<i>` of `tool<i mod 3>`, result `output i …`). */
const steps = (n: number): Array<Conversation.Message> => {
  const out: Array<Conversation.Message> = [user("task")]
  for (let i = 0; i < n; i++) {
    out.push({ role: "assistant", parts: [text(`step ${i}`), call(`c${i}`, `tool${i % 3}`)] })
    out.push({
      role: "tool",
      parts: [{ type: "tool_result", callId: `c${i}`, content: [text(`output ${i} `.repeat(40))], isError: i === 4 }],
    })
  }
  return out
}

const countText = (t: string): number => Math.ceil(t.length / 4)
const history = stored(steps(12), (i) => (i % 2 === 0 && i > 0 ? 600 : 20))
const source = (over: Partial<Recall.Source> = {}): Recall.Source => ({ history, maxTokens: 2_000, countText, ...over })
const recallCall = (id: string, args: unknown): Conversation.Message => ({
  role: "assistant",
  parts: [{ type: "tool_call", id, name: Recall.RECALL, input: args }],
})
const resultText = (m: Conversation.Message | undefined): string =>
  (m?.parts[0] as Conversation.ToolResultPart).content.map((c) => (c as Conversation.TextPart).text).join("")

describe("the masked reference names its handle", () => {
  it("is one line, deterministic, and its step is the stored seq recall takes", () => {
    const line = Masking.placeholder("read_file", false, 812, 14)
    expect(line).toBe("[read_file: ok, 812 tokens — recall(14)]")
    expect(line).not.toContain("\n")
    const plan = () =>
      Masking.plan(history, { from: 0, options: { ...Masking.defaults, keep: 3 }, grid: Masking.grid(history, 1_000), countText })
    const first = plan()
    expect(first.masked).toBeGreaterThan(0)
    // the same history masks to byte-identical references (a stable cached prefix)
    expect(JSON.stringify([...plan().replaced])).toBe(JSON.stringify([...first.replaced]))
    const reference = resultText(first.replaced.get(2)!.message)
    const step = Number(/recall\((\d+)\)/.exec(reference)![1])
    expect(step).toBe(history[2]!.seq)
    expect(Recall.answer({ step }, source()).text).toContain("output 0 output 0")
  })
})

describe("Recall.answer", () => {
  it("returns the stored original of a step with a header line", () => {
    const a = Recall.answer({ step: 3 }, source())
    expect(a.ok).toBe(true)
    expect(a.text).toBe(`[Recalled step 3: tool0 — ok]\n${"output 0 ".repeat(40)}`)
    expect(Recall.answer({ step: 11 }, source()).text.split("\n")[0]).toBe("[Recalled step 11: tool1 — error]")
  })

  it("returns every result of a step that holds parallel results", () => {
    const parallel = stored([
      user("go"),
      { role: "assistant", parts: [call("a", "ls"), call("b", "cat")] },
      {
        role: "tool",
        parts: [
          { type: "tool_result", callId: "a", content: [text("file list")], isError: false },
          {
            type: "tool_result",
            callId: "b",
            content: [text("file body"), { type: "image", source: { kind: "url", url: "https://x/y.png" } }],
            isError: false,
          },
        ],
      },
    ])
    expect(Recall.answer({ step: 3 }, source({ history: parallel })).text).toBe(
      "[Recalled step 3, result 1 of 2: ls — ok]\nfile list\n\n[Recalled step 3, result 2 of 2: cat — ok]\nfile body\n[image]",
    )
  })

  it("answers an unknown step, a step that is no tool result and a bad argument with an error", () => {
    for (const [args, says] of [
      [{ step: 99 }, "no stored message at step 99"],
      [{ step: 0 }, "no stored message at step 0"],
      [{ step: 2 }, "step 2 is not a tool result (its message has role assistant)"],
      [{ step: "3" }, 'missing argument "step"'],
      [{ step: 2.5 }, 'missing argument "step"'],
      [undefined, 'missing argument "step"'],
    ] as const) {
      const a = Recall.answer(args, source())
      expect(a.ok).toBe(false)
      expect(a.text).toContain(says)
      expect(a.text).toContain("recall(i)]")
    }
  })

  it("cuts a long original to the cap, with a note, and never splits a surrogate pair", () => {
    const a = Recall.answer({ step: 3 }, source({ maxTokens: 40 }))
    expect(a.ok).toBe(true)
    expect(countText(a.text)).toBeLessThanOrEqual(40)
    expect(a.text.startsWith("[Recalled step 3: tool0 — ok]\noutput 0")).toBe(true)
    expect(a.text).toMatch(/\n\[recall: cut to about 40 of \d+ tokens; the full output stays stored\]$/)
    expect(Recall.answer({ step: 3 }, source({ maxTokens: 40 }))).toEqual(a)
    const emoji = Recall.cap("😀".repeat(500), 30, (t) => t.length)
    expect(emoji.truncated).toBe(true)
    expect(emoji.text).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/)
    expect(Recall.cap("short", 30, countText)).toEqual({ text: "short", truncated: false })
    // a huge stored output is counted only as far as the cap reaches
    const lengths: Array<number> = []
    const huge = Recall.cap("z".repeat(1_000_000), 100, (t) => (lengths.push(t.length), countText(t)), 250_000)
    expect(Math.max(...lengths)).toBeLessThanOrEqual(1_600)
    expect(huge.text).toMatch(/\[recall: cut to about 100 of 250000 tokens; the full output stays stored\]$/)
    expect(countText(huge.text)).toBeLessThanOrEqual(100)
  })
})

describe("recall answered as a virtual call", () => {
  const catalog: Array<Conversation.Tool> = [{ name: "tool0", description: "t", inputSchema: { type: "object" } }]
  const context: Toolsets.Context = { tools: catalog, config: { defaultToolsets: [] }, recall: source() }

  it("appends the original after the call (ok in the report), or an error for an unknown step, in both formats with pairing intact", () => {
    const incoming = [recallCall("r1", { step: 5 }), recallCall("r2", { step: 77 })]
    const out = Toolsets.answerVirtualCalls(incoming, Toolsets.empty, context)
    expect(out.calls).toEqual([
      { tool: "recall", callId: "r1", args: { step: 5 }, ok: true },
      { tool: "recall", callId: "r2", args: { step: 77 }, ok: false },
    ])
    expect(out.messages.map((m) => m.role)).toEqual(["assistant", "tool", "assistant", "tool"])
    expect(resultText(out.messages[1])).toContain("output 1 output 1")
    expect((out.messages[3]!.parts[0] as Conversation.ToolResultPart).isError).toBe(true)
    expect(Normalize.findPairingError(new Set(), new Set(), out.messages)).toBeUndefined()
    const after = stored([...history.map((h) => h.message), ...out.messages], (i) => (i < history.length ? history[i]!.tokens : 50))
    const options = Pipeline.resolveOptions({ maskKeep: 3, maskBatchTokens: 1_000 })
    for (const format of ["anthropic", "openai"] as const) {
      const body = Pipeline.run(input(after, { format, options, tools: [...catalog, Recall.tool], toolsTokens: 50 })).request as Json
      expect(format === "anthropic" ? anthropicPairingProblems(body) : openaiPairingProblems(body)).toEqual([])
      const json = JSON.stringify(body)
      expect(json).toContain("— recall(3)]")
      expect(json).toContain("[Recalled step 5: tool1 — ok]")
    }
  })

  it("is not answered without a recall source (the runtime answers it)", () => {
    const out = Toolsets.answerVirtualCalls([recallCall("r1", { step: 5 })], Toolsets.empty, {
      tools: catalog,
      config: { defaultToolsets: [] },
    })
    expect(out.calls).toEqual([])
    expect(out.messages).toHaveLength(1)
  })
})

describe("when recall is offered", () => {
  it("is enabled with masking on and no runtime tool of the same name", () => {
    expect(Recall.enabled([], { maskKeep: 3 })).toBe(true)
    expect(Recall.enabled([], { proactiveThreshold: 0.85 })).toBe(true)
    expect(Recall.enabled([], {})).toBe(false)
    expect(Recall.enabled([{ name: "recall", description: "mine", inputSchema: {} }], { maskKeep: 3 })).toBe(false)
  })

  it("is rebuilt from a history: once the grid passes a maskable result, and stays so", () => {
    const options: Masking.Options = { keep: 3, batchTokens: 1_000, minTokens: 50 }
    const seen = history.map((_, i) => Recall.replay(history.slice(0, i + 1), options))
    const first = seen.indexOf(true)
    expect(first).toBeGreaterThan(0)
    expect(seen.slice(first).every(Boolean)).toBe(true)
    // exactly where masking the same history first masks something
    const masks = history.map((_, i) => {
      const h = history.slice(0, i + 1)
      return Masking.plan(h, { from: 0, options, grid: Masking.grid(h, 1_000), countText }).masked > 0
    })
    expect(masks.indexOf(true)).toBe(first)
    expect(Recall.replay(stored(steps(12), 20), options)).toBe(false) // nothing big enough to mask
  })
})
