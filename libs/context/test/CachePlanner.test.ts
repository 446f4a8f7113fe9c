/** The cache planner: why a prefix changed, which candidate is kept, and the pipeline's invariants with it on. */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as CachePlanner from "../src/CachePlanner.ts"
import * as Pipeline from "../src/Pipeline.ts"
import { assembleInput } from "./Generators.ts"
import { anthropicPairingProblems, anthropicShapeProblems, assistant, calls, input, openaiPairingProblems, results, stored, user } from "./Helpers.ts"

const shape = (over: Partial<CachePlanner.Candidate> = {}): CachePlanner.Candidate => ({
  windowStart: 0,
  maskBoundary: 0,
  sent: [
    { index: 0, masked: false, tokens: 100 },
    { index: 1, masked: false, tokens: 1_000 },
    { index: 2, masked: false, tokens: 100 },
  ],
  systemKey: "s",
  toolsKey: "t",
  systemTokens: 500,
  toolsTokens: 500,
  total: 2_200,
  overBudget: false,
  ...over,
})

const plan = (over: Partial<CachePlanner.Plan> = {}): CachePlanner.Plan => ({
  previous: shape(),
  read: 0.1,
  write: 1.25,
  expectedTurns: 5,
  cold: false,
  ttlSeconds: 300,
  minCacheable: 1_024,
  ...over,
})

describe("CachePlanner.prefixOf", () => {
  const previous = shape()
  it("names the first difference from the previous prompt and counts the tokens before it", () => {
    const appended = shape({ sent: [...previous.sent, { index: 3, masked: false, tokens: 50 }] })
    expect(CachePlanner.prefixOf(appended, previous)).toEqual({ tokens: 2_200, reason: "append" })
    const masked = shape({ sent: [previous.sent[0]!, { index: 1, masked: true, tokens: 10 }, previous.sent[2]!] })
    expect(CachePlanner.prefixOf(masked, previous)).toEqual({ tokens: 1_100, reason: "mask" })
    const windowed = shape({ windowStart: 2, sent: [{ index: 2, masked: false, tokens: 100 }] })
    expect(CachePlanner.prefixOf(windowed, previous)).toEqual({ tokens: 1_000, reason: "window" })
    expect(CachePlanner.prefixOf(shape({ toolsKey: "u" }), previous)).toEqual({ tokens: 0, reason: "tools" })
    expect(CachePlanner.prefixOf(shape({ systemKey: "u" }), previous)).toEqual({ tokens: 500, reason: "system" })
    expect(CachePlanner.prefixOf(shape(), undefined)).toEqual({ tokens: 0, reason: "first_turn" })
    expect(CachePlanner.prefixOf(shape(), previous, true)).toEqual({ tokens: 1_000, reason: "summary" })
  })
})

describe("CachePlanner.choose", () => {
  // holding: everything read; advancing: masks 900 tokens at the 1,100th, the rest re-written
  const held = shape({ sent: [...shape().sent, { index: 3, masked: false, tokens: 50 }], total: 2_250 })
  const advanced = shape({
    maskBoundary: 2,
    sent: [shape().sent[0]!, { index: 1, masked: true, tokens: 100 }, shape().sent[2]!, { index: 3, masked: false, tokens: 50 }],
    total: 1_350,
  })

  it("holds an edit that does not pay back over the turns to come, and makes it once it does", () => {
    const short = CachePlanner.choose(plan({ expectedTurns: 1 }), [held, advanced])
    expect(short.chosen).toBe(held)
    expect(short.cache).toMatchObject({ reason: "append", changedAtTokens: 2_200, expectedReadTokens: 2_200, expectedWriteTokens: 50, deferred: ["mask"] })
    const long = CachePlanner.choose(plan({ expectedTurns: 50 }), [held, advanced])
    expect(long.chosen).toBe(advanced)
    expect(long.cache).toMatchObject({ reason: "mask", changedAtTokens: 1_100, expectedReadTokens: 1_100, expectedWriteTokens: 250, deferred: [] })
  })

  it("makes every edit when the cache is cold (the rewrite is free), and keeps the previous positions on a tie", () => {
    const cold = CachePlanner.choose(plan({ expectedTurns: 0, cold: true }), [held, advanced])
    expect(cold.chosen).toBe(advanced)
    expect(cold.cache).toMatchObject({ reason: "ttl_expired", expectedReadTokens: 0, expectedWriteTokens: 1_350 })
    expect(CachePlanner.choose(plan(), [held, { ...held }]).chosen).toBe(held)
  })

  it("never keeps a candidate over the budget when one fits (a forced edit), and reads nothing below the minimum prefix", () => {
    expect(CachePlanner.choose(plan({ expectedTurns: 0 }), [{ ...held, overBudget: true }, advanced]).chosen).toBe(advanced)
    expect(CachePlanner.costOf(plan({ minCacheable: 4_096 }), held).read).toBe(0)
  })
})

