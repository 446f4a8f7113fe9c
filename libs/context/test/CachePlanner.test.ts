/** The cache planner: why a prefix changed, which candidate is kept, and the pipeline's invariants with it on. */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as CachePlanner from "../src/CachePlanner.ts"
import * as CostModel from "../src/CostModel.ts"
import * as Pipeline from "../src/Pipeline.ts"
import { assembleInput } from "./Generators.ts"
import {
  anthropicPairingProblems,
  anthropicShapeProblems,
  assistant,
  calls,
  input,
  openaiPairingProblems,
  results,
  stored,
  user,
  candidate,
} from "./Helpers.ts"

const plan = (over: Partial<CachePlanner.Plan> = {}): CachePlanner.Plan => ({
  previous: candidate(),
  read: 0.1,
  write: 1.25,
  expectedTurns: 5,
  cold: false,
  ttlSeconds: 300,
  minCacheable: 1_024,
  ...over,
})

describe("CachePlanner.prefixOf", () => {
  const previous = candidate()
  it("names the first difference from the previous prompt and counts the tokens before it", () => {
    const appended = candidate({ sent: [...previous.sent, { index: 3, masked: false, tokens: 50 }] })
    expect(CachePlanner.prefixOf(appended, previous)).toEqual({ tokens: 2_200, reason: "append" })
    const masked = candidate({ sent: [previous.sent[0]!, { index: 1, masked: true, tokens: 10 }, previous.sent[2]!] })
    expect(CachePlanner.prefixOf(masked, previous)).toEqual({ tokens: 1_100, reason: "mask" })
    const windowed = candidate({ windowStart: 2, sent: [{ index: 2, masked: false, tokens: 100 }] })
    expect(CachePlanner.prefixOf(windowed, previous)).toEqual({ tokens: 1_000, reason: "window" })
    expect(CachePlanner.prefixOf(candidate({ toolsKey: "u" }), previous)).toEqual({ tokens: 0, reason: "tools" })
    expect(CachePlanner.prefixOf(candidate({ systemKey: "u" }), previous)).toEqual({ tokens: 500, reason: "system" })
    expect(CachePlanner.prefixOf(candidate(), undefined)).toEqual({ tokens: 0, reason: "first_turn" })
    expect(CachePlanner.prefixOf(candidate(), previous, true)).toEqual({ tokens: 1_000, reason: "summary" })
  })
})

