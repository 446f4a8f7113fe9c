import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as Waste from "../src/Waste.ts"
import { call, user } from "./Helpers.ts"

const tool = (name: string): Conversation.Tool => ({ name, inputSchema: { type: "object" } })

describe("Waste", () => {
  it("tracks tools sent and called per session, and the share of tool tokens wasted", () => {
    const tools = [tool("a"), tool("b"), tool("c")]
    const size: Record<string, number> = { a: 100, b: 300, c: 600 }
    let state = Waste.record(Waste.empty, tools, [user("hi")], (t) => size[t.name]!)
    expect(Waste.report(state)).toEqual({ sentNeverCalled: ["a", "b", "c"], ratio: 1 })
    const reply: Conversation.Message = { role: "assistant", parts: [call("1", "b"), call("2", "b")] }
    state = Waste.record(state, tools, [reply], (t) => size[t.name]!)
    expect(state.tools["b"]).toEqual({ sentTurns: 2, sentTokens: 600, calls: 2 })
    expect(Waste.report(state)).toEqual({ sentNeverCalled: ["a", "c"], ratio: 1400 / 2000 })
    expect(JSON.parse(JSON.stringify(state))).toEqual(state)
  })

  it("counts definitions when no token function is given, and is 0 with nothing sent", () => {
    expect(Waste.ratio(Waste.empty)).toBe(0)
    const state = Waste.record(Waste.empty, [tool("a"), tool("b")], [{ role: "assistant", parts: [call("1", "a")] }])
    expect(Waste.ratio(state)).toBe(0.5)
    // a call of a tool that was never sent does not count as sent
    expect(Waste.sentNeverCalled(Waste.record(Waste.empty, [], [{ role: "assistant", parts: [call("1", "x")] }]))).toEqual([])
  })
})
