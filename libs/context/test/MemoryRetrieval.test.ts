import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as MemoryRetrieval from "../src/MemoryRetrieval.ts"

const DAY = 86_400_000
const NOW = 1_800_000_000_000
/** About 4 characters a token, as the heuristic counter. */
const countText = (text: string) => Math.ceil(text.length / 4)

const word = fc.constantFrom(
  "refund",
  "flight",
  "seat",
  "baggage",
  "user",
  "prefers",
  "window",
  "aisle",
  "gold",
  "member",
  "cancel",
  "paris",
  "tokyo",
  "vegan",
  "meal",
  "late",
)
const candidate: fc.Arbitrary<MemoryRetrieval.Candidate> = fc.record({
  id: fc.string({ minLength: 1, maxLength: 6 }),
  text: fc.oneof(
    fc.array(word, { minLength: 0, maxLength: 40 }).map((ws) => ws.join(" ")),
    fc.string({ maxLength: 200 }),
  ),
  score: fc.oneof(fc.double({ min: 0, max: 2, noNaN: true }), fc.constant(0)),
  updatedAt: fc.integer({ min: NOW - 400 * DAY, max: NOW }),
})
const candidates = fc.uniqueArray(candidate, { selector: (c) => c.id, maxLength: 24 })

describe("MemoryRetrieval.budget", () => {
  it("is the smaller default (2,200 or 15 %) when nothing is set, the setting otherwise, never above what is available", () => {
    expect(MemoryRetrieval.budget(100_000)).toBe(2_200)
    expect(MemoryRetrieval.budget(10_000)).toBe(1_500)
    expect(MemoryRetrieval.budget(100_000, { tokens: 5_000 })).toBe(5_000)
    expect(MemoryRetrieval.budget(100_000, { fraction: 0.01 })).toBe(1_000)
    expect(MemoryRetrieval.budget(100_000, { tokens: 5_000, fraction: 0.01 })).toBe(1_000)
    expect(MemoryRetrieval.budget(3_000, { tokens: 5_000 })).toBe(3_000)
    expect(MemoryRetrieval.budget(-50)).toBe(0)
    fc.assert(
      fc.property(
        fc.integer({ min: -1_000, max: 2_000_000 }),
        fc.option(fc.nat({ max: 1_000_000 }), { nil: undefined }),
        fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined }),
        (available, tokens, fraction) => {
          const b = MemoryRetrieval.budget(available, { tokens, fraction })
          expect(b).toBeGreaterThanOrEqual(0)
          expect(b).toBeLessThanOrEqual(Math.max(0, available))
          if (tokens !== undefined) expect(b).toBeLessThanOrEqual(tokens)
        },
      ),
    )
  })

  it("over-fetches 3× the target count", () => {
    expect(MemoryRetrieval.fetchLimit()).toBe(24)
    expect(MemoryRetrieval.fetchLimit(5)).toBe(15)
  })
})

describe("MemoryRetrieval.rank", () => {
  it("keeps a subset, drops blanks and near-duplicates, whatever the input order", () => {
    fc.assert(
      fc.property(candidates, fc.integer(), (cs, seed) => {
        const ranked = MemoryRetrieval.rank(cs, NOW)
        const shuffled = [...cs].sort((a, b) => ((a.id.charCodeAt(0) * seed) % 7) - ((b.id.charCodeAt(0) * seed) % 7))
        expect(MemoryRetrieval.rank(shuffled, NOW)).toEqual(ranked)
        for (const r of ranked) {
          expect(cs).toContainEqual(r)
          expect(r.text.trim()).not.toBe("")
        }
        for (let i = 0; i < ranked.length; i++) {
          for (let j = 0; j < i; j++)
            expect(MemoryRetrieval.similarity(ranked[i]!.text, ranked[j]!.text)).toBeLessThan(MemoryRetrieval.defaults.duplicate)
        }
      }),
    )
  })

  it("orders by text rank at equal age and by recency at equal rank; a near-identical copy goes", () => {
    const ranked = MemoryRetrieval.rank(
      [
        { id: "old", text: "the user prefers aisle seats", score: 0.5, updatedAt: NOW - 300 * DAY },
        { id: "new", text: "the user prefers window seats on long flights", score: 0.5, updatedAt: NOW },
        { id: "best", text: "gold member since 2019", score: 1, updatedAt: NOW },
        { id: "copy", text: "The user prefers window seats, on long flights!", score: 0.49, updatedAt: NOW - DAY },
      ],
      NOW,
    )
    expect(ranked.map((c) => c.id)).toEqual(["best", "new", "old"])
  })
})

describe("MemoryRetrieval.select", () => {
  it("fits the budget and the count, counted whole, best first", () => {
    fc.assert(
      fc.property(candidates, fc.nat({ max: 3_000 }), fc.integer({ min: 0, max: 12 }), (cs, budget, count) => {
        const ranked = MemoryRetrieval.rank(cs, NOW)
        const s = MemoryRetrieval.select(ranked, { budget, count, countText })
        expect(s.tokens).toBeLessThanOrEqual(budget)
        expect(s.entries.length).toBeLessThanOrEqual(count)
        expect(s.tokens).toBe(s.text === "" ? 0 : countText(s.text))
        const order = s.entries.map((e) => ranked.findIndex((r) => r.id === e.id))
        expect(order).toEqual([...order].sort((a, b) => a - b))
        for (const e of s.entries) expect(s.text).toContain(e.text.trim().replace(/\s*\n\s*/g, " "))
      }),
    )
  })

  it("passes over a memory too large for what is left and takes smaller ones after it", () => {
    const ranked = [
      { id: "a", text: "short one", score: 1, updatedAt: NOW },
      { id: "b", text: "x".repeat(4_000), score: 0.9, updatedAt: NOW },
      { id: "c", text: "another short one", score: 0.8, updatedAt: NOW },
    ]
    const s = MemoryRetrieval.select(ranked, { budget: 100, count: 8, countText })
    expect(s.entries.map((e) => e.id)).toEqual(["a", "c"])
    expect(s.text.split("\n")[0]).toBe(MemoryRetrieval.MEMORY_HEADER)
  })

  it("learnings: at most 5, within their budget", () => {
    fc.assert(
      fc.property(candidates, fc.nat({ max: 2_000 }), (cs, budget) => {
        const s = MemoryRetrieval.learnings(cs, { now: NOW, budget, countText })
        expect(s.entries.length).toBeLessThanOrEqual(5)
        expect(s.tokens).toBeLessThanOrEqual(budget)
        if (s.text !== "") expect(s.text.startsWith(MemoryRetrieval.LEARNINGS_HEADER)).toBe(true)
      }),
    )
  })
})

describe("MemoryRetrieval.query", () => {
  it("joins the latest message and the task, without repeating one", () => {
    expect(MemoryRetrieval.query("change my seat", "book a flight to Paris")).toBe("change my seat\nbook a flight to Paris")
    expect(MemoryRetrieval.query("book", "book")).toBe("book")
    expect(MemoryRetrieval.query(undefined, "  ")).toBe("")
    expect(MemoryRetrieval.query("y".repeat(900), undefined)).toHaveLength(500)
  })
})