describe("CachePlanner.choose", () => {
  // holding: everything read; advancing: masks 900 tokens at the 1,100th, the rest re-written
  const held = candidate({ sent: [...candidate().sent, { index: 3, masked: false, tokens: 50 }], total: 2_250 })
  const advanced = candidate({
    maskBoundary: 2,
    sent: [candidate().sent[0]!, { index: 1, masked: true, tokens: 100 }, candidate().sent[2]!, { index: 3, masked: false, tokens: 50 }],
    total: 1_350,
    advances: ["mask"],
  })
  // this turn: holding reads 2,200 and writes 50; advancing reads 1,100 and writes 250 (premium 140)
  const premium = 0.1 * 1_100 + 1.25 * 250 - (0.1 * 2_200 + 1.25 * 50)
  const saving = 0.1 * (2_250 - 1_350)
  const withRent = (mask: number) => candidate({ rent: { window: 0, mask } })

  it("holds an edit until the reads it would have saved reach its premium (rent or buy), then makes it", () => {
    expect(premium).toBeCloseTo(140, 6)
    const first = CachePlanner.choose(plan({ expectedTurns: 50 }), [held, advanced])
    expect(first.chosen).toBe(held)
    expect(first.cache).toMatchObject({
      reason: "append",
      changedAtTokens: 2_200,
      expectedReadTokens: 2_200,
      expectedWriteTokens: 50,
      deferred: ["mask"],
    })
    expect(first.rent.mask).toBeCloseTo(saving, 6)
    // the rent grows by the saving each turn held; one short of the premium still holds
    const almost = CachePlanner.choose(plan({ expectedTurns: 50, previous: withRent(premium - 1) }), [held, advanced])
    expect(almost.chosen).toBe(held)
    expect(almost.rent.mask).toBeCloseTo(premium - 1 + saving, 6)
    const earned = CachePlanner.choose(plan({ expectedTurns: 50, previous: withRent(premium) }), [held, advanced])
    expect(earned.chosen).toBe(advanced)
    expect(earned.cache).toMatchObject({
      reason: "mask",
      changedAtTokens: 1_100,
      expectedReadTokens: 1_100,
      expectedWriteTokens: 250,
      deferred: [],
    })
    expect(earned.rent).toEqual({ window: 0, mask: 0 })
  })

  it("never makes an optional edit that would not pay back before the session is expected to end", () => {
    const rich = plan({ previous: withRent(1e9) })
    expect(CachePlanner.choose({ ...rich, expectedTurns: 1 }, [held, advanced]).chosen).toBe(held)
    expect(CachePlanner.choose({ ...rich, expectedTurns: Math.ceil(premium / saving) }, [held, advanced]).chosen).toBe(advanced)
  })

  it("makes an edit at once when it costs nothing extra this turn", () => {
    // a 19,000-token message masked near the end: re-writing 1,000 tokens is cheaper than reading it
    const big = candidate({
      sent: [...candidate().sent, { index: 3, masked: false, tokens: 19_000 }, { index: 4, masked: false, tokens: 50 }],
      total: 21_250,
    })
    const cut = candidate({
      ...big,
      maskBoundary: 4,
      sent: [...big.sent.slice(0, 3), { index: 3, masked: true, tokens: 950 }, big.sent[4]!],
      total: 3_200,
      advances: ["mask"],
    })
    const previous = candidate({ sent: big.sent.slice(0, 4), total: 21_200 })
    expect(CachePlanner.choose(plan({ previous, expectedTurns: 1 }), [big, cut]).chosen).toBe(cut)
  })

  it("makes every edit when the cache is cold (the rewrite is free), and keeps the previous positions on a tie", () => {
    const cold = CachePlanner.choose(plan({ expectedTurns: 0, cold: true, previous: withRent(5) }), [held, advanced])
    expect(cold.chosen).toBe(advanced)
    expect(cold.cache).toMatchObject({ reason: "ttl_expired", expectedReadTokens: 0, expectedWriteTokens: 1_350 })
    expect(cold.rent).toEqual({ window: 0, mask: 0 })
    expect(CachePlanner.choose(plan(), [held, { ...held, advances: ["mask"] }]).chosen).toBe(held)
  })

  it("never keeps a candidate over the budget when one fits (a forced edit), and reads nothing below the minimum prefix", () => {
    expect(CachePlanner.choose(plan({ expectedTurns: 0 }), [{ ...held, overBudget: true }, advanced]).chosen).toBe(advanced)
    expect(CachePlanner.costOf(plan({ minCacheable: 4_096 }), held).read).toBe(0)
  })

  it("bills a prompt under the minimum cacheable prefix at the base price, now and on every later turn", () => {
    // 2,250 tokens under a 4,096 minimum: nothing is written or read, every turn pays 2,250
    expect(CachePlanner.costOf(plan({ minCacheable: 4_096, expectedTurns: 3 }), held).cost).toBe(2_250 * 4)
    // over a 1,024 minimum: 2,200 read at 0.1, 50 written at 1.25, later turns read 2,250 at 0.1
    expect(CachePlanner.costOf(plan({ minCacheable: 1_024, expectedTurns: 3 }), held).cost).toBeCloseTo(220 + 62.5 + 3 * 225, 6)
  })

  it("charges the mask edit its own saving and the window the rest, and starts a made edit's rent again", () => {
    // three candidates: hold, the mask alone (saves 900), the window too (saves 900 + 1,000)
    const maskOnly = { ...advanced, advances: ["mask"] as const }
    const both = candidate({ ...advanced, windowStart: 1, sent: advanced.sent.slice(1), total: 350, advances: ["window", "mask"] })
    const r = { window: 7, mask: 3 }
    const holding = CachePlanner.choose(plan({ previous: candidate({ rent: r }) }), [held, maskOnly, both])
    expect(holding.chosen).toBe(held)
    expect(holding.cache.deferred).toEqual(["window", "mask"])
    expect(holding.rent.mask).toBeCloseTo(3 + 90, 6)
    expect(holding.rent.window).toBeCloseTo(7 + 100, 6)
    const masked = CachePlanner.choose(plan({ expectedTurns: 50, previous: candidate({ rent: { window: 0, mask: 1e6 } }) }), [
      held,
      maskOnly,
      both,
    ])
    expect(masked.chosen).toBe(maskOnly)
    expect(masked.rent).toEqual({ window: 100, mask: 0 })
  })
})

