import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Pipeline from "../src/Pipeline.ts"
import * as Units from "../src/Units.ts"
import * as Window from "../src/Window.ts"
import { assembleInput, marker } from "./Generators.ts"
import { anthropicPairingProblems, anthropicShapeProblems, geminiPairingProblems, openaiPairingProblems, responsesPairingProblems } from "./Helpers.ts"

const RUNS = 400

type Json = Record<string, unknown>

/** Every format for one input. */
const both = (input: Pipeline.Input) => ({
  anthropic: Pipeline.run({ ...input, format: "anthropic" }),
  openai: Pipeline.run({ ...input, format: "openai" }),
  responses: Pipeline.run({ ...input, format: "openai-responses" }),
  gemini: Pipeline.run({ ...input, format: "gemini" }),
})

describe("assemble (properties over random histories)", () => {
  it("never leaves an orphan, in any format", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const { anthropic, openai, responses, gemini } = both(input)
        expect(anthropicPairingProblems(anthropic.request)).toEqual([])
        expect(openaiPairingProblems(openai.request)).toEqual([])
        expect(responsesPairingProblems(responses.request)).toEqual([])
        expect(geminiPairingProblems(gemini.request)).toEqual([])
      }),
      { numRuns: RUNS },
    )
  })

  it("always sends the anchor (first user message) and every pinned system message", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const anchor = input.history.findIndex((m) => m.message.role === "user")
        const pinned = input.history.filter((m) => m.message.role === "system").length
        const { anthropic, openai, responses, gemini } = both(input)
        for (const out of [anthropic, openai, responses, gemini]) {
          if (anchor === -1) {
            expect(out.report.messages.anchorSeq).toBeNull()
          } else {
            expect(out.report.messages.anchorSeq).toBe(input.history[anchor]!.seq)
            expect(JSON.stringify(out.request["messages"] ?? out.request["input"] ?? out.request["contents"])).toContain(marker(anchor))
          }
        }
        // Gemini: every pinned system message's text stays in the contents
        for (const m of input.history.filter((h) => h.message.role === "system")) {
          for (const p of m.message.parts) if (p.type === "text" && p.text !== "") expect(JSON.stringify(gemini.request["contents"])).toContain(JSON.stringify(p.text).slice(1, -1))
        }
        const pinnedItems = (responses.request["input"] as Array<Json>).filter(
          (m) => m["type"] === "message" && (m["role"] === "system" || m["role"] === "developer"),
        )
        expect(pinnedItems).toHaveLength(pinned)
        const leading = input.system.some((s) => s.text.trim() !== "") ? 1 : 0
        const systemMessages = (openai.request["messages"] as Array<Json>).filter(
          (m) => m["role"] === "system" || m["role"] === "developer",
        )
        expect(systemMessages).toHaveLength(leading + pinned)
      }),
      { numRuns: RUNS },
    )
  })

  it("respects the budget unless it reports overBudget, and adds up its token counts", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const { report } = Pipeline.run(input)
        const t = report.tokens
        expect(t.budget).toBe(input.options.budgetTokens ?? input.model.effectiveWindow)
        if (!report.overBudget) expect(t.total).toBeLessThanOrEqual(t.budget)
        expect(t.total).toBe(t.system + t.tools + t.memory + t.history)
        expect(t.history).toBeGreaterThanOrEqual(0)
        const m = report.messages
        expect(m.sent + m.droppedByWindow + m.droppedByBudget).toBeLessThanOrEqual(m.stored)
        expect(m.window).toBeLessThanOrEqual(m.stored)
        expect(m.stored).toBe(input.history.length)
      }),
      { numRuns: RUNS },
    )
  })

  it("is deterministic: the same input gives a deep-equal output, in any format", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const first = both(input)
        const again = both(structuredClone(input))
        expect(again).toEqual(first)
        expect(JSON.stringify(again.responses.request)).toBe(JSON.stringify(first.responses.request))
        expect(JSON.stringify(again.openai.request)).toBe(JSON.stringify(first.openai.request))
        expect(JSON.stringify(again.gemini.request)).toBe(JSON.stringify(first.gemini.request))
      }),
      { numRuns: RUNS },
    )
  })

  it("renders Anthropic bodies that start with user, alternate roles and keep ≤ 4 ordered breakpoints", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const { request, report } = Pipeline.run({ ...input, format: "anthropic" })
        expect(anthropicShapeProblems(request, report.cache.breakpoints)).toEqual([])
        expect(report.cache.breakpoints).toBeLessThanOrEqual(4)
      }),
      { numRuns: RUNS },
    )
  })

  it("gives the same result with cached landmarks of a prefix as with a full scan", () => {
    fc.assert(
      fc.property(assembleInput, fc.nat(), (input, at) => {
        const prefix = input.history.slice(0, input.history.length === 0 ? 0 : at % (input.history.length + 1))
        const landmarks = Window.landmarks(prefix)
        expect(Pipeline.run({ ...input, landmarks })).toEqual(Pipeline.run(input))
      }),
      { numRuns: RUNS },
    )
  })

  it("does not mutate its input", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const copy = structuredClone(input)
        both(input)
        expect(input).toEqual(copy)
      }),
      { numRuns: 100 },
    )
  })
})

describe("assemble (cuts never split a unit)", () => {
  it("removes no more orphans than the whole history has", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const inherent = Units.prune(
          input.history,
          input.history.map((_, i) => i),
        ).orphans
        const { report } = Pipeline.run(input)
        expect(report.orphans.calls).toBeLessThanOrEqual(inherent.calls)
        expect(report.orphans.results).toBeLessThanOrEqual(inherent.results)
      }),
      { numRuns: RUNS },
    )
  })
})
