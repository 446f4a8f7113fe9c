import type { Conversation } from "@ctxd/contracts"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Pipeline from "../src/Pipeline.ts"
import * as Masking from "../src/Masking.ts"
import { assembleInput, history as historyArb } from "./Generators.ts"
import { anthropicPairingProblems, call, input, openaiPairingProblems, stored, text, user } from "./Helpers.ts"

type Json = Record<string, unknown>

/** user, then `n` steps of (call `c<i>` of `tool<i mod 3>`, result with `body(i)`). */
const steps = (n: number, body: (i: number) => string = (i) => `output ${i} `.repeat(40)): Array<Conversation.Message> => {
  const out: Array<Conversation.Message> = [user("task")]
  for (let i = 0; i < n; i++) {
    out.push({ role: "assistant", parts: [text(`step ${i}`), call(`c${i}`, `tool${i % 3}`)] })
    out.push({ role: "tool", parts: [{ type: "tool_result", callId: `c${i}`, content: [text(body(i))], isError: i === 4 }] })
  }
  return out
}

const countText = (t: string): number => Math.ceil(t.length / 4)
const options = (over: Partial<Masking.Options> = {}): Masking.Options => ({ ...Masking.defaults, ...over })

const resultTexts = (messages: ReadonlyArray<Conversation.Message>): Array<string> =>
  messages.flatMap((m) =>
    m.parts.flatMap((p) => (p.type === "tool_result" ? [p.content.map((c) => (c.type === "text" ? c.text : "")).join("")] : [])),
  )

describe("Masking.plan", () => {
  it("masks results older than the last K as one-line references with name, status, tokens and step", () => {
    const history = stored(steps(10), (i) => (i % 2 === 0 && i > 0 ? 300 : 20))
    const grid = Masking.grid(history, 1)
    const plan = Masking.plan(history, { from: 0, options: options({ keep: 3 }), grid, countText })
    // results at indices 2, 4, ..., 20; the last three (16, 18, 20) stay whole
    expect([...plan.replaced.keys()].sort((a, b) => a - b)).toEqual([2, 4, 6, 8, 10, 12, 14])
    expect(plan.masked).toBe(7)
    const masked = plan.replaced.get(2)!.message.parts[0] as Conversation.ToolResultPart
    expect(masked.content).toEqual([{ type: "text", text: "[tool0: ok, 296 tokens — recall(3)]" }])
    const error = plan.replaced.get(10)!.message.parts[0] as Conversation.ToolResultPart
    expect(error).toMatchObject({
      callId: "c4",
      isError: true,
      content: [{ type: "text", text: "[tool1: error, 296 tokens — recall(11)]" }],
    })
    expect(plan.replaced.get(2)!.tokens).toBe(300 - plan.replaced.get(2)!.saved)
    expect(plan.tokensSaved).toBe([...plan.replaced.values()].reduce((n, r) => n + r.saved, 0))
  })

  it("never masks results below minTokens, and masks nothing with fewer than K results", () => {
    const history = stored(steps(6), (i) => (i % 2 === 0 && i > 0 ? 30 : 10))
    const grid = Masking.grid(history, 1)
    expect(Masking.plan(history, { from: 0, options: options({ keep: 1 }), grid, countText }).masked).toBe(0)
    const big = stored(steps(2), 500)
    expect(Masking.plan(big, { from: 0, options: options({ keep: 3 }), grid: Masking.grid(big, 1), countText }).masked).toBe(0)
  })

  it("moves the boundary on a fixed grid: once per batch of result tokens", () => {
    // every result 500 tokens, batch 2,000: grid points after every 4th result
    const all = stored(steps(30), (i) => (i % 2 === 0 && i > 0 ? 500 : 20))
    const boundaries: Array<number> = []
    let grid: Masking.Grid | undefined
    for (let n = 1; n <= all.length; n++) {
      const history = all.slice(0, n)
      grid = Masking.grid(history, 2_000, grid)
      expect(grid).toEqual(Masking.grid(history, 2_000))
      boundaries.push(Masking.plan(history, { from: 0, options: options({ keep: 3 }), grid, countText }).boundary)
    }
    const distinct = [...new Set(boundaries)]
    expect(distinct).toEqual([0, 9, 17, 25, 33, 41, 49])
    expect([...boundaries].sort((a, b) => a - b)).toEqual(boundaries)
  })

  it("under pressure masks larger raw JSON first, only as much as needed", () => {
    const bodies = [
      "x ".repeat(800),
      JSON.stringify({ rows: Array.from({ length: 40 }, (_, i) => ({ i })) }),
      "y ".repeat(900),
      "z",
      "w",
      "v",
    ]
    const history = stored(
      steps(6, (i) => bodies[i]!),
      (i) => (i === 2 ? 800 : i === 4 ? 400 : i === 6 ? 900 : 20),
    )
    const grid = Masking.grid(history, 100_000)
    const plain = Masking.plan(history, { from: 0, options: options({ keep: 3 }), grid, countText })
    expect(plain.masked).toBe(0)
    const some = Masking.plan(history, { from: 0, options: options({ keep: 3 }), grid, countText, needTokens: 100 })
    expect([...some.replaced.keys()]).toEqual([4]) // the JSON one, though smaller
    const more = Masking.plan(history, { from: 0, options: options({ keep: 3 }), grid, countText, needTokens: 500 })
    expect([...more.replaced.keys()].sort()).toEqual([4, 6]) // then the largest other
  })

  it("de-duplicates identical results of a tool into a reference to the first", () => {
    const history = stored(
      steps(6, (i) => (i === 3 ? "same output ".repeat(30) : i === 0 ? "same output ".repeat(30) : `other ${i} `.repeat(30))),
      200,
    )
    const plan = Masking.plan(history, { from: 0, options: options({ keep: 10 }), grid: Masking.grid(history, 1), countText, dedupe: true })
    expect(plan.deduplicated).toBe(1)
    expect(resultTexts([plan.replaced.get(8)!.message])).toEqual(["[tool0: same output as recall(3)]"])
  })
})

