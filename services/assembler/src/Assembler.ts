/**
 * The assembler, the imperative shell around one turn: decode the request →
 * the session's actor (one turn of a session at a time) → gather the reads →
 * run the stages (`turn/Turn`), performing the I/O they ask for → commit the
 * new messages with the reply → advance the session state.
 *
 * Tracing: a turn is the span `ctxd.turn` (tenant, session, turn id, model,
 * outcome, tokens in — what sending everything would cost — and out — the
 * prompt's estimate —, the cache break reason; never prompt text), with a
 * child span per stage (`ctxd.stage.<name>`) holding the I/O that stage
 * asked for (`ctxd.count_tokens`, `ctxd.loop_judge`, `ctxd.compact_now`),
 * and `ctxd.gather` and `ctxd.commit` around the Postgres reads and write —
 * made only while a tracer records them (`Spans`). Metrics: `TurnMetrics`.
 *
 * A fresh turn's reply is encoded once: the same UTF-8 JSON is stored with
 * the commit and sent (`Answer.utf8`).
 */
import { type MemoryTools, Normalize, RenderedJson } from "@ctxd/context"
import { Errors, type Turn } from "@ctxd/contracts"
import { MemoryStore, SessionStore } from "@ctxd/db"
import { Json, Permits } from "@ctxd/nats"
import { Judge } from "@ctxd/loop-detector"
import { Spans } from "@ctxd/observe"
import { ShardLeases } from "@ctxd/sharding"
import { TokenCounter } from "@ctxd/token-counter"
import { Cause, Clock, Effect, Either, Exit, Option } from "effect"
import { createHash } from "node:crypto"
import { AssemblerConfig, pinned } from "./AssemblerConfig.ts"
import * as Commit from "./Commit.ts"
import { Compaction } from "./Compaction.ts"
import * as Decode from "./Decode.ts"
import { Gather, type Gathered } from "./Gather.ts"
import * as Prefixes from "./Prefixes.ts"
import * as SessionActor from "./SessionActor.ts"
import * as SessionState from "./SessionState.ts"
import type * as Carry from "./turn/Carry.ts"
import * as Options from "./turn/Options.ts"
import * as TurnStages from "./turn/Turn.ts"
import * as TurnMetrics from "./TurnMetrics.ts"

/** How long a turn may wait for a compaction it cannot go without: 60 s. */
const BLOCKING_COMPACTION_TIMEOUT = "60 seconds"

/** The id `memory_remember` gives a new memory: derived from the tenant, session and call. */
const callMemoryId = (tenant: string, session: string, callId: string): string =>
  `m-${createHash("sha256").update(`${tenant}\u0000${session}\u0000${callId}`).digest("hex").slice(0, 32)}`

