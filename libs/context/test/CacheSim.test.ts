import { describe, expect, it } from "vitest"
import * as CacheSim from "../src/CacheSim.ts"
import * as CostModel from "../src/CostModel.ts"

const sonnet = CostModel.lookup("claude-sonnet-4-5")
const gpt = CostModel.lookup("gpt-4o")

/** Blocks `names` of `tokens` each; the last one carries a 5-minute breakpoint unless `mark` says otherwise. */
const blocks = (names: ReadonlyArray<string>, tokens = 1_000, mark: ReadonlyArray<number> | "last" = "last"): Array<CacheSim.Block> =>
  names.map((hash, i) => ({
    hash,
    tokens,
    ...((mark === "last" ? i === names.length - 1 : mark.includes(i)) ? { breakpoint: "5m" } : {}),
  }))

const names = (n: number, prefix = "b"): Array<string> => Array.from({ length: n }, (_, i) => `${prefix}${i}`)

describe("CacheSim, explicit (Anthropic)", () => {
  it("append-only conversation: each turn reads the previous prefix and writes only the new tail", () => {
    const usages = CacheSim.simulate(sonnet, [
      { at: 0, blocks: blocks(names(3)) },
      { at: 10, blocks: blocks(names(5)) },
      { at: 20, blocks: blocks(names(8)), output: 50 },
    ])
    expect(usages).toEqual([
      { cacheRead: 0, cacheWrite: { "5m": 3_000 }, uncached: 0, output: 0 },
      { cacheRead: 3_000, cacheWrite: { "5m": 2_000 }, uncached: 0, output: 0 },
      { cacheRead: 5_000, cacheWrite: { "5m": 3_000 }, uncached: 0, output: 50 },
    ])
  })

  it("a change at block p invalidates everything after p", () => {
    const first = names(6)
    const second = [...first.slice(0, 2), "changed", ...first.slice(3), "b6"]
    // A breakpoint on the tools-like block 1 and on the last block, as ctxd renders.
    const usages = CacheSim.simulate(sonnet, [
      { at: 0, blocks: blocks(first, 1_000, [1, 5]) },
      { at: 10, blocks: blocks(second, 1_000, [1, 6]) },
    ])
    expect(usages[1]).toEqual({ cacheRead: 2_000, cacheWrite: { "5m": 5_000 }, uncached: 0, output: 0 })
  })

  it("without an earlier breakpoint, a change before the cached prefix rewrites everything", () => {
    const usages = CacheSim.simulate(sonnet, [
      { at: 0, blocks: blocks(names(6)) },
      { at: 10, blocks: blocks(["x", ...names(6).slice(1)]) },
    ])
    expect(usages[1]).toEqual({ cacheRead: 0, cacheWrite: { "5m": 6_000 }, uncached: 0, output: 0 })
  })

  it("TTL expiry makes the next request write everything; a read refreshes the TTL", () => {
    const base = names(4)
    const usages = CacheSim.simulate(sonnet, [
      { at: 0, blocks: blocks(base) },
      { at: 299, blocks: blocks(base) }, // read: entry now lives until 599
      { at: 598, blocks: blocks(base) }, // still live thanks to the refresh
      { at: 898, blocks: blocks(base) }, // 300 s after the last use: gone
    ])
    expect(usages.map((u) => u.cacheRead)).toEqual([0, 4_000, 4_000, 0])
    expect(usages[3]!.cacheWrite).toEqual({ "5m": 4_000 })
  })

  it("a 1-hour breakpoint survives a 30-minute pause, the 5-minute tail does not", () => {
    const first: Array<CacheSim.Block> = [
      { hash: "tools", tokens: 2_000, breakpoint: "1h" },
      { hash: "m0", tokens: 1_000 },
      { hash: "m1", tokens: 1_000, breakpoint: "5m" },
    ]
    const usages = CacheSim.simulate(sonnet, [
      { at: 0, blocks: first },
      {
        at: 1_800,
        blocks: [...first, { hash: "m2", tokens: 500, breakpoint: "5m" }].map((b, i) => (i === 2 ? { hash: b.hash, tokens: b.tokens } : b)),
      },
    ])
    expect(usages[0]).toEqual({ cacheRead: 0, cacheWrite: { "1h": 2_000, "5m": 2_000 }, uncached: 0, output: 0 })
    expect(usages[1]).toEqual({ cacheRead: 2_000, cacheWrite: { "5m": 2_500 }, uncached: 0, output: 0 })
    expect(CostModel.inputUnits(sonnet, usages[0]!)).toBe(2_000 * 2 + 2_000 * 1.25)
  })

  it("looks back at most 20 blocks before a breakpoint", () => {
    const start = names(5)
    const near = [...start, ...names(20, "n")] // the old breakpoint (block 4) is 20 blocks back
    const far = [...start, ...names(21, "n")] // 21 blocks back
    expect(
      CacheSim.simulate(sonnet, [
        { at: 0, blocks: blocks(start, 300) },
        { at: 5, blocks: blocks(near, 300) },
      ])[1]!.cacheRead,
    ).toBe(1_500)
    expect(
      CacheSim.simulate(sonnet, [
        { at: 0, blocks: blocks(start, 300) },
        { at: 5, blocks: blocks(far, 300) },
      ])[1]!.cacheRead,
    ).toBe(0)
  })

  it("caches nothing below the minimum prefix; tokens after the last breakpoint are uncached", () => {
    const small = CacheSim.simulate(sonnet, [
      { at: 0, blocks: blocks(names(3), 300) },
      { at: 5, blocks: blocks(names(3), 300) },
    ])
    expect(small).toEqual([
      { cacheRead: 0, cacheWrite: {}, uncached: 900, output: 0 },
      { cacheRead: 0, cacheWrite: {}, uncached: 900, output: 0 },
    ])
    const tail = CacheSim.simulate(sonnet, [{ at: 0, blocks: blocks(names(4), 600, [1]) }])
    expect(tail[0]).toEqual({ cacheRead: 0, cacheWrite: { "5m": 1_200 }, uncached: 1_200, output: 0 })
    // A model with a 4,096-token minimum does not cache the same 2,400-token prompt.
    const haiku = CostModel.lookup("claude-haiku-4-5")
    expect(CacheSim.simulate(haiku, [{ at: 0, blocks: blocks(names(4), 600) }])[0]!.cacheWrite).toEqual({})
  })

  it("rejects more than 4 breakpoints", () => {
    expect(() => CacheSim.simulate(sonnet, [{ at: 0, blocks: blocks(names(5), 1_000, [0, 1, 2, 3, 4]) }])).toThrow(RangeError)
  })
})