describe("observation masking in the pipeline", () => {
  it("reports what it masked and renders the references in both formats", () => {
    const history = stored(steps(12), (i) => (i % 2 === 0 && i > 0 ? 600 : 20))
    const options = Pipeline.resolveOptions({ maskKeep: 3, maskBatchTokens: 1_000 })
    for (const format of ["anthropic", "openai"] as const) {
      const out = Pipeline.run(input(history, { format, options }))
      expect(out.report.masking).toMatchObject({ masked: 8, deduplicated: 0, boundarySeq: 18 })
      expect(out.report.tokens.history).toBe(history.reduce((n, m) => n + m.tokens, 0) - out.report.masking!.tokensSaved)
      expect(JSON.stringify(out.request)).toContain("[tool0: ok, 596 tokens — recall(3)]")
      expect(out.maskGrid).toEqual(Masking.grid(history, 1_000))
    }
    const off = Pipeline.run(input(history))
    expect(off.report.masking).toBeUndefined()
    expect(off.maskGrid).toBeUndefined()
  })

  const masked = (i: Pipeline.Input, keep: number, batch: number, pressure: boolean): Pipeline.Input => ({
    ...i,
    options: { ...i.options, maskKeep: keep, maskBatchTokens: batch, ...(pressure ? { proactiveThreshold: 0.1 } : {}) },
    countText,
  })
  const arb = fc.tuple(assembleInput, fc.nat({ max: 5 }), fc.integer({ min: 1, max: 3_000 }), fc.boolean())

  it("never breaks pairing, in either format, and is deterministic (property)", () => {
    fc.assert(
      fc.property(arb, ([i, keep, batch, pressure]) => {
        const m = masked(i, keep, batch, pressure)
        const anthropic = Pipeline.run({ ...m, format: "anthropic" })
        const openai = Pipeline.run({ ...m, format: "openai" })
        expect(anthropicPairingProblems(anthropic.request)).toEqual([])
        expect(openaiPairingProblems(openai.request)).toEqual([])
        const { countText: count, ...data } = m
        expect(Pipeline.run({ ...structuredClone(data), countText: count })).toEqual(Pipeline.run(m))
      }),
      { numRuns: 300 },
    )
  })

  it("replaces content only: with room for everything, the same results are sent (property)", () => {
    fc.assert(
      fc.property(arb, ([i, keep, batch]) => {
        const roomy = { ...i, options: { ...i.options, budgetTokens: undefined }, model: { ...i.model, effectiveWindow: 10_000_000 } }
        const ids = (body: Json) => JSON.stringify(body).match(/"(tool_use_id|tool_call_id)":"[^"]*"/g) ?? []
        const plain = Pipeline.run(roomy)
        const withMask = Pipeline.run(masked(roomy, keep, batch, false))
        expect(ids(withMask.request)).toEqual(ids(plain.request))
        expect(withMask.report.messages.sent).toBe(plain.report.messages.sent)
      }),
      { numRuns: 200 },
    )
  })

  it("moves the boundary at most once per batch over a growing history (property)", () => {
    fc.assert(
      fc.property(
        historyArb,
        fc.array(fc.nat({ max: 900 }), { minLength: 1, maxLength: 16 }),
        fc.integer({ min: 1, max: 4_000 }),
        fc.nat({ max: 4 }),
        (messages, tokens, batch, keep) => {
          const all = messages.map((message, i) => ({ seq: i + 1, message, tokens: tokens[i % tokens.length]! }))
          let grid: Masking.Grid | undefined
          const seen: Array<number> = []
          for (let n = 0; n <= all.length; n++) {
            const history = all.slice(0, n)
            grid = Masking.grid(history, batch, grid)
            const b = Masking.plan(history, { from: 0, options: { keep, batchTokens: batch, minTokens: 0 }, grid, countText }).boundary
            if (seen.length === 0 || seen.at(-1) !== b) seen.push(b)
          }
          for (let k = 1; k < seen.length; k++) {
            expect(seen[k]!).toBeGreaterThan(seen[k - 1]!)
            const between = all.slice(seen[k - 1]!, seen[k]!).filter((m) => m.message.role === "tool")
            expect(between.reduce((s, m) => s + m.tokens, 0)).toBeGreaterThanOrEqual(batch)
          }
        },
      ),
      { numRuns: 300 },
    )
  })
})
