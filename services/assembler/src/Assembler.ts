/**
 * The assembler, the imperative shell around one turn: decode the request →
 * the session's actor (one turn of a session at a time) → gather the reads →
 * the turn engine (`turn/Engine`: the pure stages, their I/O answered by the
 * worker's ports, `WorkerPorts`) → commit the new messages with the reply →
 * advance the session state.
 *
 * Tracing: the span `ctxd.turn` (`TurnMetrics.observed`), with a child span
 * per stage (`ctxd.stage.<name>`) holding the I/O that stage asked for, and
 * `ctxd.gather` and `ctxd.commit` around the Postgres reads and write — made
 * only while a tracer records them (`Spans`). Metrics: `TurnMetrics`.
 *
 * A fresh turn's reply is encoded once: the same UTF-8 JSON is stored with
 * the commit and sent (`Answer.utf8`).
 */
import { Errors, type Turn } from "@ctxd/contracts"
import { SessionStore } from "@ctxd/db"
import { Permits } from "@ctxd/nats"
import { Spans } from "@ctxd/observe"
import { ShardLeases } from "@ctxd/sharding"
import { Clock, Effect, Either, Option } from "effect"
import { AssemblerConfig, pinned } from "./AssemblerConfig.ts"
import * as Commit from "./Commit.ts"
import { CompactionPort } from "./CompactionPort.ts"
import * as Decode from "./Decode.ts"
import { Gather } from "./Gather.ts"
import * as Prefixes from "./Prefixes.ts"
import * as SessionActor from "./SessionActor.ts"
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
type Answered = Answer & { readonly fresh: boolean }
/** A commit conflict, with the state to refresh for the next attempt. */
type Conflict = Commit.Conflict & { readonly state: SessionState.SessionState }
type Ids = { readonly tenant: string; readonly session: string }

export class Assembler extends Effect.Service<Assembler>()("@ctxd/assembler/Assembler", {
  scoped: Effect.gen(function* () {
    const config = yield* AssemblerConfig
    const store = yield* SessionStore.SessionStore
    const leases = yield* ShardLeases.ShardLeases
    const compaction = yield* CompactionPort
    const gather = yield* Gather
    const actors = yield* SessionActor.make(config, leases)
    // four refs a session (its system and tools, and a change of each) for every session kept in memory
    const prefixes = Prefixes.make({ bytes: config.prefixCacheBytes, sessionRefs: 4 * config.maxSessions })
    const ports = Engine.traced(yield* WorkerPorts.make)

    /** One attempt at the turn on the session's state (after a conflict: on that attempt's state, refreshed). */
    const attempt = (
      ids: Ids,
      decoded: Decode.Decoded,
      slot: Permits.Slot,
      cached: SessionState.SessionState | undefined,
      previous: Conflict | undefined,
    ) =>
      Effect.gen(function* () {
        const { tenant, session } = ids
        const { request, hash } = decoded
        // the config file's sections as of this attempt, for all of it (a reload applies from the next turn)
        const turnConfig = pinned(config)
        const options = Options.resolve(turnConfig, tenant, request.options)
        const { agent, user, memoryTools, memory, workspaceCache } = options
        // the session is behind what this state holds: deleted (and maybe started anew) since: start from the store
        const base = previous === undefined ? cached : previous.actualLastSeq < previous.state.lastSeq ? undefined : previous.state
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
          })
          .pipe(Spans.span("ctxd.gather", { attributes: { "ctxd.cached": base !== undefined } }))
        const { state, workspace } = gathered
        const carry = Turns.begin({
          ...ids,
          ...gathered,
          config: turnConfig,
          options,
          request,
          local: gather.localFor(request.model),
          thresholds: compaction.thresholds,
          now: yield* Clock.currentTimeMillis,
          normalized: Decode.normalized(decoded, () => SessionState.openCalls(state), workspace),
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
        const input = Commit.inputOf(ids, decoded, state, outcome)
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

    /**
     * Handles one turn request (raw bytes) for `tenant`/`session`: the span
     * `ctxd.turn`, its outcome and duration counted. The reply, with its
     * UTF-8 JSON when it was encoded already (a fresh turn's, as stored).
     * `slot`: the turn slot the caller holds for it, released here once only
     * the commit remains (default: none).
     */
    const turn = (
      tenant: string,
      session: string,
      data: Uint8Array,
      slot: Permits.Slot = Permits.noSlot,
    ): Effect.Effect<Answer, Errors.WireError> =>
      TurnMetrics.observed(
        tenant,
        session,
        Effect.suspend(() => {
          const decoded = Decode.turn(data, prefixes, { tenant, session })
          if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
          const { request } = decoded.right
          // the session may name these parts by ref from now on
          const refs = Decode.refs(decoded.right)
          const answered = actors
            .withSession(SessionActor.key(tenant, session), (cached) =>
              Commit.retrying((previous: Conflict | undefined) => attempt({ tenant, session }, decoded.right, slot, cached, previous)),
            )
            .pipe(Effect.annotateLogs({ turn: request.turnId }))
          // (its log lines carry tenant, session and shard from the endpoint)
          return Effect.zipRight(
            TurnMetrics.annotateRequest(request),
            refs === undefined ? answered : Effect.tap(answered, () => prefixes.remember(tenant, session, refs, request.format)),
          )
        }),
      )

    /** Runs `f` (a deletion) as the session's only operation here, in mailbox order, then drops its cached state; `Busy` when the mailbox is full. */
    const exclusive = <A, E, R>(tenant: string, session: string, f: Effect.Effect<A, E, R>): Effect.Effect<A, E | Errors.Busy, R> =>
      actors.withSession(SessionActor.key(tenant, session), () => Effect.map(f, (a) => [a, undefined] as const))

    return {
      turn,
      exclusive,
      invalidateKnowledge: gather.invalidateKnowledge,
      invalidateMemory: gather.invalidateMemory,
      /** Turns waiting in the session mailboxes (behind a running turn of their session). */
      mailboxDepth: actors.waiting,
    } as const
  }),
  dependencies: [Gather.Default],
}) {}