describe("CachePlanner.swapSummary", () => {
  // holding reads 9,000 and writes 1,000 (cost 2,150); swapping writes 3,000 (3,750): premium 1,600, saving 700 a turn
  const held = { total: 10_000, overBudget: false, expectedReadTokens: 9_000, expectedWriteTokens: 1_000 }
  const swapped = { total: 3_000, overBudget: false, expectedReadTokens: 0, expectedWriteTokens: 3_000 }
  it("swaps when it pays back within the expected turns, holds otherwise", () => {
    expect(CachePlanner.swapSummary(plan({ expectedTurns: 3 }), held, swapped)).toBe(true)
    expect(CachePlanner.swapSummary(plan({ expectedTurns: 2 }), held, swapped)).toBe(false)
  })
  it("swaps at once when the cache is cold, when holding is over the budget, or when it costs nothing extra", () => {
    expect(CachePlanner.swapSummary(plan({ expectedTurns: 0, cold: true }), held, swapped)).toBe(true)
    expect(CachePlanner.swapSummary(plan({ expectedTurns: 0 }), { ...held, overBudget: true }, swapped)).toBe(true)
    expect(
      CachePlanner.swapSummary(plan({ expectedTurns: 0 }), { ...held, expectedReadTokens: 0, expectedWriteTokens: 10_000 }, swapped),
    ).toBe(true)
  })
})

