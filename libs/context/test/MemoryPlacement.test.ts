/**
 * Issue 15, item 2: retrieved memory in the prompt, in every provider
 * format. With memory injected the body keeps its invariants (no orphaned
 * tool call or result, valid role order, ≤ 4 breakpoints, the newest
 * exchange sent, deterministic), the memory fits its budget, and under the
 * default placement it sits after the last cache breakpoint: the cached
 * prefix is the same bytes as without it.
 */
import type { Turn } from "@ctxd/contracts"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as MemoryRetrieval from "../src/MemoryRetrieval.ts"
import * as Pipeline from "../src/Pipeline.ts"
import * as Units from "../src/Units.ts"
import * as Window from "../src/Window.ts"
import { assembleInput, marker } from "./Generators.ts"
import {
  anthropicPairingProblems,
  anthropicShapeProblems,
  calls,
  geminiPairingProblems,
  input,
  openaiPairingProblems,
  responsesPairingProblems,
  results,
  stored,
  user,
} from "./Helpers.ts"

const RUNS = 300
const NOW = 1_800_000_000_000
const countText = (text: string) => Math.ceil(text.length / 4)
const FORMATS: ReadonlyArray<Turn.Format> = ["anthropic", "openai", "openai-responses", "gemini"]

type Json = Record<string, unknown>

const memoryTexts = fc.uniqueArray(
  fc.record({
    id: fc.string({ minLength: 1, maxLength: 5 }),
    text: fc.string({ minLength: 1, maxLength: 300 }).map((t) => `⟪mem⟫ ${t}`),
    score: fc.double({ min: 0, max: 1, noNaN: true }),
    updatedAt: fc.integer({ min: NOW - 1e10, max: NOW }),
  }),
  { selector: (c) => c.id, minLength: 1, maxLength: 24 },
)

/** An input with memory retrieved as the worker does: ranked, cut to the budget of what system and tools leave. */
const withMemory = fc
  .tuple(assembleInput, memoryTexts, fc.option(fc.nat({ max: 4_000 }), { nil: undefined }), fc.boolean())
  .map(([base, candidates, tokens, trailer]) => {
    const total = base.options.budgetTokens ?? base.model.effectiveWindow
    const budget = MemoryRetrieval.budget(total - base.systemTokens - base.toolsTokens, { tokens })
    const selection = MemoryRetrieval.select(MemoryRetrieval.rank(candidates, NOW), { budget, count: 8, countText })
    const memory: Pipeline.Memory = { text: selection.text, tokens: selection.tokens, placement: "tail" }
    return { input: { ...base, memory, ...(trailer ? { trailer: { text: "⟪nudge⟫", tokens: 3 } } : {}) }, budget, selection }
  })

const pairing = (format: Turn.Format, body: Json): Array<string> =>
  format === "anthropic"
    ? anthropicPairingProblems(body)
    : format === "openai"
      ? openaiPairingProblems(body)
      : format === "openai-responses"
        ? responsesPairingProblems(body)
        : geminiPairingProblems(body)

/** The conversation of a body as JSON strings, one per message/item/content. */
const conversation = (body: Json): Array<string> =>
  ((body["messages"] ?? body["input"] ?? body["contents"]) as Array<unknown>).map((m) => JSON.stringify(m))

/** Anthropic: the [message, block] of the last `cache_control` mark in the messages (undefined: none). */
const lastMark = (body: Json): readonly [number, number] | undefined => {
  const messages = body["messages"] as Array<{ content: Array<Json> }>
  for (let i = messages.length - 1; i >= 0; i--) {
    const blocks = messages[i]!.content
    for (let j = blocks.length - 1; j >= 0; j--) if (blocks[j]!["cache_control"] !== undefined) return [i, j]
  }
  return undefined
}

const findBlock = (body: Json, needle: string): readonly [number, number] | undefined => {
  const messages = body["messages"] as Array<{ content: Array<Json> }>
  for (let i = 0; i < messages.length; i++) {
    const j = messages[i]!.content.findIndex((b) => b["type"] === "text" && String(b["text"]).includes(needle))
    if (j !== -1) return [i, j]
  }
  return undefined
}

