import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as LoopConfig from "../src/LoopConfig.ts"
import * as Judge from "../src/Judge.ts"
import * as LoopState from "../src/LoopState.ts"

const call = (i: number): Array<Conversation.Message> => [
  { role: "assistant", parts: [{ type: "tool_call", id: `c${i}`, name: "search", input: { q: "x" } }] },
  { role: "tool", parts: [{ type: "tool_result", callId: `c${i}`, content: [{ type: "text", text: "none" }], isError: false }] },
]
const history = (calls: number): Array<Conversation.Message> => [
  { role: "user", parts: [{ type: "text", text: "find x" }] },
  ...Array.from({ length: calls }, (_, i) => call(i)).flat(),
]

describe("Judge", () => {
  it("is borderline one repeat short of the threshold, and not at or below two short", () => {
    const config = LoopConfig.make()
    const at = (n: number) => Judge.borderline(LoopState.observe(LoopState.initial(), history(n), 0), config)
    expect(at(1).looping).toBe(false)
    expect(at(2).findings.map((f) => f.pattern)).toEqual(["repeated_call"])
    // At the threshold the real verdict loops: nothing borderline to ask about.
    expect(at(3).looping).toBe(false)
  })

  it("never lowers a threshold below 2 and keeps 0 (off)", () => {
    const config = Judge.lowered(LoopConfig.make({ repeatedCall: { threshold: 2 }, monologue: { threshold: 0 } }))
    expect(config.repeatedCall.threshold).toBe(2)
    expect(config.monologue.threshold).toBe(0)
  })

  it("reads JSON answers, also wrapped in prose, and says when it cannot", () => {
    expect(Judge.parse('{"progress": false, "reason": "same search"}')).toEqual({ progress: false, reason: "same search" })
    expect(Judge.parse('Sure: {"progress": true} done')).toEqual({ progress: true, reason: "" })
    expect(Judge.parse("no idea").progress).toBeUndefined()
  })

  it("asks about what repeats, with the recent messages", () => {
    const verdict = Judge.borderline(LoopState.observe(LoopState.initial(), history(2), 0), LoopConfig.make())
    const text = Judge.prompt(verdict, history(2))
    expect(text).toContain("search")
    expect(text).toContain("[tool] result: none")
  })
})
