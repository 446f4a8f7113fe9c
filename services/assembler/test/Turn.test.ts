/** The turn stages over the carry: order, the I/O they ask for, rejections, and what a commit changes. */
import type { Conversation, Turn } from "@ctxd/contracts"
import { LoopState } from "@ctxd/loop-detector"
import { describe, expect, it } from "vitest"
import * as AssemblerConfig from "../src/AssemblerConfig.ts"
import * as LocalTurns from "../src/LocalTurns.ts"
import * as SessionState from "../src/SessionState.ts"
import type * as Carry from "../src/turn/Carry.ts"
import * as TurnStages from "../src/turn/Turn.ts"

const words = (text: string) => Math.ceil(text.length / 4)
const local = {
  encoding: "o200k_base",
  countText: words,
  countTools: (tools: ReadonlyArray<Conversation.Tool>) => words(JSON.stringify(tools)),
  countMessage: (m: Conversation.Message) => words(JSON.stringify(m.parts)),
  countSystem: (system: ReadonlyArray<Conversation.SystemSection>) => words(system.map((s) => s.text).join("")),
}
const config: AssemblerConfig.Config = { ...AssemblerConfig.defaults, defaults: {}, loop: {}, tenants: {}, defaultToolsets: [] }
const model = { provider: "openai", name: "gpt-4o" } as const

const request = (turnId: string, messages: ReadonlyArray<Record<string, unknown>>): Turn.TurnRequest =>
  ({ turnId, format: "openai", model, system: "Be brief.", messages }) as unknown as Turn.TurnRequest

/** Runs a turn's stages on `state`, answering the count; returns the outcome and the needs asked for. */
const runStages = (state: SessionState.SessionState, req: Turn.TurnRequest) => {
  const needs: Array<Carry.Need["_tag"]> = []
  let carry = TurnStages.begin({ config, tenant: "acme", session: "s1", request: req, state, knowledge: [], local, thresholds: undefined, now: 0 })
  let outcome = TurnStages.run(carry)
  while (outcome._tag === "Need") {
    needs.push(outcome.need._tag)
    if (outcome.need._tag !== "Count") throw new Error(`unexpected need ${outcome.need._tag}`)
    carry = { ...outcome.carry, answers: { count: LocalTurns.countLocally(local)(outcome.need.input) } }
    outcome = TurnStages.run(carry, outcome.at)
  }
  return { outcome, needs }
}

const call = (id: string) => ({ role: "assistant", content: null, tool_calls: [{ id, type: "function", function: { name: "ls", arguments: "{}" } }] })
const result = (id: string) => ({ role: "tool", tool_call_id: id, content: "a b c" })

describe("turn stages", () => {
  it("runs in order, asks for the count once, and builds a reply with every stage's report", () => {
    const { outcome, needs } = runStages(SessionState.empty("o200k_base"), request("t1", [{ role: "user", content: "hi" }]))
    expect(needs).toEqual(["Count"])
    expect(outcome._tag).toBe("Done")
    if (outcome._tag !== "Done") return
    expect(Object.keys(outcome.carry).filter((k) => k !== "inputs" && k !== "answers")).toEqual(["tools", "count", "loop", "compaction", "prompt", "reply"])
    expect(outcome.reply.report.stages?.map((s) => s.stage)).toEqual(["window", "compress", "mask", "budget", "prune", "render", "proactive"])
    expect(outcome.reply.report.loop?.policy).toBe("nudge")
  })

  it("rejects an empty first turn, and a result for an unknown call as a pairing error", () => {
    expect(runStages(SessionState.empty("o200k_base"), request("t1", [])).outcome).toMatchObject({ _tag: "Rejected", path: "messages", pairing: false })
    expect(runStages(SessionState.empty("o200k_base"), request("t1", [{ role: "user", content: "x" }, result("nope")])).outcome).toMatchObject({
      _tag: "Rejected",
      path: "messages[1]",
      pairing: true,
    })
  })

  it("a commit folds each message into the loop state once", () => {
    const state = SessionState.empty("o200k_base")
    const turns = [
      [{ role: "user", content: "list it" }, call("c1")],
      [result("c1"), call("c2")],
      [result("c2"), call("c3")],
    ]
    turns.forEach((messages, i) => {
      const { outcome } = runStages(state, request(`t${i}`, messages))
      if (outcome._tag !== "Done") throw new Error(outcome._tag)
      SessionState.advance(state, TurnStages.committed(outcome.carry))
    })
    const once = LoopState.observe(
      LoopState.initial(),
      state.messages.map((m) => m.message),
      0,
    )
    expect(state.loop).toEqual(once)
    expect(state.lastSeq).toBe(6)
  })

  it("LocalTurns keeps the session between turns and answers like the worker", async () => {
    const turns = LocalTurns.make({ local, count: LocalTurns.countLocally(local) })
    const first = await turns.turn("acme", "s1", request("t1", [{ role: "user", content: "list it" }, call("c1")]))
    const second = await turns.turn("acme", "s1", request("t2", [result("c1")]))
    expect(first.report.messages.stored).toBe(2)
    expect(second.report.messages.stored).toBe(3)
    await expect(turns.turn("acme", "s2", request("t1", []))).rejects.toBeInstanceOf(LocalTurns.Rejected)
  })
})
