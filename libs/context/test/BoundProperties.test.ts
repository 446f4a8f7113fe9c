/**
 * Property: for any session with interleaved thinking on a model that binds
 * reasoning and any option set (masking, the window and its step, a budget
 * that cuts, tool compression, proactive compression, keep-N thinking turns,
 * retrieved memory after the newest message, a loop nudge, a tool list that
 * changes, a user message right after tool results, the cache planner on or off, `drop_block` always), every body ctxd
 * produces across the turns passes the fake provider's prefix check, each
 * reply signed by the same check and fed back into the history; the same
 * sessions on an older model are not bound (no record, no causes).
 */
import { FakeProvider } from "@ctxd/testing"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Pipeline from "../src/Pipeline.ts"
import { play, type Setup, type Turn } from "./BoundSession.ts"

const turn: fc.Arbitrary<Turn> = fc.record({
  results: fc.array(fc.oneof(fc.nat({ max: 400 }), fc.integer({ min: 2_000, max: 12_000 })), { maxLength: 6 }),
  blocks: fc.integer({ min: 1, max: 3 }),
  newTool: fc.boolean(),
  nudge: fc.boolean(),
  interrupt: fc.boolean(),
})

const setup = (model: string): fc.Arbitrary<Setup> =>
  fc
    .record({
      maskKeep: fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }),
      windowMessages: fc.integer({ min: 4, max: 60 }),
      windowStep: fc.integer({ min: 1, max: 10 }),
      freshTailMessages: fc.integer({ min: 0, max: 8 }),
      budgetTokens: fc.option(fc.integer({ min: 2_000, max: 30_000 }), { nil: undefined }),
      toolCompression: fc.option(fc.constantFrom("none" as const, "minify" as const, "truncate" as const), { nil: undefined }),
      proactiveThreshold: fc.option(fc.constantFrom(0.5, 0.85), { nil: undefined }),
      keepThinkingTurns: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
      thinkingPrefixMismatch: fc.option(fc.constantFrom("auto" as const, "drop_block" as const), { nil: undefined }),
      memory: fc.option(fc.constantFrom("likes tea", "prefers email"), { nil: undefined }),
      planner: fc.boolean(),
    })
    .map(({ memory, planner, ...o }) => ({ model, options: Pipeline.resolveOptions(o), planner, memory }))

describe("bound reasoning, any session and option set", () => {
  it("every body ctxd builds for a binding model passes the prefix check", () => {
    fc.assert(
      fc.property(setup("claude-sonnet-5-5"), fc.array(turn, { minLength: 1, maxLength: 5 }), (s, turns) => {
        for (const [i, sent] of play(s, turns).entries()) {
          if (!sent.outcome.ok) expect.fail(`request ${i}: ${sent.outcome.message}`)
          // and the API's other thinking rules (a continuation's final assistant message starts with its thinking)
          const betas = sent.report.reasoning?.blockBinding === undefined ? [] : [sent.report.reasoning.blockBinding.betaHeader]
          expect(FakeProvider.validateRequest("anthropic", sent.body, betas), `request ${i}`).toBeUndefined()
          // the provider drops a block only where ctxd asked it to (a forced edit, or drop_block always)
          if (sent.outcome.dropped.length > 0) expect(sent.report.reasoning?.blockBinding, `request ${i}`).toBeDefined()
        }
      }),
      { numRuns: 80 },
    )
  })

  it("the same sessions on an older model are not bound", () => {
    fc.assert(
      fc.property(setup("claude-sonnet-4-6"), fc.array(turn, { minLength: 1, maxLength: 3 }), (s, turns) => {
        for (const sent of play(s, turns)) {
          expect(sent.report.reasoning?.leftOut).toBeUndefined()
          expect(sent.report.reasoning?.blockBinding).toBeUndefined()
          expect(sent.body["thinking"]).toEqual({ type: "enabled", budget_tokens: 1024 })
        }
      }),
      { numRuns: 20 },
    )
  })
})
