import type { Conversation } from "@ctxd/contracts"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Waste from "../src/Waste.ts"
import { call, user } from "./Helpers.ts"

const tool = (name: string): Conversation.Tool => ({ name, inputSchema: { type: "object" } })

/** The per-tool copy every turn that `Waste` replaced: the reference its answers must match. */
const reference = () => {
  let tools: Record<string, Waste.ToolUse> = {}
  const none: Waste.ToolUse = { sentTurns: 0, sentTokens: 0, calls: 0 }
  return {
    record: (
      sent: ReadonlyArray<Conversation.Tool>,
      incoming: ReadonlyArray<Conversation.Message>,
      tokensOf: (t: Conversation.Tool) => number,
    ) => {
      const next = { ...tools }
      for (const m of incoming) {
        if (m.role !== "assistant") continue
        for (const p of m.parts)
          if (p.type === "tool_call") next[p.name] = { ...(next[p.name] ?? none), calls: (next[p.name] ?? none).calls + 1 }
      }
      for (const t of sent) {
        const u = next[t.name] ?? none
        next[t.name] = { ...u, sentTurns: u.sentTurns + 1, sentTokens: u.sentTokens + tokensOf(t) }
      }
      tools = next
    },
    report: () => {
      let wasted = 0
      let total = 0
      for (const u of Object.values(tools)) {
        total += u.sentTokens
        if (u.calls === 0) wasted += u.sentTokens
      }
      const never = Object.entries(tools)
        .filter(([, u]) => u.sentTurns > 0 && u.calls === 0)
        .map(([n]) => n)
        .sort()
      return { sentNeverCalled: never, ratio: total === 0 ? 0 : wasted / total }
    },
    tools: () => tools,
  }
}

describe("Waste", () => {
  it("tracks tools sent and called per session, and the share of tool tokens wasted", () => {
    const tools = [tool("a"), tool("b"), tool("c")]
    const size: Record<string, number> = { a: 100, b: 300, c: 600 }
    let state = Waste.record(Waste.empty, tools, [user("hi")], (t) => size[t.name]!)
    expect(Waste.report(state)).toEqual({ sentNeverCalled: ["a", "b", "c"], ratio: 1 })
    const reply: Conversation.Message = { role: "assistant", parts: [call("1", "b"), call("2", "b")] }
    const before = state
    state = Waste.record(state, tools, [reply], (t) => size[t.name]!)
    expect(Waste.use(state, "b")).toEqual({ sentTurns: 2, sentTokens: 600, calls: 2 })
    expect(Waste.report(state)).toEqual({ sentNeverCalled: ["a", "c"], ratio: 1400 / 2000 })
    // the state it was given is unchanged
    expect(Waste.report(before)).toEqual({ sentNeverCalled: ["a", "b", "c"], ratio: 1 })
    expect(Waste.tools(state)).toEqual({
      a: { sentTurns: 2, sentTokens: 200, calls: 0 },
      b: { sentTurns: 2, sentTokens: 600, calls: 2 },
      c: { sentTurns: 2, sentTokens: 1200, calls: 0 },
    })
  })

  it("counts definitions when no token function is given, and is 0 with nothing sent", () => {
    expect(Waste.ratio(Waste.empty)).toBe(0)
    const state = Waste.record(Waste.empty, [tool("a"), tool("b")], [{ role: "assistant", parts: [call("1", "a")] }])
    expect(Waste.ratio(state)).toBe(0.5)
    // a call of a tool that was never sent does not count as sent
    expect(Waste.sentNeverCalled(Waste.record(Waste.empty, [], [{ role: "assistant", parts: [call("1", "x")] }]))).toEqual([])
  })

  it("the same list sent again is one step, and its report the same array while nothing changes", () => {
    const tools = [tool("a"), tool("b")]
    let state = Waste.record(Waste.empty, tools, [user("hi")])
    const first = Waste.sentNeverCalled(state)
    for (let i = 0; i < 1_000; i++) state = Waste.record(state, tools, [user(`q${i}`)])
    expect(Waste.sentNeverCalled(state)).toBe(first)
    expect(Waste.use(state, "a")).toEqual({ sentTurns: 1_001, sentTokens: 1_001, calls: 0 })
    // a call changes it
    state = Waste.record(state, tools, [{ role: "assistant", parts: [call("1", "a")] }])
    expect(Waste.sentNeverCalled(state)).toEqual(["b"])
  })

  it("answers as the per-tool copy did, for any sequence of lists (resent or new, with duplicates), calls and token counts", () => {
    const lists = [[tool("a"), tool("b")], [tool("b"), tool("c"), tool("b")], [], [tool("a")]] as const
    const step = fc.record({
      // mostly the previous turn's list again (the same array): runs of every length
      again: fc.integer({ min: 0, max: 3 }).map((n) => n > 0),
      list: fc.integer({ min: 0, max: lists.length - 1 }),
      copy: fc.boolean(),
      calls: fc.array(fc.constantFrom("a", "b", "c", "z"), { maxLength: 3 }),
      encoding: fc.integer({ min: 1, max: 2 }),
    })
    fc.assert(
      fc.property(fc.array(step, { maxLength: 40 }), (steps) => {
        const model = reference()
        let state = Waste.empty
        let last: ReadonlyArray<Conversation.Tool> = []
        for (const s of steps) {
          // the previous array, a listed one or an equal copy; token counts that change with the encoding
          const sent = s.again ? last : s.copy ? [...lists[s.list]!] : lists[s.list]!
          last = sent
          const tokensOf = (t: Conversation.Tool) => t.name.charCodeAt(0) * s.encoding
          const incoming: ReadonlyArray<Conversation.Message> = [
            user("q"),
            { role: "assistant", parts: s.calls.map((n, i) => call(`c${i}`, n)) },
          ]
          model.record(sent, incoming, tokensOf)
          state = Waste.record(state, sent, incoming, tokensOf)
          const got = Waste.report(state)
          const want = model.report()
          expect([...got.sentNeverCalled]).toEqual(want.sentNeverCalled)
          expect(got.ratio).toBeCloseTo(want.ratio, 12)
          expect(Waste.tools(state)).toEqual(model.tools())
        }
      }),
      { numRuns: 300 },
    )
  })
})
