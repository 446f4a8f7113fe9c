/** The turn engine: one interpreter of the stages' needs over a record of ports; observation wraps, it does not change the run. */
import type { Turn } from "@ctxd/contracts"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as AssemblerConfig from "../src/AssemblerConfig.ts"
import * as InProcessTurns from "../src/InProcessTurns.ts"
import * as SessionState from "../src/SessionState.ts"
import * as Engine from "../src/turn/Engine.ts"
import * as TurnStages from "../src/turn/Turn.ts"
import { local } from "./Helpers.ts"

const config: AssemblerConfig.Config = AssemblerConfig.make()
const model = { provider: "openai", name: "gpt-4o" } as const

const request = (turnId: string, messages: ReadonlyArray<Record<string, unknown>>, options?: Record<string, unknown>): Turn.TurnRequest =>
  ({
    turnId,
    format: "openai",
    model,
    system: "Be brief.",
    messages,
    ...(options === undefined ? {} : { options }),
  }) as unknown as Turn.TurnRequest

const begin = (req: Turn.TurnRequest) =>
  TurnStages.begin({
    config,
    tenant: "acme",
    session: "s1",
    request: req,
    state: SessionState.empty("o200k_base"),
    knowledge: [],
    local,
    thresholds: undefined,
    now: 0,
  })

/** Ports that record what was asked of them; the memory tools answer every call. */
const recording = () => {
  const asked: Array<string> = []
  const ports: Engine.Ports = {
    count: (input) => Effect.sync(() => (asked.push("count"), InProcessTurns.countLocally(local)(input))),
    judge: () =>
      Effect.sync(() => (asked.push("judge"), { answered: false, progress: null, reason: "test", model: "", tokensIn: 0, tokensOut: 0 })),
    compactNow: () => Effect.sync(() => void asked.push("compactNow")),
    memory: (calls) =>
      Effect.sync(() => (asked.push("memory"), new Map(calls.map((c) => [c.callId, { op: "error" as const, message: "test store" }])))),
    retrieve: () => Effect.sync(() => (asked.push("retrieve"), { hits: [], learnings: [] })),
  }
  return { asked, ports }
}

describe("Engine", () => {
  it("answers each need through its port and builds the same reply as the pure stages answered by hand", async () => {
    const { asked, ports } = recording()
    const req = request("t1", [{ role: "user", content: "hi" }])
    const outcome = await Effect.runPromise(Engine.run(begin(req), ports))
    expect(asked).toEqual(["count"])
    expect(outcome._tag).toBe("Done")

    let byHand = TurnStages.run(begin(req))
    while (byHand._tag === "Need") {
      const count = InProcessTurns.countLocally(local)((byHand.need as Extract<typeof byHand.need, { _tag: "Count" }>).input)
      byHand = TurnStages.run({ ...byHand.carry, answers: { ...byHand.carry.answers, count } }, byHand.at)
    }
    expect(outcome._tag === "Done" && byHand._tag === "Done" && JSON.stringify(outcome.reply) === JSON.stringify(byHand.reply)).toBe(true)
  })

  it("a stage hook wraps every stage once, in order, and leaves the reply as it is", async () => {
    const req = request("t1", [{ role: "user", content: "hi" }])
    const plain = await Effect.runPromise(Engine.run(begin(req), recording().ports))
    const wrapped: Array<string> = []
    const hooks: Engine.Hooks = {
      stage: (name, run) =>
        Effect.zipLeft(
          run,
          Effect.sync(() => wrapped.push(name)),
        ),
    }
    const hooked = await Effect.runPromise(Engine.run(begin(req), recording().ports, hooks))
    expect(wrapped).toEqual(TurnStages.names())
    expect(JSON.stringify(hooked)).toBe(JSON.stringify(plain))
  })

  it("a rejected request ends the run at the stage that rejects it, asking nothing", async () => {
    const { asked, ports } = recording()
    const wrapped: Array<string> = []
    const hooks: Engine.Hooks = {
      stage: (name, run) =>
        Effect.zipLeft(
          run,
          Effect.sync(() => wrapped.push(name)),
        ),
    }
    const outcome = await Effect.runPromise(Engine.run(begin(request("t1", [])), ports, hooks))
    expect(outcome._tag).toBe("Rejected")
    expect(asked).toEqual([])
    expect(wrapped).toEqual(["validate"])
  })

  it("memory tool calls go to the memory port, and the model sees its answer", async () => {
    const { asked, ports } = recording()
    const carry = begin(
      request(
        "t1",
        [
          { role: "user", content: "remember this" },
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "m1", type: "function", function: { name: "memory_search", arguments: '{"query":"x"}' } }],
          },
        ],
        { memoryTools: true },
      ),
    )
    const outcome = await Effect.runPromise(Engine.run(carry, ports))
    expect(asked).toContain("memory")
    expect(outcome._tag === "Done" && JSON.stringify(outcome.reply.request)).toContain("test store")
  })
})
