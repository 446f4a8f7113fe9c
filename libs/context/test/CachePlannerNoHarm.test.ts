/**
 * Do no harm (issue 37, item 8): on a model whose minimum cacheable prefix
 * is large (4,096 tokens), every prompt the planner sends costs, under the
 * cost model it plans with, no more over the turns to come than the prompt
 * with no edit at all (the whole history, nothing masked) would.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as CachePlanner from "../src/CachePlanner.ts"
import * as Pipeline from "../src/Pipeline.ts"
import { calls, input, result, stored, user } from "./Helpers.ts"
import type { Conversation } from "@ctxd/contracts"

const MIN = 4_096

/** The plan of a warm turn on such a model (the planning margin as the assembler applies it). */
const planOf = (previous: CachePlanner.Candidate | undefined, expectedTurns: number): CachePlanner.Plan => ({
  previous,
  read: 0.1,
  write: 1.25,
  expectedTurns,
  cold: false,
  ttlSeconds: 300,
  minCacheable: Math.floor(MIN * 0.9),
  providerMinCacheable: MIN,
})

/** A tool-use loop: a user request, then per step a call and its result of `sizes[k]` tokens. */
const session = (sizes: ReadonlyArray<number>): Array<Pipeline.StoredMessage> => {
  const messages: Array<Conversation.Message> = [user("fix the bug")]
  const tokens: Array<number> = [20]
  sizes.forEach((size, k) => {
    messages.push(calls(`c${k}`), { role: "tool", parts: [result(`c${k}`, `output ${k} `.repeat(size / 3))] })
    tokens.push(30, size)
  })
  return stored(messages, (i) => tokens[i]!)
}

const options = { ...Pipeline.resolveOptions(undefined), maskKeep: 1, maskBatchTokens: 50 }
// the whole history, nothing masked: what sending everything appends turn after turn
const noEdits = { ...Pipeline.resolveOptions({ windowMessages: 100_000 }) }

describe("the cache planner with a 4,096-token minimum", () => {
  it("never sends a prompt that costs more over the expected turns than the unedited one (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 60, max: 1_500 }), { minLength: 2, maxLength: 24 }),
        fc.integer({ min: 100, max: 3_000 }),
        fc.integer({ min: 1, max: 30 }),
        (sizes, systemTokens, expectedTurns) => {
          const history = session(sizes)
          let previous: CachePlanner.Candidate | undefined
          // a turn after each tool result
          for (let end = 3; end <= history.length; end += 2) {
            const plan = planOf(previous, expectedTurns)
            const turn = input(history.slice(0, end), { systemTokens, options, cachePlan: plan })
            const out = Pipeline.run(turn)
            const baseline = Pipeline.run({ ...turn, options: noEdits })
            const exact = { ...plan, minCacheable: MIN }
            expect(CachePlanner.costOf(exact, out.shape!).cost).toBeLessThanOrEqual(CachePlanner.costOf(exact, baseline.shape!).cost + 1e-6)
            previous = out.shape
          }
        },
      ),
      { numRuns: 150 },
    )
  })

  it("sends the unedited prompt when an edit would keep it under the minimum the whole history reaches", () => {
    // 3,000 system tokens, results of 600: the history reaches 4,096 while the masked prompt stays under it
    const history = session([600, 600])
    const first = Pipeline.run(input(history.slice(0, 3), { systemTokens: 3_000, options, cachePlan: planOf(undefined, 10) }))
    const turn = input(history, { systemTokens: 3_000, options, cachePlan: planOf(first.shape, 10) })
    const out = Pipeline.run(turn)
    expect(out.report.tokens.total).toBeGreaterThanOrEqual(MIN)
    expect(out.report.masking?.masked ?? 0).toBe(0)
    expect(out.report.cache.deferred).toContain("mask")
  })
})
