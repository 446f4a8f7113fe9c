/**
 * The assembler, the imperative shell around one turn: decode the request →
 * the session's actor (one turn of a session at a time) → an attempt
 * (`TurnAttempt`: gather the reads → the turn engine, `turn/Engine`, over
 * the worker's ports → commit the new messages with the reply), run again on
 * the fresh history after a commit conflict (`Commit.retrying`).
 *
 * Tracing and metrics: the span `ctxd.turn` and the turn's outcome and
 * duration (`TurnMetrics.observed`); the attempt's spans are `TurnAttempt`'s.
 */
import type { Errors } from "@ctxd/contracts"
import { Permits } from "@ctxd/nats"
import { ShardLeases } from "@ctxd/sharding"
import { Effect, Either } from "effect"
import { AssemblerConfig } from "./AssemblerConfig.ts"
import * as Commit from "./Commit.ts"
import * as Decode from "./Decode.ts"
import { Gather } from "./Gather.ts"
import * as Prefixes from "./Prefixes.ts"
import * as SessionActor from "./SessionActor.ts"
import * as TurnAttempt from "./TurnAttempt.ts"
import type { Answer } from "./TurnAttempt.ts"
import * as TurnMetrics from "./TurnMetrics.ts"

export type { Answer }

export class Assembler extends Effect.Service<Assembler>()("@ctxd/assembler/Assembler", {
  scoped: Effect.gen(function* () {
    const config = yield* AssemblerConfig
    const leases = yield* ShardLeases.ShardLeases
    const gather = yield* Gather
    const actors = yield* SessionActor.make(config, leases)
    // four refs a session (its system and tools, and a change of each) for every session kept in memory
    const prefixes = Prefixes.make({ bytes: config.prefixCacheBytes, sessionRefs: 4 * config.maxSessions })
    const attempt = yield* TurnAttempt.make

    /** The turn after its decode: the session's actor, the attempts, the parts remembered for refs. */
    const decodedTurn = (tenant: string, session: string, decoded: Decode.Decoded, slot: Permits.Slot) => {
      const { request } = decoded
      // the session may name these parts by ref from now on
      const refs = Decode.refs(decoded)
      const answered = actors
        .withSession(SessionActor.key(tenant, session), (cached) =>
          Commit.retrying((previous: TurnAttempt.Conflict | undefined) => attempt({ tenant, session }, decoded, slot, cached, previous)),
        )
        .pipe(Effect.annotateLogs({ turn: request.turnId }))
      // (its log lines carry tenant, session and shard from the endpoint)
      return Effect.zipRight(
        TurnMetrics.annotateRequest(request),
        refs === undefined ? answered : Effect.tap(answered, () => prefixes.remember(tenant, session, refs, request.format)),
      )
    }

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
          return Either.isLeft(decoded) ? Effect.fail(decoded.left) : decodedTurn(tenant, session, decoded.right, slot)
        }),
      )

    /**
     * {@link turn} for a request decoded already (`Decode.given`: a replay's
     * neutral-form content): the same actor, attempts and commit.
     */
    const turnDecoded = (tenant: string, session: string, decoded: Decode.Decoded): Effect.Effect<Answer, Errors.WireError> =>
      TurnMetrics.observed(
        tenant,
        session,
        Effect.suspend(() => decodedTurn(tenant, session, decoded, Permits.noSlot)),
      )

    /** Runs `f` (a deletion) as the session's only operation here, in mailbox order, then drops its cached state; `Busy` when the mailbox is full. */
    const exclusive = <A, E, R>(tenant: string, session: string, f: Effect.Effect<A, E, R>): Effect.Effect<A, E | Errors.Busy, R> =>
      actors.withSession(SessionActor.key(tenant, session), () => Effect.map(f, (a) => [a, undefined] as const))

    return {
      turn,
      turnDecoded,
      exclusive,
      invalidateKnowledge: gather.invalidateKnowledge,
      invalidateMemory: gather.invalidateMemory,
      /** Turns waiting in the session mailboxes (behind a running turn of their session). */
      mailboxDepth: actors.waiting,
    } as const
  }),
  dependencies: [Gather.Default],
}) {}