/** A turn's answer: the reply, and its UTF-8 JSON when encoded already (to send as it is). */
export interface Answer {
  readonly reply: Turn.TurnReply
  readonly utf8?: Uint8Array | undefined
}

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
    // four refs a session (its system and tools, and a change of each) for every session kept in memory
    const prefixes = Prefixes.make({ bytes: config.prefixCacheBytes, sessionRefs: 4 * config.maxSessions })
    // optional: without a memory store (in-process uses), memory calls are answered with an error
    const memories = yield* Effect.serviceOption(MemoryStore.MemoryStore)

    /** Runs the memory calls of a turn in order (a write before a read of it); a failure is that call's error result. */
    const memoryCalls = (calls: ReadonlyArray<MemoryTools.Call>, scope: MemoryStore.Scope, session: string) =>
      Effect.forEach(calls, (call) => {
        if (Option.isNone(memories)) return Effect.succeed([call.callId, { op: "error", message: "memory is not available here" }] as const)
        const store = memories.value
        const o = call.operation
        const run: Effect.Effect<MemoryTools.Result, MemoryStore.Failure> =
          o.op === "search"
            ? Effect.map(store.search(scope, o.query, { limit: o.limit }), (hits) => ({ op: "search", hits }))
            : o.op === "read"
              ? Effect.map(store.read(scope, o.id), (document) => ({ op: "read", document }))
              : o.op === "list"
                ? Effect.map(store.list(scope, { cursor: o.cursor, limit: o.limit }), (page) => ({ op: "list", ...page }))
                : o.op === "history"
                  ? Effect.map(store.history(scope, o.id), (versions) => ({ op: "history", versions }))
                  : Effect.map(
                      // a new memory's id follows from the call, so a turn run again (a commit conflict, a retried turn) stores it once
                      store.remember(scope, { text: o.text, tags: o.tags, id: o.id ?? callMemoryId(scope.tenant, session, call.callId), source: `session ${session}` }),
                      (done) => ({ op: "remember", ...done }),
                    )
        return run.pipe(
          Effect.catchAll((e): Effect.Effect<MemoryTools.Result> =>
            Effect.succeed({
              op: "error",
              message: e._tag === "MemoryInvalid" ? `${e.path}: ${e.message}` : "the memory store is unavailable right now",
            }),
          ),
          Effect.map((result) => [call.callId, result] as const),
        )
      }).pipe(Effect.map((entries) => new Map(entries)))

    /** Performs the I/O a stage asked for, in its own span; the answers to record. */
    const perform = (need: Carry.Need, carry: Carry.Carry): Effect.Effect<Carry.Answers> => {
      const { tenant, session, state } = carry.inputs
      switch (need._tag) {
        case "Count":
          return tokens.countTurn(need.input).pipe(
            Effect.tap((count) => Spans.annotate({ "ctxd.counter.backend": count.backend, "ctxd.counter.exact": count.exact })),
            Effect.map((count) => ({ count })),
            Spans.span("ctxd.count_tokens"),
          )
        case "Judge":
          return judge.ask({ ...need.input, tenant }).pipe(
            Effect.map((answer) => ({ judge: answer })),
            Spans.span("ctxd.loop_judge", { kind: "client" }),
          )
        case "CompactNow":
          return compaction.now(need.job, BLOCKING_COMPACTION_TIMEOUT).pipe(
            Effect.zipRight(gather.summary(tenant, session, state)),
            Effect.as({ compacted: need.decision }),
            Spans.span("ctxd.compact_now"),
          )
        case "Memory": {
          const { agent, user } = carry.inputs.options
          return memoryCalls(need.calls, { tenant, agent, user }, session).pipe(
            Effect.map((memory) => ({ memory })),
            Spans.span("ctxd.memory_tools", { attributes: { "ctxd.memory.calls": need.calls.length } }),
          )
        }
        case "MemoryRecall":
          return gather.retrieve(tenant, need.query).pipe(
            Effect.tap((answer) => Spans.annotate({ "ctxd.memory.hits": answer.hits.length, "ctxd.memory.learnings": answer.learnings.length })),
            Effect.map((recalled) => ({ recalled })),
            Spans.span("ctxd.memory_search", { kind: "client" }),
          )
      }
    }

    /** Stage `at` in its span: run it, perform the I/O it asks for and run it again, until it passes or rejects. */
    const stage = (carry: Carry.Carry, at: number): Effect.Effect<Carry.Step> => {
      const { name, run } = TurnStages.STAGES[at]!
      const attempt = (current: Carry.Carry): Effect.Effect<Carry.Step> =>
        Effect.suspend(() => {
          const step = run(current)
          if (step._tag !== "Need") return Effect.succeed(step)
          return Effect.flatMap(perform(step.need, current), (answers) => attempt({ ...current, answers: { ...current.answers, ...answers } }))
        })
      return attempt(carry).pipe(Spans.span(`ctxd.stage.${name}`))
    }

    /** Runs the stages from `at` (as `TurnStages.run` does), each in its span, until the reply is built or the request rejected. */
    const tracedStages = (carry: Carry.Carry, at = 0): Effect.Effect<Exclude<TurnStages.Outcome, { readonly _tag: "Need" }>> =>
      at >= TurnStages.STAGES.length
        ? Effect.succeed({ _tag: "Done", carry, reply: carry.reply! })
        : Effect.flatMap(stage(carry, at), (step) => {
            if (step._tag === "Rejected") return Effect.succeed(step)
            if (step._tag === "Next") return tracedStages(step.carry, at + 1)
            return Effect.dieMessage(`turn stage ${TurnStages.STAGES[at]!.name}: a need left unanswered`)
          })

    /** The same as plain function calls, entering the runtime only for the I/O a stage asks for. */
    const plainStages = (carry: Carry.Carry, at = 0): Effect.Effect<Exclude<TurnStages.Outcome, { readonly _tag: "Need" }>> =>
      Effect.suspend(() => {
        const outcome = TurnStages.run(carry, at)
        if (outcome._tag !== "Need") return Effect.succeed(outcome)
        const current = outcome.carry
        return Effect.flatMap(perform(outcome.need, current), (answers) => plainStages({ ...current, answers: { ...current.answers, ...answers } }, outcome.at))
      })

    /** The turn's stages: a span per stage when a tracer records them (`Spans.recording`), else plain calls. */
    const stages = (carry: Carry.Carry): Effect.Effect<Exclude<TurnStages.Outcome, { readonly _tag: "Need" }>> =>
      Effect.flatMap(Spans.recording, (traced) => (traced ? tracedStages(carry) : plainStages(carry)))

    /** A turn's reply (and its UTF-8 JSON when encoded already), and whether it was committed now (false: a stored reply replayed). */
    type Answered = { readonly reply: Turn.TurnReply; readonly utf8?: Uint8Array | undefined; readonly fresh: boolean }

    /** A commit conflict, with the state to refresh for the next attempt. */
    type Conflict = Commit.Conflict & { readonly state: SessionState.SessionState }

    /** The stages' carry for a turn on the gathered state (plain calls: no runtime steps). */
    const beginStages = (
      turnConfig: AssemblerConfig["Type"],
      ids: { readonly tenant: string; readonly session: string },
      decoded: Decode.Decoded,
      gathered: Gathered,
      now: number,
    ): Carry.Carry => {
      const { state, workspace } = gathered
      const { request } = decoded
      return TurnStages.begin({
        config: turnConfig,
        tenant: ids.tenant,
        session: ids.session,
        request,
        state,
        knowledge: gathered.knowledge,
        local: gather.localFor(request.model),
        thresholds: compaction.thresholds,
        now,
        lengths: gathered.lengths,
        workspace,
        memoryAny: gathered.memoryAny,
        normalized: Decode.normalized(decoded, () => Normalize.openCalls(state.messages.map((r) => r.message), state.callIds, state.answered), workspace),
      })
    }

    /** What a built turn commits: its new messages and its reply, the reply encoded once (the same bytes are stored and sent). */
    const commitInput = (
      ids: { readonly tenant: string; readonly session: string },
      decoded: Decode.Decoded,
      state: SessionState.SessionState,
      outcome: Extract<TurnStages.Outcome, { readonly _tag: "Done" }>,
      agent: string,
    ): Commit.Input & { readonly replyUtf8: Uint8Array } => {
      const { request, hash } = decoded
      const refs = Decode.refs(decoded)
      const reply: Turn.TurnReply = refs === undefined ? outcome.reply : { ...outcome.reply, refs }
      const fresh = outcome.carry.count!.fresh
      const turns = SessionState.turnsAfter(state, fresh)
      return {
        tenant: ids.tenant,
        session: ids.session,
        turnId: request.turnId,
        hash,
        expectedLastSeq: state.lastSeq,
        family: state.family,
        rows: fresh,
        reply,
        replyUtf8: Json.utf8(RenderedJson.stringify(reply)),
        length: SessionState.recordsLength(state, agent, turns) ? { agent, turns } : undefined,
        user: request.options?.user,
      }
    }

    /** One attempt at the turn on the session's state (after a conflict: on that attempt's state, refreshed). */
    const attempt = (ids: { readonly tenant: string; readonly session: string }, decoded: Decode.Decoded, cached: SessionState.SessionState | undefined, previous: Conflict | undefined, slot: Permits.Slot) =>
      Effect.gen(function* () {
        const { tenant, session } = ids
        const { request, hash } = decoded
        // the config file's sections as of this attempt, for all of it (a reload applies from the next turn)
        const turnConfig = pinned(config)
        const { agent, user, memoryTools, memory, workspaceCache } = Options.resolve(turnConfig, tenant, request.options)
        // the session is behind what this state holds: deleted (and maybe started anew) since: start from the store
        const base = previous === undefined ? cached : previous.actualLastSeq < previous.state.lastSeq ? undefined : previous.state
        const gathered = yield* gather
          .gather({ tenant, session, model: request.model, agent, user, memoryTools, memory: memory.enabled, system: request.system, workspaceCache, cached: base, refresh: previous !== undefined })
          .pipe(Spans.span("ctxd.gather", { attributes: { "ctxd.cached": base !== undefined } }))
        const { state } = gathered
        const now = yield* Clock.currentTimeMillis
        const carry = beginStages(turnConfig, ids, decoded, gathered, now)
        const outcome = yield* stages(carry)
        if (outcome._tag === "Rejected") {
          // a retried turn whose messages are stored already trips the pairing check: answer it from the store
          const stored = outcome.pairing ? yield* store.findTurn(tenant, session, request.turnId).pipe(Effect.mapError(Commit.storeError)) : Option.none()
          if (Option.isSome(stored)) return [{ reply: yield* Commit.replay(request.turnId, hash, stored.value), fresh: false } as Answered, state] as const
          return yield* Effect.fail(new Errors.BadRequest({ message: outcome.message, ...(outcome.path === undefined ? {} : { path: outcome.path }) }))
        }
        const input = commitInput(ids, decoded, state, outcome, agent)
        const { reply, replyUtf8: utf8 } = input
        // the turn's CPU work is done: its turn slot goes to the next turn while this one waits for
        // Postgres (and commits waiting together go out in one statement: SessionStore's group commit)
        yield* slot.release
        const committed = yield* Commit.commit(store, leases, input).pipe(Spans.span("ctxd.commit", { attributes: { "ctxd.messages.new": input.rows.length } }))
        if (committed._tag === "Conflict") return { ...committed, state } satisfies Conflict
        // its messages are stored but maybe not in this state: drop it
        if (committed._tag === "Replayed") return [{ reply: committed.reply, fresh: false } as Answered, undefined] as const
        SessionState.advance(state, TurnStages.committed(outcome.carry, input.length?.agent))
        const job = outcome.carry.compaction!.schedule
        if (job !== undefined) yield* compaction.schedule(job)
        TurnMetrics.record(reply.report)
        return [{ reply, utf8, fresh: true } as Answered, state] as const
      })

    /** One turn, with whether it was committed now (false: a replay of a stored reply). */
    const handle = (tenant: string, session: string, data: Uint8Array, slot: Permits.Slot): Effect.Effect<Answered, Errors.WireError> =>
      Effect.suspend(() => {
        const decoded = Decode.turn(data, prefixes, { tenant, session })
        if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
        const { request } = decoded.right
        // the session may name these parts by ref from now on
        const refs = Decode.refs(decoded.right)
        const answered = actors
          .withSession(SessionActor.key(tenant, session), (cached) =>
            Commit.retrying((previous: Conflict | undefined) => attempt({ tenant, session }, decoded.right, cached, previous, slot)),
          )
          .pipe(Effect.annotateLogs({ turn: request.turnId }))
        // (its log lines carry tenant, session and shard from the endpoint)
        return Effect.zipRight(
          Spans.annotate(() => ({
            "ctxd.turn.id": request.turnId,
            "ctxd.format": request.format,
            "gen_ai.system": request.model.provider,
            "gen_ai.request.model": request.model.name,
          })),
          refs === undefined ? answered : Effect.tap(answered, () => prefixes.remember(tenant, session, refs, request.format)),
        )
      })

    /**
     * Handles one turn request (raw bytes) for `tenant`/`session`: the span
     * `ctxd.turn`, its outcome and duration counted. The reply, with its
     * UTF-8 JSON when it was encoded already (a fresh turn's, as stored).
     * `slot`: the turn slot the caller holds for it, released here once only
     * the commit remains (default: none).
     */
    const turn = (tenant: string, session: string, data: Uint8Array, slot: Permits.Slot = Permits.noSlot): Effect.Effect<Answer, Errors.WireError> =>
      Effect.clockWith((clock) => {
        const started = clock.unsafeCurrentTimeNanos()
        return Effect.flatMap(Effect.exit(handle(tenant, session, data, slot)), (exit) => {
          const seconds = Number(clock.unsafeCurrentTimeNanos() - started) / 1e9
          const outcome = Exit.match(exit, {
            onSuccess: ({ fresh }) => (fresh ? "ok" : "replayed"),
            onFailure: (cause) =>
              Option.match(Cause.failureOption(cause), {
                onSome: (error) => TurnMetrics.outcomeOf(Errors.codeOf(error)),
                onNone: () => (Cause.isInterruptedOnly(cause) ? "interrupted" : "internal"),
              }),
          })
          const report = Exit.isSuccess(exit) ? exit.value.reply.report : undefined
          TurnMetrics.finished(outcome, seconds, report)
          const answer: Effect.Effect<Answer, Errors.WireError> = Exit.isSuccess(exit) ? Effect.succeed({ reply: exit.value.reply, utf8: exit.value.utf8 }) : exit
          return Effect.zipRight(
            Spans.annotate(() => ({
              "ctxd.turn.outcome": outcome,
              ...(report === undefined
                ? {}
                : {
                    "ctxd.tokens.in": report.tokens.system + report.tokens.tools + report.tokens.memory + report.tokens.fullHistory,
                    "ctxd.tokens.out": report.tokens.total,
                    "ctxd.tokens.budget": report.tokens.budget,
                    "ctxd.messages.sent": report.messages.sent,
                    "ctxd.cache.break_reason": report.cache.reason,
                    "ctxd.cache.expected_read_tokens": report.cache.expectedReadTokens,
                    "ctxd.compaction.trigger": report.compaction?.trigger,
                    "ctxd.counter.backend": report.counter.backend,
                  }),
            })),
            answer,
          )
        })
      }).pipe(Spans.span("ctxd.turn", { kind: "server", attributes: { "ctxd.tenant": tenant, "ctxd.session": session } }))

    /**
     * Runs `f` as the session's only operation on this worker, after its turns
     * already waiting (and before the ones that arrive after), then drops the
     * session's cached state: its next turn reads the store anew. For a
     * deletion; `Busy` when the session's mailbox is full.
     */
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
