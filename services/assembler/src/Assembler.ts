/**
 * The assembler, the imperative shell around one turn: decode the request →
 * the session's actor (one turn of a session at a time) → gather the reads →
 * run the stages (`turn/Turn`), performing the I/O they ask for → commit the
 * new messages with the reply → advance the session state.
 */
import { Errors, type Turn } from "@ctxd/contracts"
import { SessionStore } from "@ctxd/db"
import { Judge } from "@ctxd/loop-detector"
import { ShardLeases } from "@ctxd/sharding"
import { TokenCounter } from "@ctxd/token-counter"
import { Clock, Effect, Option } from "effect"
import { createHash } from "node:crypto"
import { AssemblerConfig } from "./AssemblerConfig.ts"
import * as Commit from "./Commit.ts"
import { Compaction } from "./Compaction.ts"
import * as Decode from "./Decode.ts"
import { Gather } from "./Gather.ts"
import * as SessionActor from "./SessionActor.ts"
import * as SessionState from "./SessionState.ts"
import type * as Carry from "./turn/Carry.ts"
import * as Options from "./turn/Options.ts"
import * as TurnStages from "./turn/Turn.ts"
import * as TurnMetrics from "./TurnMetrics.ts"

/** How long a turn may wait for a compaction it cannot go without: 60 s. */
const BLOCKING_COMPACTION_TIMEOUT = "60 seconds"

const requestHash = (request: Turn.TurnRequest): string => createHash("sha256").update(JSON.stringify(request)).digest("hex")

export class Assembler extends Effect.Service<Assembler>()("@ctxd/assembler/Assembler", {
  scoped: Effect.gen(function* () {
    const config = yield* AssemblerConfig
    const store = yield* SessionStore.SessionStore
    const leases = yield* ShardLeases.ShardLeases
    const tokens = yield* TokenCounter.TokenCounter
    const compaction = yield* Compaction
    const judge = yield* Judge.Judge
    const gather = yield* Gather
    const actors = yield* SessionActor.make(config, leases)

    /** Runs the stages, performing the I/O they ask for, until the reply is built or the request rejected. */
    const stages = (carry: Carry.Carry, from = 0): Effect.Effect<Exclude<TurnStages.Outcome, { readonly _tag: "Need" }>> =>
      Effect.suspend(() => {
        const outcome = TurnStages.run(carry, from)
        if (outcome._tag !== "Need") return Effect.succeed(outcome)
        const { need, at } = outcome
        const { tenant, session, state } = carry.inputs
        const answered = (answers: Carry.Answers) => stages({ ...outcome.carry, answers: { ...outcome.carry.answers, ...answers } }, at)
        switch (need._tag) {
          case "Count":
            return Effect.flatMap(tokens.countTurn(need.input), (count) => answered({ count }))
          case "Judge":
            return Effect.flatMap(judge.ask(need.input), (answer) => answered({ judge: answer }))
          case "CompactNow":
            return compaction.now(need.job, BLOCKING_COMPACTION_TIMEOUT).pipe(
              Effect.zipRight(gather.summary(tenant, session, state)),
              Effect.zipRight(answered({ compacted: need.decision })),
            )
        }
      })

    /** A commit conflict, with the state to refresh for the next attempt. */
    type Conflict = Commit.Conflict & { readonly state: SessionState.SessionState }

    /** One attempt at the turn on the session's state (after a conflict: on that attempt's state, refreshed). */
    const attempt = (ids: { readonly tenant: string; readonly session: string }, request: Turn.TurnRequest, hash: string, cached: SessionState.SessionState | undefined, previous: Conflict | undefined) =>
      Effect.gen(function* () {
        const { tenant, session } = ids
        const agent = Options.resolve(config, tenant, request.options).agent
        const { state, knowledge, lengths } = yield* gather.gather({ tenant, session, model: request.model, agent, cached: previous?.state ?? cached, refresh: previous !== undefined })
        const now = yield* Clock.currentTimeMillis
        const carry = TurnStages.begin({ config, tenant, session, request, state, knowledge, local: gather.localFor(request.model), thresholds: compaction.thresholds, now, lengths })
        const outcome = yield* stages(carry)
        if (outcome._tag === "Rejected") {
          // a retried turn whose messages are stored already trips the pairing check: answer it from the store
          const stored = outcome.pairing ? yield* store.findTurn(tenant, session, request.turnId).pipe(Effect.mapError(Commit.storeError)) : Option.none()
          if (Option.isSome(stored)) return [yield* Commit.replay(request.turnId, hash, stored.value), state] as const
          return yield* Effect.fail(new Errors.BadRequest({ message: outcome.message, ...(outcome.path === undefined ? {} : { path: outcome.path }) }))
        }
        const { reply } = outcome
        const fresh = outcome.carry.count!.fresh
        const committed = yield* Commit.commit(store, leases, {
          tenant,
          session,
          turnId: request.turnId,
          hash,
          expectedLastSeq: state.lastSeq,
          family: state.family,
          rows: fresh,
          reply,
          length: { agent, turns: SessionState.turnsAfter(state, fresh) },
        })
        if (committed._tag === "Conflict") return { ...committed, state } satisfies Conflict
        // its messages are stored but maybe not in this state: drop it
        if (committed._tag === "Replayed") return [committed.reply, undefined] as const
        SessionState.advance(state, TurnStages.committed(outcome.carry))
        const job = outcome.carry.compaction!.schedule
        if (job !== undefined) yield* compaction.schedule(job)
        yield* TurnMetrics.record(reply.report)
        return [reply, state] as const
      })

    /** Handles one turn request (raw bytes) for `tenant`/`session`. */
    const turn = (tenant: string, session: string, data: Uint8Array): Effect.Effect<Turn.TurnReply, Errors.WireError> =>
      Effect.gen(function* () {
        const request = yield* Decode.parseJson(data).pipe(Effect.flatMap(Decode.turnRequest))
        const hash = requestHash(request)
        return yield* actors
          .withSession(SessionActor.key(tenant, session), (cached) =>
            Commit.retrying((previous: Conflict | undefined) => attempt({ tenant, session }, request, hash, cached, previous)),
          )
          .pipe(Effect.annotateLogs({ turn: request.turnId }))
      }).pipe(Effect.annotateLogs({ tenant, session }), Effect.withLogSpan("turn"))

    return { turn, invalidateKnowledge: gather.invalidateKnowledge } as const
  }),
  dependencies: [Gather.Default],
}) {}
