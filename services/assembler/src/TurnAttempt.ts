/**
 * One attempt at a turn on the session's state: gather the reads it needs
 * (`Gather`, the span `ctxd.gather`) → the turn engine (`turn/Engine`: the
 * pure stages, their I/O answered by the worker's ports, `WorkerPorts`; a
 * span per stage while a tracer records) → commit the new messages with the
 * reply (`Commit`, the span `ctxd.commit`) → advance the session state and
 * schedule a background compaction. After a commit conflict the shell runs
 * it again on that attempt's state, refreshed.
 *
 * A turn with the client's whole history (`history: "client"`) first
 * finds the stored session (or branch) it continues and its new messages
 * (`ClientTurn`); the attempt then runs on that session.
 *
 * Options are merged once per attempt; the config file's sections are pinned
 * for the whole attempt (a reload applies from the next turn).
 */
import { Errors, type Turn } from "@ctxd/contracts"
import { SessionStore } from "@ctxd/db"
import type { Permits } from "@ctxd/nats"
import { Spans } from "@ctxd/observe"
import { ShardLeases } from "@ctxd/sharding"
import { Clock, Effect, Option } from "effect"
import { AssemblerConfig, pinned } from "./AssemblerConfig.ts"
import * as ClientTurn from "./ClientTurn.ts"
import * as Commit from "./Commit.ts"
import { CompactionPort } from "./CompactionPort.ts"
import * as Decode from "./Decode.ts"
import { Gather } from "./Gather.ts"
import * as SessionState from "./SessionState.ts"
import * as Engine from "./turn/Engine.ts"
import * as Options from "./turn/Options.ts"
import * as Turns from "./turn/Turn.ts"
import * as TurnMetrics from "./TurnMetrics.ts"
import * as WorkerPorts from "./WorkerPorts.ts"

/** A turn's answer: the reply, and its UTF-8 JSON when encoded already (to send as it is). */
export interface Answer {
  readonly reply: Turn.TurnReply
  readonly utf8?: Uint8Array | undefined
}

/** An answer, and whether it was committed now (false: a stored reply replayed). */
export interface Answered extends Answer {
  readonly fresh: boolean
}

/** A commit conflict, with the state to refresh for the next attempt. */
export type Conflict = Commit.Conflict & { readonly state: SessionState.SessionState }

/** The session a turn is of. */
export interface Ids {
  readonly tenant: string
  readonly session: string
}

/** What an attempt comes to: the answer with the state to keep (undefined: drop it), or a conflict. */
export type Result = readonly [Answered, SessionState.SessionState | undefined] | Conflict

/** The attempt function of this worker. */
export const make = Effect.gen(function* () {
  const config = yield* AssemblerConfig
  const store = yield* SessionStore.SessionStore
  const leases = yield* ShardLeases.ShardLeases
  const compaction = yield* CompactionPort
  const gather = yield* Gather
  const ports = Engine.traced(yield* WorkerPorts.make)
  const client = yield* ClientTurn.make

  /** One attempt at the turn on `cached` (after a conflict: on that attempt's state, refreshed); `slot` is released before the commit. */
  return (
    ids: Ids,
    decoded: Decode.Decoded,
    slot: Permits.Slot,
    cached: SessionState.SessionState | undefined,
    previous: Conflict | undefined,
  ) =>
    Effect.gen(function* () {
      const { request, hash } = decoded
      const { tenant } = ids
      // the config file's sections as of this attempt, for all of it (a reload applies from the next turn)
      const turnConfig = pinned(config)
      const options = Options.resolve(turnConfig, tenant, request.options)
      const { agent, user, memoryTools, memory, workspaceCache } = options
      // the session is behind what this state holds: deleted (and maybe started anew) since: start from the store
      const held = previous === undefined ? cached : previous.actualLastSeq < previous.state.lastSeq ? undefined : previous.state
      // the client's whole history: the stored session (or branch) it continues, and its new messages
      const history =
        request.history === "client"
          ? yield* client.resolve(ids.tenant, ids.session, decoded, previous === undefined ? held : undefined)
          : undefined
      const session = history?.session ?? ids.session
      const target: Ids = { tenant, session }
      // a state this actor holds of another stored session (a branch a client-history turn went to) is not this turn's
      const base = history !== undefined ? history.cached : held?.stored === undefined || held.stored.session === session ? held : undefined
      // one reading of the clock: the cached reads' age and the cache planner see the same time (a replay's logged one)
      const now = yield* Clock.currentTimeMillis
      const gathered = yield* gather
        .gather({
          tenant,
          session,
          model: request.model,
          agent,
          user,
          memoryTools,
          memory: memory.enabled,
          system: request.system,
          workspaceCache,
          cached: base,
          refresh: previous !== undefined,
          now,
        })
        .pipe(Spans.span("ctxd.gather", { attributes: { "ctxd.cached": base !== undefined } }))
      const { state, workspace } = gathered
      if (history !== undefined) state.stored = { session, branch: history.branch }
      const carry = Turns.begin({
        ...target,
        ...gathered,
        config: turnConfig,
        options,
        request,
        local: gather.localFor(request.model),
        thresholds: compaction.thresholds,
        now,
        normalized:
          history === undefined
            ? Decode.normalized(decoded, () => SessionState.openCalls(state), workspace)
            : ClientTurn.normalized(decoded, history, workspace),
      })
      const outcome = yield* Effect.flatMap(Spans.recording, (traced) => Engine.run(carry, ports, traced ? Engine.stageSpans : {}))
      if (outcome._tag === "Rejected") {
        // a retried turn whose messages are stored already trips the pairing check: answer it from the store
        const stored = outcome.pairing
          ? yield* store.findTurn(tenant, session, request.turnId).pipe(Effect.mapError(Commit.storeError))
          : Option.none()
        if (Option.isSome(stored))
          return [{ reply: yield* Commit.replay(request.turnId, hash, stored.value), fresh: false } as Answered, state] as const
        return yield* Effect.fail(
          new Errors.BadRequest({ message: outcome.message, ...(outcome.path === undefined ? {} : { path: outcome.path }) }),
        )
      }
      const input = Commit.inputOf(target, decoded, state, outcome, history?.report)
      // the turn's CPU work is done: its turn slot goes to the next turn while this one waits for
      // Postgres (and commits waiting together go out in one statement: SessionStore's group commit)
      yield* slot.release
      const committed = yield* Commit.commit(store, leases, input).pipe(
        Spans.span("ctxd.commit", { attributes: { "ctxd.messages.new": input.rows.length } }),
      )
      if (committed._tag === "Conflict") return { ...committed, state } satisfies Conflict
      // its messages are stored but maybe not in this state: drop it
      if (committed._tag === "Replayed") return [{ reply: committed.reply, fresh: false } as Answered, undefined] as const
      SessionState.advance(state, Turns.committed(outcome.carry, input.length?.agent))
      const job = outcome.carry.compaction!.schedule
      if (job !== undefined) yield* compaction.schedule(job)
      TurnMetrics.record(input.reply.report)
      return [{ reply: input.reply, utf8: input.replyUtf8, fresh: true } as Answered, state] as const
    })
})
