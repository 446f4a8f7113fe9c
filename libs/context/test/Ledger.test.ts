/**
 * The savings ledger (issue 37, item 8): an optional edit spends only what
 * the session has saved against its whole history, so whenever the session
 * ends it has cost at most `Ledger.SLACK` more than the whole history, as
 * the planner prices both.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as CachePlanner from "../src/CachePlanner.ts"
import * as Ledger from "../src/Ledger.ts"
import * as Pipeline from "../src/Pipeline.ts"
import { calls, candidate, input, result, stored, user } from "./Helpers.ts"
import type { Conversation } from "@ctxd/contracts"

const MIN = 4_096
const turn = (over: Partial<Ledger.Turn>): Ledger.Turn => ({
  fullTotal: 5_000,
  sent: 0,
  read: 0.1,
  write: 1.25,
  minCacheable: MIN,
  cold: false,
  ...over,
})

describe("what the whole history costs", () => {
  it("is uncached under the minimum, written whole when cold, else read up to the previous turn's length", () => {
    const warm: Ledger.Ledger = { saved: 0, full: 0, fullTotal: 4_500 }
    expect(Ledger.fullCost(warm, turn({ fullTotal: 3_000 }))).toBe(3_000)
    expect(Ledger.fullCost(warm, turn({ cold: true }))).toBe(1.25 * 5_000)
    expect(Ledger.fullCost(Ledger.start, turn({}))).toBe(1.25 * 5_000)
    expect(Ledger.fullCost(warm, turn({}))).toBeCloseTo(0.1 * 4_500 + 1.25 * 500)
    // the previous prompt under the minimum was never cached
    expect(Ledger.fullCost({ ...warm, fullTotal: 4_000 }, turn({}))).toBe(1.25 * 5_000)
  })

  it("books the difference, and what may be spent is the savings plus the slack of the whole history's cost", () => {
    const after = Ledger.after(Ledger.start, turn({ sent: 1_000 }))
    expect(after).toEqual({ saved: 1.25 * 5_000 - 1_000, full: 1.25 * 5_000, fullTotal: 5_000 })
    expect(Ledger.spendable(after)).toBeCloseTo(after.saved + Ledger.SLACK * after.full)
    expect(Ledger.spendable({ saved: -500, full: 1_000, fullTotal: 0 })).toBe(0)
  })
})

const planOf = (previous: CachePlanner.Candidate | undefined, ledger: Ledger.Ledger | undefined): CachePlanner.Plan => ({
  previous,
  read: 0.1,
  write: 1.25,
  expectedTurns: 50,
  cold: false,
  ttlSeconds: 300,
  minCacheable: Math.floor(MIN * 0.9),
  providerMinCacheable: MIN,
  ledger,
})

describe("an optional edit under the ledger", () => {
  // holding 20,000 tokens against a candidate that cuts 10,000 of them and re-writes the rest
  const previous = candidate({ total: 20_000, sent: [{ index: 0, masked: false, tokens: 20_000 }], rent: { window: 12_000, mask: 0 } })
  const held = candidate({ total: 20_100, fullTotal: 20_100, sent: [...previous.sent, { index: 1, masked: false, tokens: 100 }] })
  const cut = candidate({
    windowStart: 1,
    total: 10_100,
    fullTotal: 20_100,
    sent: [{ index: 1, masked: false, tokens: 10_100 }],
    advances: ["window"],
  })

  it("is made when the rent and the expected turns pay for it and the savings cover it", () => {
    const rich = { saved: 20_000, full: 100_000, fullTotal: 20_000 }
    expect(CachePlanner.choose(planOf(previous, rich), [held, cut]).chosen).toBe(cut)
    // no ledger kept (a caller of the pipeline without one): today's rule alone
    expect(CachePlanner.choose(planOf(previous, undefined), [held, cut]).chosen).toBe(cut)
  })

  it("is held while the savings do not cover its premium, however long the session is expected to go on", () => {
    const poor = { saved: 1_000, full: 100_000, fullTotal: 20_000 }
    const out = CachePlanner.choose(planOf(previous, poor), [held, cut])
    expect(out.chosen).toBe(held)
    expect(out.cache.deferred).toEqual(["window"])
  })
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

describe("a session planned under the ledger", () => {
  // every prompt above the minimum, as cacheable as the whole history: holding never costs more than
  // it, so only a choice can (under the minimum, `NoHarm` weighs the unedited prompt; CachePlannerNoHarm.test.ts)
  it("never costs more than the whole history's slack beyond it, at any turn, whatever the cold turns and the guess of the turns to come (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 60, max: 3_000 }), { minLength: 2, maxLength: 30 }),
        fc.integer({ min: MIN, max: 6_000 }),
        fc.integer({ min: 1, max: 200 }),
        // a cold turn now and then (a human pause): one in ten
        fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 30, maxLength: 30 }),
        fc.boolean(),
        (sizes, systemTokens, expectedTurns, colds, masking) => {
          const history = session(sizes)
          // masking on or off: with it off the window's cuts, each a re-write of the conversation, are the only edits
          const options = {
            ...Pipeline.resolveOptions({ windowMessages: 12, windowStep: 6 }),
            ...(masking ? { maskKeep: 1, maskBatchTokens: 50 } : {}),
          }
          let previous: CachePlanner.Candidate | undefined
          let ledger = Ledger.start
          for (let end = 3, k = 0; end <= history.length; end += 2, k++) {
            // a guess of the turns to come that is often far too long: the ledger, not the guess, bounds the loss
            const plan = { ...planOf(previous, ledger), expectedTurns, cold: colds[k] === 0 && previous !== undefined }
            const out = Pipeline.run(input(history.slice(0, end), { systemTokens, options, cachePlan: plan }))
            ledger = out.shape!.ledger!
            expect(ledger.saved).toBeGreaterThanOrEqual(-Ledger.SLACK * ledger.full - 1e-6)
            previous = out.shape
          }
        },
      ),
      { numRuns: 200 },
    )
  })
})
