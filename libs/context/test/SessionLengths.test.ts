/** Expected remaining turns from a history of session lengths: buckets, the conditional mean, the fallback. */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { SessionLengths } from "../src/index.ts"

const { BUCKETS, bucketOf, lowerBound, defaults } = SessionLengths

/** A histogram of `[turns, sessions]` entries. */
const history = (entries: ReadonlyArray<readonly [turns: number, sessions: number]>) =>
  SessionLengths.fromCounts(entries.map(([turns, sessions]) => ({ turns, sessions })))

describe("SessionLengths buckets", () => {
  it("keeps lengths below 64 exactly, then 8 buckets per doubling, everything from the cap in the last", () => {
    expect(BUCKETS).toBe(145)
    for (let n = 0; n < 64; n++) expect([bucketOf(n), lowerBound(bucketOf(n))]).toEqual([n, n])
    expect(bucketOf(64)).toBe(64)
    expect(bucketOf(71)).toBe(64)
    expect(bucketOf(72)).toBe(65)
    expect(lowerBound(65)).toBe(72)
    expect(bucketOf(128)).toBe(72)
    expect(lowerBound(72)).toBe(128)
    expect(bucketOf(defaults.cap - 1)).toBe(BUCKETS - 2)
    expect(bucketOf(defaults.cap)).toBe(BUCKETS - 1)
    expect(bucketOf(10 ** 9)).toBe(BUCKETS - 1)
    expect(bucketOf(Number.POSITIVE_INFINITY)).toBe(BUCKETS - 1)
    expect(lowerBound(BUCKETS - 1)).toBe(defaults.cap)
    expect([bucketOf(-3), bucketOf(2.7), bucketOf(Number.NaN)]).toEqual([0, 2, 0])
  })

  it("has increasing lower bounds, each bucket at most about 1/8 of its length wide", () => {
    for (let i = 1; i < BUCKETS; i++) {
      expect(lowerBound(i)).toBeGreaterThan(lowerBound(i - 1))
      expect(bucketOf(lowerBound(i))).toBe(i)
      expect(bucketOf(lowerBound(i) - 1)).toBe(i - 1)
      if (i < BUCKETS - 1) expect(lowerBound(i + 1) - lowerBound(i)).toBeLessThanOrEqual(Math.max(1, lowerBound(i) / 8))
    }
  })

  it("puts a length in the bucket whose range holds it", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), (n) => {
        const i = bucketOf(n)
        expect(i).toBeGreaterThanOrEqual(0)
        expect(i).toBeLessThan(BUCKETS)
        expect(lowerBound(i)).toBeLessThanOrEqual(n)
        if (i < BUCKETS - 1) expect(n).toBeLessThan(lowerBound(i + 1))
      }),
    )
  })

  it("a histogram has a fixed size, whatever it holds", () => {
    const h = history([
      [3, 2],
      [3, 1],
      [5_000_000, 4],
      [70, 1],
      [9, 0],
    ])
    expect(h.counts).toHaveLength(BUCKETS)
    expect(SessionLengths.sessions(h)).toBe(8)
    expect(h.counts[3]).toBe(3)
    expect(h.counts[BUCKETS - 1]).toBe(4)
    expect(SessionLengths.empty.counts).toHaveLength(BUCKETS)
  })
})

describe("SessionLengths.estimate", () => {
  it("falls back to the rule (half the turns so far, at least 1) without a history or below the minimum", () => {
    expect(SessionLengths.rule(0)).toBe(1)
    expect(SessionLengths.rule(9)).toBe(4)
    expect(SessionLengths.estimate(undefined, 9)).toEqual({ turns: 4, from: "rule", sessions: 0 })
    const thin = history([[100, defaults.minSessions - 1]])
    expect(SessionLengths.estimate(thin, 10)).toEqual({ turns: 5, from: "rule", sessions: defaults.minSessions - 1 })
    // the caller's own rule of thumb stands when the history is too thin
    expect(SessionLengths.expectedTurns(thin, 10, 7)).toBe(7)
    // enough sessions in all, but too few got as far as this one
    const short = history([
      [4, 100],
      [50, 5],
    ])
    expect(SessionLengths.estimate(short, 10)).toMatchObject({ from: "rule", sessions: 5 })
    expect(SessionLengths.estimate(short, 10, 5, 5)).toEqual({ turns: 40, from: "history", sessions: 5 })
  })

  it("is the mean of what the sessions that got as far went on for: mean(L − s | L ≥ s)", () => {
    const h = history([
      [2, 50],
      [10, 10],
      [20, 10],
      [40, 20],
    ])
    // every session got as far as turn 0: (50×2 + 10×10 + 10×20 + 20×40) / 90
    expect(SessionLengths.estimate(h, 0)).toEqual({ turns: 1_200 / 90, from: "history", sessions: 90 })
    // at 10: the 40 sessions of 10, 20 and 40 turns; (0 + 10×10 + 20×30) / 40
    expect(SessionLengths.estimate(h, 10)).toEqual({ turns: 700 / 40, from: "history", sessions: 40 })
    // at 11: the 30 of 20 and 40 turns
    expect(SessionLengths.estimate(h, 11)).toEqual({ turns: (10 * 9 + 20 * 29) / 30, from: "history", sessions: 30 })
    // a history of sessions that all end here: nothing to come
    expect(SessionLengths.estimate(history([[6, 30]]), 6)).toEqual({ turns: 0, from: "history", sessions: 30 })
  })

  it("counts a session in a log bucket at the bucket's lower end (conservative)", () => {
    // 100 and 103 both fall in [96, 104)
    const h = history([
      [100, 15],
      [103, 15],
    ])
    expect(bucketOf(100)).toBe(bucketOf(103))
    expect(lowerBound(bucketOf(100))).toBe(96)
    expect(SessionLengths.estimate(h, 10)).toEqual({ turns: 86, from: "history", sessions: 30 })
    expect(SessionLengths.estimate(h, 96)).toMatchObject({ turns: 0, from: "history" })
    // past the bucket's lower end, its sessions no longer count as having got as far
    expect(SessionLengths.estimate(h, 97)).toMatchObject({ from: "rule", sessions: 0 })
  })

  it("is never negative, and never more than the longest session's remainder", () => {
    const entries = fc.array(fc.tuple(fc.integer({ min: 0, max: 200_000 }), fc.integer({ min: 1, max: 50 })), { maxLength: 40 })
    fc.assert(
      fc.property(entries, fc.integer({ min: 0, max: 200_000 }), (entries, s) => {
        const { turns, from } = SessionLengths.estimate(history(entries), s)
        expect(turns).toBeGreaterThanOrEqual(0)
        if (from === "history") expect(turns).toBeLessThanOrEqual(Math.max(...entries.map(([l]) => l)) - s)
      }),
    )
  })
})
