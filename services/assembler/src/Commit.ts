/**
 * Committing a turn: the shard lease's fence is checked on the same write
 * that appends the new messages and stores the reply, in one transaction
 * (`SessionStore.commitTurn`), so a retried `turnId` gets the same reply and
 * nothing is ever half-written; the session's length (its agent and turns)
 * for the agent's history of session lengths is recorded by that same
 * statement, on success only. Another writer having appended since the
 * state was read (`SeqConflict`) re-runs the turn on the fresh history, at
 * most {@link MAX_ATTEMPTS} times.
 */
import { RenderedJson } from "@ctxd/context"
import { Errors, type Turn } from "@ctxd/contracts"
import { type SessionStore } from "@ctxd/db"
import { Json } from "@ctxd/nats"
import { type ShardLeases } from "@ctxd/sharding"
import { Effect, Option } from "effect"
import * as Decode from "./Decode.ts"
import * as SessionState from "./SessionState.ts"
import type * as Turns from "./turn/Turn.ts"

/** How many times a turn runs when other writers keep appending to its session: 3. */
export const MAX_ATTEMPTS = 3

/**
 * A store failure as the caller sees it: `Unavailable` (retry) when the
 * database cannot be reached; otherwise `Internal` (the store logged the
 * cause: SQLSTATE and Postgres's message, never the data).
 */
export const storeError = (error: { readonly _tag: string; readonly message: string }): Errors.WireError =>
  error._tag === "DatabaseUnavailable"
    ? new Errors.ServiceUnavailable({ message: "the session store is unavailable; retry", hint: error.message })
    : new Errors.InternalError({ message: "the session store failed" })

/**
 * Whether a stored turn's hash is this request's: the current hash, or for
 * a turn stored by a worker before issue 18 (a hash without the
 * `Decode.HASH_VERSION` prefix), the legacy hash of the whole request, so a
 * retry that spans a rolling upgrade is answered, not refused.
 */
export const sameRequest = (stored: string, hash: Decode.TurnHash): boolean =>
  stored === hash.current || (!stored.startsWith(Decode.HASH_VERSION) && stored === hash.legacy())

/**
 * A turn id answered before: the stored reply; `Conflict` when the content
 * differs, or when the reply was pruned after the idempotency window
 * (`CTXD_REPLY_RETENTION`): its messages are stored, the reply is not.
 */
export const replay = (
  turnId: string,
  hash: Decode.TurnHash,
  stored: SessionStore.StoredTurn,
): Effect.Effect<Turn.TurnReply, Errors.WireError> =>
  sameRequest(stored.requestHash, hash)
    ? stored.expired === true
      ? Effect.fail(
          new Errors.TurnConflict({
            message: `turnId ${JSON.stringify(turnId)} was committed before its idempotency window passed: its reply is no longer stored`,
            path: "turnId",
            hint: "its messages are stored; send the next turn with a new turnId (retries are answered within CTXD_REPLY_RETENTION)",
          }),
        )
      : Effect.succeed(stored.reply as Turn.TurnReply)
    : Effect.fail(
        new Errors.TurnConflict({
          message: `turnId ${JSON.stringify(turnId)} was already used with different content`,
          path: "turnId",
          hint: "use a new turnId for a new turn; resend the same content to get the stored reply",
        }),
      )

/** The session's shard is not (or no longer) this worker's: nothing was stored; the owner answers the retry. */
const notOwner = (shard: number): Errors.WireError =>
  new Errors.NotOwner({
    message: `this worker does not own shard ${shard} (any more); nothing was stored`,
    hint: "retry with the same turnId: the shard's owner answers it",
  })

/** What a commit came to. */
export type Outcome =
  /** Stored: the new messages and the reply. */
  | { readonly _tag: "Committed" }
  /** The turn id was stored before (by an earlier attempt or another worker): its reply. */
  | { readonly _tag: "Replayed"; readonly reply: Turn.TurnReply }
  /** Another writer appended first: run the turn again on the fresh history. */
  | Conflict

/** Another writer appended to the session first. */
export interface Conflict {
  readonly _tag: "Conflict"
  readonly actualLastSeq: number
}