describe("CachePlanner.chooseTier", () => {
  const tiers = CostModel.lookup("claude-sonnet-4-5").tiers
  const choose = (gaps: ReadonlyArray<number>, prompt = 50_000, added = 500) =>
    CachePlanner.chooseTier(tiers, 0.1, gaps, prompt, added).name

  it("keeps the default 5 minutes until it has seen a few gaps, and while the agent works without pauses", () => {
    expect(choose([])).toBe("5m")
    expect(choose([900, 900])).toBe("5m")
    expect(choose([3, 12, 8, 20, 5, 7, 2, 15])).toBe("5m")
  })

  it("takes 1 hour when pauses of 5-60 minutes are common and the prompt is large, not when they outlast the hour", () => {
    // one turn in four after a 10-minute pause: re-writing 50k tokens at 1.25× loses to paying 2× on 500 new ones
    expect(choose([5, 5, 5, 600, 5, 5, 5, 600])).toBe("1h")
    // a small prompt: the re-write is cheap, the premium on every turn's new tokens is not
    expect(choose([5, 5, 5, 600, 5, 5, 5, 600], 1_000, 500)).toBe("5m")
    // pauses longer than an hour: 1 h does not keep the cache either
    expect(choose([5, 5, 5, 7_200, 5, 5, 5, 7_200])).toBe("5m")
  })

  it("follows the session's recent rhythm: only the last MAX_GAPS gaps count", () => {
    let gaps: ReadonlyArray<number> = []
    for (const g of [600, 600, 600, 600]) gaps = CachePlanner.recordGap(gaps, g)
    expect(choose(gaps)).toBe("1h")
    for (let i = 0; i < CachePlanner.MAX_GAPS; i++) gaps = CachePlanner.recordGap(gaps, 4)
    expect(gaps).toHaveLength(CachePlanner.MAX_GAPS)
    expect(choose(gaps)).toBe("5m")
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

  it("defers a mask edit until it is earned, never on a short horizon, and makes it when the cache is cold", () => {
    const history = session()
    // the previous prompt ends with the 11th result; this turn adds a 12th, and the 10th (cached) becomes maskable
    const before = Pipeline.run(input(history.slice(0, 23), { options, cachePlan: plan({ previous: undefined }) }))
    const next = (over: Partial<CachePlanner.Plan>, rent = 0) =>
      Pipeline.run(
        input(history, {
          options,
          cachePlan: { ...plan({ previous: { ...before.shape!, rent: { window: 0, mask: rent } }, minCacheable: 0 }), ...over },
        }),
      )
    const unearned = next({ expectedTurns: 500 })
    expect(unearned.report.cache).toMatchObject({ reason: "append", deferred: ["mask"] })
    expect(unearned.shape?.rent?.mask).toBeGreaterThan(0)
    expect(next({ expectedTurns: 0 }, 1e9).report.cache.deferred).toEqual(["mask"])
    const earned = next({ expectedTurns: 500 }, 1e9)
    expect(earned.report.cache).toMatchObject({ reason: "mask", deferred: [] })
    expect(earned.shape?.rent).toEqual({ window: 0, mask: 0, rung: 0 })
    expect(earned.report.tokens.total).toBeLessThan(unearned.report.tokens.total)
    expect(next({ expectedTurns: 0, cold: true }).report.cache).toMatchObject({ reason: "ttl_expired", deferred: [] })
  })

  it("moves an edit it makes as far as it goes (no grid): the window to exactly windowMessages, the mask to the last K", () => {
    const history = session()
    const windowed = { ...options, windowMessages: 10, windowStep: 20, maskBatchTokens: 100_000 }
    const planned = Pipeline.run(input(history, { options: windowed, cachePlan: plan({ previous: undefined }) }))
    const unplanned = Pipeline.run(input(history, { options: windowed }))
    // the anchor plus exactly the last 10 messages; without the planner the 20-message grid keeps more
    expect(planned.report.messages.sent).toBe(11)
    expect(unplanned.report.messages.sent).toBeGreaterThan(11)
    // every consumed result older than the last 2 is masked; the 100,000-token grid masks none
    expect(planned.report.masking?.masked).toBeGreaterThan(0)
    expect(unplanned.report.masking?.masked).toBe(0)
  })

  it("sends the tools whole when compression is what keeps the prompt under the minimum cacheable prefix", () => {
    const tool = {
      name: "search",
      description: "Search the catalog. ".repeat(40),
      inputSchema: {
        type: "object",
        properties: Object.fromEntries(
          Array.from({ length: 12 }, (_, i) => [`p${i}`, { type: "string", description: "word ".repeat(25) }]),
        ),
      },
    }
    const count = (tools: ReadonlyArray<unknown>) => Math.ceil(JSON.stringify(tools).length / 4)
    const history = stored([user("find it")], () => 20)
    const planned = (minCacheable: number, over: Partial<CachePlanner.Plan> = {}) =>
      Pipeline.run(
        input(history, {
          tools: [tool],
          toolsTokens: count([tool]),
          countTools: count,
          options: Pipeline.resolveOptions({ toolCompression: "truncate" }),
          cachePlan: plan({ previous: undefined, minCacheable, ...over }),
        }),
      )
    const whole = count([tool]) + 25
    // compressed, the prompt is below the minimum; whole, it reaches it: whole it goes
    const lifted = planned(whole - 10)
    expect(lifted.report.tools?.compression).toBe("none")
    expect(lifted.shape?.compression).toBe("none")
    // a minimum nothing reaches, or one the compressed prompt reaches anyway: the configured compression
    expect(planned(100_000).report.tools?.compression).toBe("truncate")
    expect(planned(10).report.tools?.compression).toBe("truncate")
    // whole while the cache is warm, even where compressed would be cacheable now; back at a cold moment
    const warm = { previous: { ...lifted.shape! }, cold: false }
    expect(planned(10, warm).report.tools?.compression).toBe("none")
    expect(planned(10, { ...warm, cold: true }).report.tools?.compression).toBe("truncate")
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