describe("memory in the prompt (properties, every format)", () => {
  it("keeps pairing, role order, ≤ 4 breakpoints, the newest message, and the memory budget", () => {
    fc.assert(
      fc.property(withMemory, ({ input: given, budget, selection }) => {
        for (const format of FORMATS) {
          const out = Pipeline.run({ ...given, format })
          expect(pairing(format, out.request)).toEqual([])
          const t = out.report.tokens
          expect(t.memory).toBe(selection.tokens)
          expect(t.memory).toBeLessThanOrEqual(budget)
          expect(t.total).toBe(t.system + t.tools + t.memory + t.history)
          if (!out.report.overBudget) expect(t.total).toBeLessThanOrEqual(t.budget)
          // the newest exchange: the newest message unless it is an orphan, and the latest request
          const survivors = Units.prune(
            given.history,
            given.history.map((_, i) => i),
          ).messages
          const newest = given.history.length - 1
          if (survivors.at(-1)?.index === newest) expect(out.report.messages.lastSentSeq).toBe(given.history[newest]!.seq)
          const latest = given.history.findLastIndex((m) => Window.isAnchor(m.message))
          if (latest !== -1) expect(JSON.stringify(out.request)).toContain(marker(latest))
          if (format === "anthropic") {
            expect(anthropicShapeProblems(out.request, out.report.cache.breakpoints)).toEqual([])
            expect(out.report.cache.breakpoints).toBeLessThanOrEqual(4)
          }
        }
      }),
      { numRuns: RUNS },
    )
  })

  it("is deterministic in every format", () => {
    fc.assert(
      fc.property(withMemory, ({ input: given }) => {
        for (const format of FORMATS) {
          const a = Pipeline.run({ ...given, format })
          const b = Pipeline.run(structuredClone({ ...given, format }))
          expect(JSON.stringify(b.request)).toBe(JSON.stringify(a.request))
          expect(b.report).toEqual(a.report)
        }
      }),
      { numRuns: RUNS },
    )
  })

  it("tail: after the last breakpoint (Anthropic), the last note before the trailer (all formats); the prefix as without it", () => {
    fc.assert(
      fc.property(withMemory, ({ input: given, selection }) => {
        if (selection.text === "") return
        // without the memory's reserve the budget's cut is the same: only the note differs
        const plain = { ...given, memory: undefined }
        const free: Pipeline.Input = { ...given, memory: { ...given.memory!, tokens: 0 } }
        for (const format of FORMATS) {
          const out = Pipeline.run({ ...free, format })
          const without = Pipeline.run({ ...plain, format })
          const turns = conversation(out.request)
          const before = conversation(without.request)
          const at = turns.findIndex((m) => m.includes("⟪mem⟫"))
          expect(at).toBeGreaterThanOrEqual(0)
          // nothing of the memory anywhere but in the conversation's tail
          expect(JSON.stringify({ ...out.request, messages: undefined, input: undefined, contents: undefined })).not.toContain("⟪mem⟫")
          if (format === "anthropic") {
            const mark = lastMark(out.request)
            const block = findBlock(out.request, "⟪mem⟫")!
            if (mark !== undefined) expect(block[0] > mark[0] || (block[0] === mark[0] && block[1] > mark[1])).toBe(true)
            expect(out.report.cache.breakpoints).toBe(without.report.cache.breakpoints)
            // everything up to the last breakpoint is byte-identical to the body without memory
            const cut = (body: Json, m: readonly [number, number]) => {
              const ms = structuredClone(body["messages"]) as Array<{ content: Array<Json> }>
              return JSON.stringify([body["system"], body["tools"], ...ms.slice(0, m[0]), ms[m[0]]!.content.slice(0, m[1] + 1)])
            }
            if (mark !== undefined) expect(cut(out.request, mark)).toBe(cut(without.request, lastMark(without.request)!))
          } else {
            // the memory's note comes after every message of the view
            expect(turns.slice(0, at)).toEqual(before.slice(0, at))
            if (format !== "gemini") expect(turns.length).toBe(before.length + 1)
          }
          if (given.trailer !== undefined) {
            const flat = JSON.stringify(out.request)
            expect(flat.indexOf("⟪mem⟫")).toBeLessThan(flat.indexOf("⟪nudge⟫"))
          }
        }
      }),
      { numRuns: RUNS },
    )
  })

  it("system: the last system section, unmarked, inside the prefix; the reserve counts as memory", () => {
    const history = stored([user("find flights"), calls("c1"), results("c1")])
    const memory: Pipeline.Memory = { text: "Relevant memories:\n- the user flies from Paris", tokens: 12, placement: "system" }
    const tail = Pipeline.run({ ...input(history), memory: { ...memory, placement: "tail" } })
    const sys = Pipeline.run({ ...input(history), memory })
    const system = sys.request["system"] as Array<Json>
    expect(system.at(-1)).toEqual({ type: "text", text: memory.text })
    expect(JSON.stringify(sys.request["messages"])).not.toContain("Paris")
    expect(JSON.stringify(tail.request["messages"])).toContain("Paris")
    expect(sys.report.tokens.memory).toBe(12)
    expect(sys.report.tokens.total).toBe(tail.report.tokens.total)
    for (const format of ["openai", "openai-responses", "gemini"] as const) {
      const out = Pipeline.run({ ...input(history, { format }), memory })
      const conv = JSON.stringify(out.request["messages"] ?? out.request["input"] ?? out.request["contents"])
      expect(conv.indexOf("Paris")).toBeLessThan(conv.indexOf("find flights"))
    }
  })

  it("the memory reserve comes out of the history's budget", () => {
    const history = stored(
      Array.from({ length: 30 }, (_, i) => user(`message ${i}`)),
      100,
    )
    const options = Pipeline.resolveOptions({ budgetTokens: 2_000, freshTailMessages: 2, windowMessages: 60, windowStep: 1 })
    const without = Pipeline.run(input(history, { options }))
    const withIt = Pipeline.run({ ...input(history, { options }), memory: { text: "m", tokens: 500, placement: "tail" } })
    expect(withIt.report.tokens.history).toBeLessThanOrEqual(without.report.tokens.history - 500)
    expect(withIt.report.tokens.total).toBeLessThanOrEqual(2_000)
  })
})