describe("the pipeline with the planner", () => {
  /** A session with large tool results between long calls: masking wants to advance, and an edit re-writes the calls after it. */
  const session = () => {
    const messages = [user("start")]
    for (let i = 0; i < 12; i++) messages.push(calls(`c${i}`), results(`c${i}`))
    messages.push(assistant("done"), user("next"))
    return stored(messages, (i) => (i === 0 || i >= 25 ? 20 : i % 2 === 0 ? 400 : 300))
  }
  const options = Pipeline.resolveOptions({ maskKeep: 2, maskBatchTokens: 500, windowMessages: 1_000 })

  it("defers a mask edit on a short horizon and makes it on a long one or when the cache is cold", () => {
    const history = session()
    const before = Pipeline.run(input(history.slice(0, 20), { options }))
    const next = (over: Partial<CachePlanner.Plan>) =>
      Pipeline.run(input(history, { options, cachePlan: { ...plan({ previous: before.shape, minCacheable: 0 }), ...over } }))
    const short = next({ expectedTurns: 0 })
    expect(short.report.cache.deferred).toEqual(["mask"])
    expect(short.report.cache.reason).toBe("append")
    const long = next({ expectedTurns: 500 })
    expect(long.report.cache.deferred).toEqual([])
    expect(long.report.tokens.total).toBeLessThan(short.report.tokens.total)
    expect(next({ expectedTurns: 0, cold: true }).report.cache).toMatchObject({ reason: "ttl_expired", deferred: [] })
  })

  it("marks the cache frontier before the mask boundary with a fourth breakpoint", () => {
    const history = session()
    const out = Pipeline.run(input(history, { options, cachePlan: plan({ previous: undefined }) }))
    expect(out.report.masking?.masked).toBeGreaterThan(0)
    expect(out.report.cache.breakpoints).toBe(Pipeline.run(input(history, { options })).report.cache.breakpoints + 1)
    expect(anthropicShapeProblems(out.request, out.report.cache.breakpoints)).toEqual([])
  })

  it("keeps every invariant with the planner on, in both formats (property)", () => {
    fc.assert(
      fc.property(assembleInput, fc.nat(), fc.boolean(), fc.nat({ max: 200 }), (random, at, cold, expectedTurns) => {
        const base = { ...random, options: { ...random.options, maskKeep: 1, maskBatchTokens: 50 } }
        const cut = random.history.length === 0 ? 0 : at % (random.history.length + 1)
        const previous = Pipeline.run({ ...base, history: base.history.slice(0, cut) }).shape
        const planned = { ...base, cachePlan: plan({ previous, cold, expectedTurns, minCacheable: 0 }) }
        const out = Pipeline.run(planned)
        expect(out).toEqual(Pipeline.run(planned))
        expect(out.report.cache.breakpoints).toBeLessThanOrEqual(4)
        if (random.format === "anthropic") {
          expect(anthropicShapeProblems(out.request, out.report.cache.breakpoints)).toEqual([])
          expect(anthropicPairingProblems(out.request)).toEqual([])
        } else expect(openaiPairingProblems(out.request)).toEqual([])
        if (random.history.at(-1)?.message.role === "user") expect(out.report.messages.lastSentSeq).toBe(random.history.at(-1)!.seq)
        if (out.report.tokens.total > out.report.tokens.budget) expect(out.report.overBudget).toBe(true)
      }),
      { numRuns: 200 },
    )
  })
})
