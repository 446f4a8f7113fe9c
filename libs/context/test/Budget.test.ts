import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as Budget from "../src/Budget.ts"
import * as Window from "../src/Window.ts"
import { assistant, calls, results, stored, sys, user } from "./Helpers.ts"

const chat = (n: number, from = 0): Array<Conversation.Message> =>
  Array.from({ length: n }, (_, i) => ((i + from) % 2 === 0 ? user(`u${i + from}`) : assistant(`a${i + from}`)))

interface Knobs {
  readonly total?: number
  readonly system?: number
  readonly tail?: number
  readonly N?: number
  readonly step?: number
}

const allocate = (history: ReadonlyArray<Budget.Entry>, k: Knobs = {}) => {
  const marks = Window.landmarks(history)
  const window = Window.compute(history, { windowMessages: k.N ?? 40, windowStep: k.step ?? 20 }, marks)
  return Budget.allocate(history, window, {
    totalTokens: k.total ?? 1_000_000,
    systemTokens: k.system ?? 0,
    toolsTokens: 0,
    memoryTokens: 0,
    freshTailMessages: k.tail ?? 16,
    windowStep: k.step ?? 20,
    pinned: marks.pinned,
  })
}

describe("Budget.allocate", () => {
  it("keeps the whole window when it fits", () => {
    const a = allocate(stored(chat(30)))
    expect(a.cut).toBe(0)
    expect(a.kept).toHaveLength(30)
    expect(a.keptTokens).toBe(300)
    expect(a.overBudget).toBe(false)
    expect(a.droppedByBudget).toBe(0)
    expect(a.historyBudget).toBe(1_000_000)
  })

  it("fills the evictable prefix newest-first and drops a contiguous head, keeping the anchor", () => {
    // 30 messages of 10 tokens; tail 10; budget 200 - 5 system = 195 for history.
    const a = allocate(stored(chat(30)), { total: 200, system: 5, tail: 10, step: 1 })
    expect(a.tailStart).toBe(20)
    // anchor (10) + tail (100) = 110 protected; 85 left: 8 more messages (12..19).
    expect(a.cut).toBe(12)
    expect(a.kept).toEqual([0, ...Array.from({ length: 18 }, (_, i) => 12 + i)])
    expect(a.keptTokens).toBe(190)
    expect(a.droppedByBudget).toBe(11)
    expect(a.droppedByWindow).toBe(0)
  })

  it("rounds a budget cut up to the grid, without entering the tail", () => {
    const a = allocate(stored(chat(30)), { total: 200, system: 5, tail: 10, step: 5 })
    expect(a.cut).toBe(15)
    const b = allocate(stored(chat(30)), { total: 200, system: 5, tail: 10, step: 50 })
    expect(b.cut).toBe(b.tailStart)
  })

  it("moves the cut in steps as the history grows under a tight budget", () => {
    const all = chat(140)
    const cuts = new Set<number>()
    for (let n = 60; n <= 140; n++) {
      const a = allocate(stored(all.slice(0, n)), { total: 300, tail: 8, N: 1_000, step: 20 })
      expect(a.keptTokens).toBeLessThanOrEqual(300)
      expect(a.cut % 20).toBe(0)
      cuts.add(a.cut)
    }
    // 81 turns, but the prefix changed only a handful of times.
    expect(cuts.size).toBeLessThanOrEqual(6)
  })

  it("never splits a unit and treats pinned messages as protected", () => {
    const messages = [sys("policy"), user("u"), ...chat(6, 1), calls("a", "b"), results("a"), results("b"), ...chat(6, 1)]
    const history = stored(messages, (i) => (i === 8 || i === 9 ? 40 : 10))
    // Protected: tail 11..16 (60) + pinned 0 and anchor 1 (20); the unit 8..10 costs 90 > 150 - 80.
    const a = allocate(history, { total: 150, tail: 6, step: 1 })
    expect(a.kept).toEqual([0, 1, 11, 12, 13, 14, 15, 16])
    expect(a.cut).toBe(11)
    const b = allocate(history, { total: 1_000, tail: 6, step: 1 })
    expect(b.cut).toBe(0)
  })

  it("extends the fresh tail back to a unit boundary", () => {
    const history = stored([user("u"), calls("a", "b", "c"), results("a"), results("b"), results("c")])
    const a = allocate(history, { total: 30, tail: 2 })
    expect(a.tailStart).toBe(1)
    expect(a.overBudget).toBe(true)
    expect(a.kept).toEqual([0, 1, 2, 3, 4])
  })

  it("reports overBudget and still keeps tail, anchor and pinned messages", () => {
    const history = stored([sys("s"), ...chat(40)])
    const a = allocate(history, { total: 100, tail: 16, N: 30, step: 10 })
    expect(a.overBudget).toBe(true)
    expect(a.cut).toBe(a.tailStart)
    expect(a.kept.slice(0, 2)).toEqual([0, 1])
    expect(a.kept).toHaveLength(2 + 16)
    expect(a.droppedByWindow + a.droppedByBudget + a.kept.length).toBe(41)
  })

  it("is over budget when system and tools alone exceed the total", () => {
    const a = allocate(stored([]), { total: 10, system: 20 })
    expect(a.overBudget).toBe(true)
    expect(a.kept).toEqual([])
  })
})
