/**
 * The worker's answers to the turn engine's I/O (`turn/Engine` ports): the
 * token counter, the loop judge, the compactor (blocking compaction, then the
 * live summary read again), the memory store (memory tool calls) and the
 * memory search (`Gather.retrieve`). Built once per assembler; every call
 * gets the turn's inputs.
 */
import type { MemoryTools } from "@ctxd/context"
import { MemoryStore } from "@ctxd/db"
import { Judge } from "@ctxd/loop-detector"
import { TokenCounter } from "@ctxd/token-counter"
import { Effect, Option } from "effect"
import { createHash } from "node:crypto"
import { CompactionPort } from "./CompactionPort.ts"
import { Gather } from "./Gather.ts"
import type * as Engine from "./turn/Engine.ts"

/** How long a turn may wait for a compaction it cannot go without: 60 s. */
const BLOCKING_COMPACTION_TIMEOUT = "60 seconds"

/** What a memory call answers where no memory store is wired. */
const NO_MEMORY: MemoryTools.Result = { op: "error", message: "memory is not available here" }

/** The id `memory_remember` gives a new memory: derived from the tenant, session and call. */
const callMemoryId = (tenant: string, session: string, callId: string): string =>
  `m-${createHash("sha256").update(`${tenant}\u0000${session}\u0000${callId}`).digest("hex").slice(0, 32)}`

/** One memory call against `store`. */
const memoryCall = (
  store: MemoryStore.MemoryStoreService,
  scope: MemoryStore.Scope,
  session: string,
  call: MemoryTools.Call,
): Effect.Effect<MemoryTools.Result, MemoryStore.Failure> => {
  const o = call.operation
  switch (o.op) {
    case "search":
      return Effect.map(store.search(scope, o.query, { limit: o.limit }), (hits) => ({ op: "search", hits }))
    case "read":
      return Effect.map(store.read(scope, o.id), (document) => ({ op: "read", document }))
    case "list":
      return Effect.map(store.list(scope, { cursor: o.cursor, limit: o.limit }), (page) => ({ op: "list", ...page }))
    case "history":
      return Effect.map(store.history(scope, o.id), (versions) => ({ op: "history", versions }))
    case "remember":
      // a new memory's id follows from the call, so a turn run again (a commit conflict, a retried turn) stores it once
      return Effect.map(
        store.remember(scope, {
          text: o.text,
          tags: o.tags,
          id: o.id ?? callMemoryId(scope.tenant, session, call.callId),
          source: `session ${session}`,
        }),
        (done) => ({ op: "remember", ...done }),
      )
  }
}

/** The worker's ports; a memory call without a memory store answers {@link NO_MEMORY}. */
export const make = Effect.gen(function* () {
  const tokens = yield* TokenCounter.TokenCounter
  const judge = yield* Judge.Judge
  const compaction = yield* CompactionPort
  const gather = yield* Gather
  const memories = yield* Effect.serviceOption(MemoryStore.MemoryStore)
  const ports: Engine.Ports = {
    count: (input) => tokens.countTurn(input),
    judge: (question, { tenant }) => judge.ask({ ...question, tenant }),
    compactNow: (job, _decision, { tenant, session, state }) =>
      Effect.zipRight(compaction.now(job, BLOCKING_COMPACTION_TIMEOUT), gather.summary(tenant, session, state)),
    memory: (calls, { tenant, session, options }) =>
      Effect.forEach(calls, (call) => {
        if (Option.isNone(memories)) return Effect.succeed([call.callId, NO_MEMORY] as const)
        return memoryCall(memories.value, { tenant, agent: options.agent, user: options.user }, session, call).pipe(
          Effect.catchAll((e): Effect.Effect<MemoryTools.Result> =>
            Effect.succeed({
              op: "error",
              message: e._tag === "MemoryInvalid" ? `${e.path}: ${e.message}` : "the memory store is unavailable right now",
            }),
          ),
          Effect.map((result) => [call.callId, result] as const),
        )
      }).pipe(Effect.map((entries) => new Map(entries))),
    retrieve: (query, { tenant }) => gather.retrieve(tenant, query),
  }
  return ports
})
