/**
 * A replayed session and a served one go through the same lines: the same
 * turns through `InProcessTurns` and through the `Assembler` as a worker
 * builds it (the real token counter, the turn bytes decoded) over
 * in-memory stores give byte-identical replies, and what only the shell
 * does — the commit's idempotency, the pairing check against the stored
 * history — happens in-process too.
 */
import { Normalize } from "@ctxd/context"
import type { Turn } from "@ctxd/contracts"
import { KnowledgeStore, SessionStore } from "@ctxd/db"
import { Judge } from "@ctxd/loop-detector"
import { ShardLeases } from "@ctxd/sharding"
import { TokenCounter } from "@ctxd/token-counter"
import { LocalCounter } from "@ctxd/tokens"
import { Clock, Effect, Layer, ManagedRuntime } from "effect"
import { describe, expect, it } from "vitest"
import { Assembler } from "../src/Assembler.ts"
import * as AssemblerConfig from "../src/AssemblerConfig.ts"
import * as CompactionPort from "../src/CompactionPort.ts"
import * as InProcessTurns from "../src/InProcessTurns.ts"
import * as LengthHistory from "../src/LengthHistory.ts"
import * as WorkspaceCache from "../src/WorkspaceCache.ts"

const model = { provider: "openai", name: "gpt-4o" } as const
const tools = [{ type: "function", function: { name: "ls", description: "lists files", parameters: { type: "object" } } }]
const request = (turnId: string, messages: ReadonlyArray<Record<string, unknown>>): Turn.TurnRequest =>
  ({ turnId, format: "openai", model, system: "Be brief.", tools, messages, options: { maskKeep: 1 } }) as unknown as Turn.TurnRequest
const call = (id: string) => ({
  role: "assistant",
  content: null,
  tool_calls: [{ id, type: "function", function: { name: "ls", arguments: "{}" } }],
})
const script: ReadonlyArray<Turn.TurnRequest> = [
  request("t0", [{ role: "user", content: "list the files" }, call("c0")]),
  request("t1", [{ role: "tool", tool_call_id: "c0", content: "a.ts b.ts ".repeat(400) }, call("c1")]),
  request("t2", [{ role: "tool", tool_call_id: "c1", content: "c.ts ".repeat(300) }, call("c2")]),
  request("t3", [
    { role: "tool", tool_call_id: "c2", content: "done" },
    { role: "assistant", content: "Three files." },
    { role: "user", content: "thanks" },
  ]),
]

/** The local tiktoken counter, as the stages' counter and `countLocally`'s. */
const tiktoken = LocalCounter.make({ backend: "tiktoken" })
const encoding = tiktoken.encodingFor(model)
const local = {
  encoding,
  countText: (text: string) => tiktoken.countText(text, encoding),
  countTools: (list: Parameters<typeof tiktoken.countTools>[0]) => tiktoken.countTools(list, encoding),
  countMessage: (message: Parameters<typeof tiktoken.countMessage>[0]) => tiktoken.countMessage(message, encoding),
  countSystem: (system: Parameters<typeof tiktoken.countSystem>[0]) => tiktoken.countSystem(system, encoding),
}

/** The assembler as the worker builds it, over memory stores: the real token counter (no provider keys: tiktoken). */
const served = () =>
  ManagedRuntime.make(
    Assembler.Default.pipe(
      Layer.provide(
        Layer.mergeAll(
          AssemblerConfig.layer(),
          ShardLeases.layerMemory(),
          SessionStore.layerMemory(),
          KnowledgeStore.layerMemory,
          LengthHistory.layerNone,
          CompactionPort.layerDisabled,
          WorkspaceCache.layerMemory({}),
          TokenCounter.layer({ backend: "tiktoken" }),
          Layer.succeed(Judge.Judge, { ask: () => Effect.die("no judge") }),
        ),
      ),
    ),
  )

const json = (reply: Turn.TurnReply) => JSON.stringify(reply)

/** A clock standing at `at` (ms), for the served turns: they run at the times the replay passes. */
const at = (ms: number): Clock.Clock => {
  const real = Clock.make()
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => ms,
    currentTimeMillis: Effect.succeed(ms),
    unsafeCurrentTimeNanos: () => BigInt(ms) * 1_000_000n,
    currentTimeNanos: Effect.succeed(BigInt(ms) * 1_000_000n),
    sleep: (d) => real.sleep(d),
  }
}

describe("InProcessTurns runs the worker's shell", () => {
  it("gives the replies a served session gets, byte for byte, as JSON or in neutral form", async () => {
    const runtime = served()
    const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
    const neutral = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
    const bytes = (r: Turn.TurnRequest) => new TextEncoder().encode(JSON.stringify(r))
    for (const [k, r] of script.entries()) {
      const time = 1_000_000 + k * 2_000
      const wire = await runtime.runPromise(
        Effect.flatMap(Assembler, (a) => a.turn("acme", "s1", bytes(r))).pipe(
          Effect.map((answer) => answer.reply),
          Effect.withClock(at(time)),
        ),
      )
      const replayed = await turns.turn("acme", "s1", r, undefined, time)
      expect(json(replayed)).toBe(json(wire))
      const given = await neutral.turn(
        "acme",
        "s1",
        r,
        Normalize.request(r, () => [], undefined),
        time,
      )
      const { refs: _refs, ...withoutRefs } = replayed
      expect(json(given)).toBe(json(withoutRefs))
    }
    await runtime.dispose()
  })

  it("answers a retried turn id from the store, refuses it with other content, and checks pairing against the stored history", async () => {
    const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
    const first = await turns.turn("acme", "s1", script[0]!)
    await turns.turn("acme", "s1", script[1]!)
    expect(json(await turns.turn("acme", "s1", script[0]!))).toBe(json(first))
    await expect(turns.turn("acme", "s1", { ...script[0]!, options: { maskKeep: 2 } })).rejects.toThrow(
      /already used with different content/,
    )
    await expect(turns.turn("acme", "s1", request("t9", [{ role: "tool", tool_call_id: "nope", content: "x" }]))).rejects.toBeInstanceOf(
      InProcessTurns.Rejected,
    )
    await turns.dispose()
    await expect(turns.turn("acme", "s1", script[2]!)).rejects.toThrow()
  })
})
