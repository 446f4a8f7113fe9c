import { describe, expect, it } from "vitest"
import * as Units from "../src/Units.ts"
import { assistant, call, calls, result, results, sys, user } from "./Helpers.ts"

// 0 user, 1 calls(a,b), 2 result a, 3 result b, 4 assistant, 5 results(c) headless, 6 user
const history = Units.entries([user("q"), calls("a", "b"), results("a"), results("b"), assistant("done"), results("c"), user("next")])

describe("Units boundaries", () => {
  it("keeps an assistant with calls and the tool messages after it together", () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((i) => Units.isBoundary(history, i))).toEqual([true, true, false, false, true, true, true, true])
    expect(Units.nextBoundary(history, 2)).toBe(4)
    expect(Units.nextBoundary(history, 3)).toBe(4)
    expect(Units.nextBoundary(history, 5)).toBe(5)
    expect(Units.unitStart(history, 3)).toBe(1)
    expect(Units.unitStart(history, 5)).toBe(5)
    expect(Units.unitStart(history, 7)).toBe(7)
  })

  it("treats a system message as a unit break", () => {
    const h = Units.entries([calls("a"), sys("s"), results("a")])
    expect(Units.isBoundary(h, 2)).toBe(true)
  })
})

describe("Units.prune", () => {
  it("keeps complete units untouched (same objects)", () => {
    const out = Units.prune(history, [0, 1, 2, 3, 4, 6])
    expect(out.orphans).toEqual({ calls: 0, results: 0 })
    expect(out.messages.map((v) => v.index)).toEqual([0, 1, 2, 3, 4, 6])
    expect(out.messages[1]!.message).toBe(history[1]!.message)
  })

  it("removes headless results and drops their message", () => {
    const out = Units.prune(history, [4, 5, 6])
    expect(out.orphans).toEqual({ calls: 0, results: 1 })
    expect(out.dropped).toEqual([5])
    expect(out.messages.map((v) => v.index)).toEqual([4, 6])
  })

  it("removes calls whose result is not in the view, keeping the rest of the message", () => {
    const h = Units.entries([
      user("q"),
      { role: "assistant", parts: [{ type: "text", text: "let me see" }, call("a"), call("b")] },
      results("b"),
    ])
    const out = Units.prune(h, [0, 1, 2])
    expect(out.orphans).toEqual({ calls: 1, results: 0 })
    expect(out.messages[1]!.message.parts).toEqual([{ type: "text", text: "let me see" }, call("b")])
    // The stored message is not touched.
    expect(h[1]!.message.parts).toHaveLength(3)
  })

  it("drops an assistant message left empty, and results of a different unit", () => {
    const h = Units.entries([user("q"), calls("a"), user("interrupt"), results("a")])
    const out = Units.prune(h, [0, 1, 2, 3])
    expect(out.orphans).toEqual({ calls: 1, results: 1 })
    expect(out.dropped.sort()).toEqual([1, 3])
    expect(out.messages.map((v) => v.index)).toEqual([0, 2])
  })

  it("keeps the first result per call and removes later ones and unknown ids", () => {
    const h = Units.entries([calls("a"), { role: "tool", parts: [result("a"), result("a", "again"), result("zz")] }])
    const out = Units.prune(h, [0, 1])
    expect(out.orphans).toEqual({ calls: 0, results: 2 })
    expect(out.messages[1]!.message.parts).toEqual([result("a")])
  })

  it("treats a result as orphaned when its call's message is not in the view", () => {
    const out = Units.prune(history, [2, 3, 4])
    expect(out.orphans).toEqual({ calls: 0, results: 2 })
    expect(out.messages.map((v) => v.index)).toEqual([4])
  })

  it("removes repeated call ids inside one message", () => {
    const h = Units.entries([calls("a", "a"), results("a")])
    const out = Units.prune(h, [0, 1])
    expect(out.orphans).toEqual({ calls: 1, results: 0 })
    expect(out.messages[0]!.message.parts).toEqual([call("a")])
  })
})