export interface Input {
  readonly tenant: string
  readonly session: string
  readonly turnId: string
  readonly hash: Decode.TurnHash
  /** The stored history's last seq the turn was built on. */
  readonly expectedLastSeq: number
  readonly family: string
  readonly rows: ReadonlyArray<{ readonly message: SessionStore.NewMessage["message"]; readonly tokens: number }>
  readonly reply: Turn.TurnReply
  /** `reply`'s UTF-8 JSON, encoded once: stored, and sent as the answer. */
  readonly replyUtf8?: Uint8Array | undefined
  /** The session's agent and turns once this commit is stored, recorded with it for the history of session lengths. */
  readonly length?: SessionStore.Length | undefined
  /** The turn's `options.user`, recorded for the session (deleting a user's data). */
  readonly user?: string | undefined
}

/**
 * What a built turn commits: its new messages and its reply (with the
 * request's `refs` and, for a client-history turn, its `history` report),
 * the reply encoded once — the same bytes are stored and sent; the
 * session's length when it is to be recorded.
 */
export const inputOf = (
  ids: { readonly tenant: string; readonly session: string },
  decoded: Decode.Decoded,
  state: SessionState.SessionState,
  built: Extract<Turns.Outcome, { readonly _tag: "Done" }>,
  history?: Turn.HistoryReport,
): Input & { readonly replyUtf8: Uint8Array } => {
  const { request, hash } = decoded
  const refs = Decode.refs(decoded)
  const reported: Turn.TurnReply = history === undefined ? built.reply : { ...built.reply, report: { ...built.reply.report, history } }
  const reply: Turn.TurnReply = refs === undefined ? reported : { ...reported, refs }
  const fresh = built.carry.count!.fresh
  const agent = built.carry.inputs.options.agent
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

/** Commits one turn under this worker's fence for the session's shard. */
export const commit = (
  store: SessionStore.SessionStore,
  leases: ShardLeases.ShardLeases,
  input: Input,
): Effect.Effect<Outcome, Errors.WireError> =>
  Effect.gen(function* () {
    const shard = leases.shardOf(input.tenant, input.session)
    const fence = yield* leases.fence(shard)
    if (Option.isNone(fence)) return yield* Effect.fail(notOwner(shard))
    const committed = yield* store
      .commitTurn({
        tenant: input.tenant,
        session: input.session,
        turnId: input.turnId,
        requestHash: input.hash.current,
        expectedLastSeq: input.expectedLastSeq,
        messages: input.rows.map((r) => ({ message: r.message, tokens: r.tokens, encoding: input.family })),
        reply: input.reply,
        replyUtf8: input.replyUtf8,
        fence: fence.value,
        length: input.length,
        user: input.user,
      })
      .pipe(Effect.either)
    if (committed._tag === "Right") return { _tag: "Committed" }
    const error = committed.left
    switch (error._tag) {
      case "TurnExists":
        return { _tag: "Replayed", reply: yield* replay(input.turnId, input.hash, error.stored) }
      case "NotOwner":
        return yield* Effect.fail(notOwner(shard))
      case "SeqConflict":
        return { _tag: "Conflict", actualLastSeq: error.actualLastSeq }
      default:
        return yield* Effect.fail(storeError(error))
    }
  })

/**
 * Runs `attempt(undefined)`; while it ends in a {@link Conflict} (the
 * session moved on under us), runs it again with that conflict (whose state
 * it refreshes), at most {@link MAX_ATTEMPTS} times in all; then `Unavailable`.
 */
export const retrying = <X, C extends Conflict, E, R>(
  attempt: (previous: C | undefined) => Effect.Effect<X, E, R>,
): Effect.Effect<Exclude<X, Conflict>, E | Errors.WireError, R> =>
  Effect.gen(function* () {
    let previous: C | undefined
    for (let n = 0; n < MAX_ATTEMPTS; n++) {
      const result = yield* attempt(previous)
      if (!isConflict(result)) return result as Exclude<X, Conflict>
      previous = result as unknown as C
      yield* Effect.logDebug("session moved on under us; reloading").pipe(Effect.annotateLogs({ actualLastSeq: result.actualLastSeq }))
    }
    return yield* Effect.fail(new Errors.ServiceUnavailable({ message: "the session is being written concurrently; retry" }))
  })

const isConflict = (value: unknown): value is Conflict =>
  typeof value === "object" && value !== null && (value as { _tag?: unknown })._tag === "Conflict"
