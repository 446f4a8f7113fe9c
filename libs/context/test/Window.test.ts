import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as Units from "../src/Units.ts"
import * as Window from "../src/Window.ts"
import { assistant, calls, results, sys, user } from "./Helpers.ts"

const chat = (n: number): Array<Conversation.Message> =>
  Array.from({ length: n }, (_, i) => (i % 2 === 0 ? user(`u${i}`) : assistant(`a${i}`)))

const windowOf = (messages: ReadonlyArray<Conversation.Message>, windowMessages = 40, windowStep = 20) => {
  const h = Units.entries(messages)
  return Window.compute(h, { windowMessages, windowStep }, Window.landmarks(h))
}

describe("Window.cutIndex", () => {
  it("is 0 up to N messages, then moves in steps", () => {
    expect(Window.cutIndex(0, 40, 20)).toBe(0)
    expect(Window.cutIndex(40, 40, 20)).toBe(0)
    expect(Window.cutIndex(59, 40, 20)).toBe(0)
    expect(Window.cutIndex(60, 40, 20)).toBe(20)
    expect(Window.cutIndex(79, 40, 20)).toBe(20)
    expect(Window.cutIndex(80, 40, 20)).toBe(40)
  })
})

describe("Window.compute", () => {
  it("changes the cut only once every step messages, monotonically", () => {
    const N = 40
    const step = 20
    const all = chat(N + 3 * step + 1)
    const cuts: Array<number> = []
    for (let n = N; n <= N + 3 * step; n++) {
      const w = windowOf(all.slice(0, n), N, step)
      cuts.push(w.start)
      expect(n - w.start).toBeGreaterThanOrEqual(N)
      expect(n - w.start).toBeLessThanOrEqual(N + step - 1)
    }
    expect([...new Set(cuts)]).toEqual([0, 20, 40, 60])
    for (let i = 1; i < cuts.length; i++) expect(cuts[i]!).toBeGreaterThanOrEqual(cuts[i - 1]!)
  })

  it("moves the cut forward to a unit boundary", () => {
    // Indices 0..9; the grid cut for n = 10, N = 6, step = 4 is 4, which is a result.
    const messages = [
      user("u0"),
      assistant("a1"),
      user("u2"),
      calls("a", "b"),
      results("a"),
      results("b"),
      user("u6"),
      assistant("a7"),
      user("u8"),
      assistant("a9"),
    ]
    const w = windowOf(messages, 6, 4)
    expect(w.gridCut).toBe(4)
    expect(w.start).toBe(6)
  })

  it("finds the anchor (first user message with non-tool content) and the pinned messages", () => {
    const messages: Array<Conversation.Message> = [
      sys("policy"),
      assistant("hello"),
      { role: "user", parts: [] },
      user("book a flight"),
      ...chat(50),
      sys("late instruction"),
    ]
    const w = windowOf(messages, 10, 5)
    expect(w.anchor).toBe(3)
    expect(w.pinnedBefore).toEqual([0])
    expect(w.start).toBeGreaterThan(3)
  })

  it("counts only non-system messages on the grid: a new system message does not move the cut", () => {
    const base = chat(45)
    const before = windowOf(base, 40, 20)
    const after = windowOf([...base.slice(0, 30), sys("note"), ...base.slice(30)], 40, 20)
    expect(before.start).toBe(0)
    expect(after.start).toBe(0)
    const longer = chat(65)
    const w1 = windowOf(longer, 40, 20)
    const w2 = windowOf([sys("s0"), ...longer.slice(0, 10), sys("s1"), ...longer.slice(10)], 40, 20)
    expect(w1.start).toBe(20)
    // Same message (longer[20]) is the first one of the window, two pinned messages earlier.
    expect(w2.start).toBe(22)
    expect(w2.pinnedBefore).toEqual([0, 11])
  })

  it("extends landmarks incrementally to the same result as a full scan", () => {
    const messages = [sys("a"), assistant("x"), ...chat(30), sys("b"), ...chat(10)]
    const h = Units.entries(messages)
    const partial = Window.landmarks(h.slice(0, 2))
    expect(partial.anchor).toBeUndefined()
    const extended = Window.landmarks(h, Window.landmarks(h.slice(0, 20), partial))
    expect(extended).toEqual(Window.landmarks(h))
    const requests = [...Array.from({ length: 15 }, (_, i) => 2 + 2 * i), 33, 35, 37, 39, 41]
    expect(extended).toEqual({ anchor: 2, pinned: [0, 32], requests, scanned: h.length })
  })

  it("converts between history indices and non-system positions", () => {
    const pinned = [0, 3, 4]
    expect([1, 2, 5, 6].map((a) => Window.relative(a, pinned))).toEqual([0, 1, 2, 3])
    expect([0, 1, 2, 3].map((r) => Window.absolute(r, pinned))).toEqual([1, 2, 5, 6])
  })
})