describe("CacheSim, automatic (OpenAI)", () => {
  it("reads the longest seen prefix in 128-token steps beyond the first 1,024", () => {
    const usages = CacheSim.simulate(gpt, [
      { at: 0, blocks: [{ hash: "a", tokens: 1_500 }] },
      {
        at: 5,
        blocks: [
          { hash: "a", tokens: 1_500 },
          { hash: "b", tokens: 700 },
        ],
      },
      {
        at: 10,
        blocks: [
          { hash: "a", tokens: 1_500 },
          { hash: "b", tokens: 700 },
          { hash: "c", tokens: 10 },
        ],
      },
    ])
    // 1,500 matched → 1,024 + 3 × 128 = 1,408; 2,200 matched → 1,024 + 9 × 128 = 2,176.
    expect(usages).toEqual([
      { cacheRead: 0, cacheWrite: {}, uncached: 1_500, output: 0 },
      { cacheRead: 1_408, cacheWrite: {}, uncached: 792, output: 0 },
      { cacheRead: 2_176, cacheWrite: {}, uncached: 34, output: 0 },
    ])
  })

  it("matches across many small blocks", () => {
    const small = (n: number) => Array.from({ length: n }, (_, i) => ({ hash: `m${i}`, tokens: 100 }))
    const usages = CacheSim.simulate(gpt, [
      { at: 0, blocks: small(12) },
      { at: 5, blocks: small(20) },
    ])
    // 1,200 matched → 1,024 + 1 × 128 = 1,152.
    expect(usages[1]).toEqual({ cacheRead: 1_152, cacheWrite: {}, uncached: 848, output: 0 })
  })

  it("never caches prompts under 1,024 tokens; a change at p invalidates what follows", () => {
    expect(
      CacheSim.simulate(gpt, [
        { at: 0, blocks: [{ hash: "a", tokens: 1_000 }] },
        { at: 5, blocks: [{ hash: "a", tokens: 1_000 }] },
      ])[1]!.cacheRead,
    ).toBe(0)
    const usages = CacheSim.simulate(gpt, [
      {
        at: 0,
        blocks: [
          { hash: "a", tokens: 2_048 },
          { hash: "b", tokens: 2_048 },
          { hash: "c", tokens: 2_048 },
        ],
      },
      {
        at: 5,
        blocks: [
          { hash: "a", tokens: 2_048 },
          { hash: "x", tokens: 2_048 },
          { hash: "c", tokens: 2_048 },
        ],
      },
    ])
    expect(usages[1]).toEqual({ cacheRead: 2_048, cacheWrite: {}, uncached: 4_096, output: 0 })
  })

  it("expires after the TTL of inactivity and after one hour at most in memory", () => {
    const a = [{ hash: "a", tokens: 2_048 }]
    const reads = (times: ReadonlyArray<number>) =>
      CacheSim.simulate(
        gpt,
        times.map((at) => ({ at, blocks: a })),
      ).map((u) => u.cacheRead)
    expect(reads([0, 299, 600])).toEqual([0, 2_048, 0])
    // Used every 4 minutes: still evicted one hour after it was written.
    expect(reads([0, 240, 480, 720, 960, 1_200, 1_440, 1_680, 1_920, 2_160, 2_400, 2_640, 2_880, 3_120, 3_360, 3_600])).toEqual([
      0,
      ...Array<number>(14).fill(2_048),
      0,
    ])
    // The 24 h retention survives a 2-hour pause.
    const extended = CacheSim.simulate(
      { ...CostModel.lookup("gpt-5.1"), retention: "24h" },
      [0, 7_200].map((at) => ({ at, blocks: a })),
    )
    expect(extended[1]!.cacheRead).toBe(2_048)
  })
})
