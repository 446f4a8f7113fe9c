/**
 * Sessions, their append-only messages and their idempotent turns, in
 * Postgres. A session is addressed by `(tenant, session)` and every query
 * names both: nothing reaches a session by its internal id alone, so one
 * tenant can never read or write another's session of the same name.
 *
 * {@link SessionStore.commitTurn} is the only writer. It appends a turn's
 * messages and records the turn with its reply in one transaction, under the
 * session row's lock, after checking the turn id is new and the session has
 * not moved on since the caller loaded it (optimistic concurrency on
 * `last_seq`). It writes everything or nothing. The transaction is one
 * statement, a call of the PL/pgSQL function `ctxd_commit_turn_v11`
 * (migration 11), so a commit costs one round trip — or a share of one:
 * commits of other sessions arriving while {@link defaults}' statements are
 * in flight go out together in one statement (`ctxd_commit_turns_v12`,
 * migration 12: each as `_v11` commits it, in one transaction; group commit,
 * `internal/groupCommit`), and a batch Postgres refuses as a whole runs
 * again commit by commit, so each gets its own outcome. The reply travels and is
 * stored compressed by the worker (`ctxd_turns.reply_z`), never parsed by
 * Postgres. The same statement records the session's {@link Length} for the
 * agent's history of session lengths when the commit carries one, and the
 * turn's user for the session (`ctxd_session_users`) when it carries one.
 * The hot statements are prepared once per connection.
 *
 * Fencing: a commit may carry the caller's shard lease ({@link Fence}); the
 * lease row is then checked in the same transaction, after the session lock,
 * against the database clock, and a caller whose lease was released, expired
 * or taken over (a newer epoch) gets {@link NotOwner} and writes nothing. No
 * lock is taken on the lease row (commits on one shard do not contend on it):
 * a takeover committed between the check and this commit cannot interleave
 * with the new owner's writes, because the new owner appends under the same
 * session lock with its own expected `last_seq` and gets {@link SeqConflict}
 * if this write landed after it loaded the session.
 *
 * {@link layer}: Postgres (integration tests use a real Postgres in a
 * throwaway schema). {@link layerMemory}: the same contract in memory, for
 * `ctxd replay` and fast unit tests (one process; shared contract tests in
 * `test/StoreContract.integration.test.ts` run against both).
 */
import type { Conversation } from "@ctxd/contracts"
import { Spans } from "@ctxd/observe"
import { Context, Effect, Layer, Option } from "effect"
import { Database, DatabaseError, type DatabaseUnavailable } from "./Database.ts"
import {
  batchParams,
  byIndex,
  COMMIT_TURN,
  COMMIT_TURNS,
  type CommitRow,
  FIND_TURN,
  LIST_TURNS,
  LOAD_MESSAGES,
  type MessageRow,
  type TurnRow,
} from "./internal/commitSql.ts"
import { commitSplits, commitsWaiting, commitTurns } from "./internal/commitMetrics.ts"
import * as GroupCommit from "./internal/groupCommit.ts"
import { logFailure } from "./internal/logFailure.ts"
import * as ReplyCodec from "./internal/replyCodec.ts"
import {
  type CommitTurn,
  type Committed,
  type Fence,
  NotOwner,
  SeqConflict,
  type StoredMessage,
  type StoredTurn,
  type TurnEntry,
  TurnExists,
} from "./internal/sessionModel.ts"

export * from "./internal/sessionModel.ts"
export { commitSplits, commitsWaiting, commitTurns }

type Failure = DatabaseUnavailable | DatabaseError

const undecodable = (cause: unknown) => new DatabaseError({ message: `stored reply could not be decoded: ${String(cause)}`, cause })

const storedReply = (reply: unknown, replyZ: Uint8Array | null): Effect.Effect<unknown, DatabaseError> =>
  replyZ === null ? Effect.succeed(reply) : Effect.try({ try: () => ReplyCodec.decode(replyZ), catch: undecodable })

/**
 * What a turn's stored reply becomes once pruned (`ctxd_turns.reply`, with no
 * `reply_z`): the error envelope a retry of the turn after the idempotency
 * window gets. A worker of an earlier release replays it as it is, so it
 * answers the same `Conflict`.
 */
export const EXPIRED_REPLY = {
  ok: false,
  error: {
    code: "Conflict",
    message: "this turnId's idempotency window has passed: its reply is no longer stored",
    path: "turnId",
    hint: "use a new turnId; the turn's messages are stored (CTXD_REPLY_RETENTION)",
  },
} as const

/** True for a reply pruned to {@link EXPIRED_REPLY} (only successes are ever stored as replies). */
const isExpired = (reply: unknown, replyZ: Uint8Array | null): boolean =>
  replyZ === null && typeof reply === "object" && reply !== null && (reply as { ok?: unknown }).ok === false

const toTurn = (row: TurnRow): Effect.Effect<StoredTurn, DatabaseError> =>
  Effect.map(storedReply(row.reply, row.reply_z), (reply) => ({
    turnId: row.turn_id,
    requestHash: row.request_hash,
    reply,
    firstSeq: row.first_seq,
    lastSeq: row.last_seq,
    ...(isExpired(row.reply, row.reply_z) ? { expired: true as const } : {}),
  }))

/** The typed result of a `ctxd_commit_turn` row. */
const outcome = (
  input: CommitTurn,
  row: CommitRow | undefined,
): Effect.Effect<Committed, NotOwner | SeqConflict | TurnExists | DatabaseError> => {
  switch (row?.status) {
    case "ok":
      return Effect.succeed({ firstSeq: input.expectedLastSeq + 1, lastSeq: input.expectedLastSeq + input.messages.length })
    case "not_owner": {
      const fence = input.fence!
      const epoch = String(fence.epoch)
      return Effect.fail(
        new NotOwner({
          message: `${fence.owner} does not hold shard ${fence.shard} at epoch ${epoch}`,
          shard: fence.shard,
          owner: fence.owner,
          epoch,
        }),
      )
    }
    case "exists":
      return Effect.flatMap(
        toTurn({
          turn_id: input.turnId,
          request_hash: row.stored_request_hash!,
          first_seq: row.stored_first_seq!,
          last_seq: row.stored_last_seq!,
          reply: row.stored_reply,
          reply_z: row.stored_reply_z,
        }),
        (stored) => Effect.fail(new TurnExists({ message: `turn ${input.turnId} was already committed`, stored })),
      )
    case "conflict": {
      const actualLastSeq = row.actual_last_seq!
      return Effect.fail(
        new SeqConflict({
          message: `session is at seq ${actualLastSeq}, expected ${input.expectedLastSeq}`,
          expectedLastSeq: input.expectedLastSeq,
          actualLastSeq,
        }),
      )
    }
    default:
      return Effect.fail(new DatabaseError({ message: `ctxd_commit_turn returned ${JSON.stringify(row?.status)}` }))
  }
}

/** The parameters of {@link COMMIT_TURN}; fails as Postgres did for a reply jsonb could not hold. */
const commitParams = (input: CommitTurn): Effect.Effect<ReadonlyArray<unknown>, DatabaseError> =>
  Effect.suspend(() => {
    const reply = input.replyUtf8 ?? JSON.stringify(input.reply) ?? "null"
    if (ReplyCodec.hasNul(reply)) {
      return Effect.fail(new DatabaseError({ message: "unsupported Unicode escape sequence: \\u0000 in the reply", code: "22P05" }))
    }
    const messages = input.messages.map((m) => ({ message: m.message, tokens: m.tokens, encoding: m.encoding }))
    const fence = input.fence
    return Effect.succeed([
      input.tenant,
      input.session,
      input.turnId,
      input.requestHash,
      input.expectedLastSeq,
      JSON.stringify(messages),
      ReplyCodec.encode(reply),
      fence?.shard ?? null,
      fence?.owner ?? null,
      fence === undefined ? null : String(fence.epoch),
      input.length?.agent ?? null,
      input.length === undefined ? null : Math.max(0, Math.floor(input.length.turns)),
      input.user ?? null,
    ])
  })

/** The session store: `findTurn`, `loadMessages`, `commitTurn`. Needs a migrated {@link Database}. */
export class SessionStore extends Effect.Service<SessionStore>()("@ctxd/db/SessionStore", {
  effect: Effect.gen(function* () {
    const db = yield* Database

    /** The turn `turnId` of the session, if it was committed. */
    const findTurn = (tenant: string, session: string, turnId: string): Effect.Effect<Option.Option<StoredTurn>, Failure> =>
      db.query<TurnRow>(FIND_TURN, [tenant, session, turnId]).pipe(
        Effect.flatMap(({ rows }) => (rows[0] === undefined ? Effect.succeedNone : Effect.asSome(toTurn(rows[0])))),
        logFailure("session store: findTurn"),
        Spans.span("SessionStore.findTurn"),
      )

    /**
     * The session's messages with `seq > afterSeq`, ascending (none for an
     * unknown session). The stored JSON is trusted as written by
     * {@link commitTurn}; it is not decoded again.
     */
    const loadMessages = (tenant: string, session: string, afterSeq: number): Effect.Effect<ReadonlyArray<StoredMessage>, Failure> =>
      db.query<MessageRow<Conversation.Message>>(LOAD_MESSAGES, [tenant, session, afterSeq]).pipe(
        Effect.map(({ rows }) => rows.map((row) => ({ seq: row.seq, message: row.content, tokens: row.tokens, encoding: row.encoding }))),
        logFailure("session store: loadMessages"),
        Spans.span("SessionStore.loadMessages"),
      )

    // concurrent commits (of other sessions) grouped into one statement: see `internal/groupCommit`
    const grouping = Option.getOrElse(yield* Effect.serviceOption(Commits), () => defaults)
    const runtime = yield* Effect.runtime<never>()
    const group = GroupCommit.make<ReadonlyArray<unknown>, CommitRow | undefined, Failure>(
      grouping,
      {
        one: (params) => Effect.map(db.query<CommitRow>(COMMIT_TURN, params), ({ rows }) => rows[0]),
        many: (items) =>
          Effect.map(db.query<CommitRow & { readonly idx: number }>(COMMIT_TURNS, batchParams(items)), ({ rows }) =>
            byIndex(rows, items.length),
          ),
      },
      runtime,
      {
        committed: (items) => commitTurns.unsafeUpdate(items, []),
        split: () => commitSplits.unsafeUpdate(1, []),
        waiting: (items) => commitsWaiting.unsafeUpdate(items, []),
      },
    )

    /**
     * Appends `messages` as `expectedLastSeq + 1...` and records the turn with
     * its reply, atomically, in one statement (one round trip, shared with the commits grouped with it). Fails with
     * {@link NotOwner} if `input.fence` is given and is not the shard's
     * current lease (checked first), with {@link TurnExists} if the turn id
     * was committed before and with {@link SeqConflict} if the session's last
     * sequence number is not `expectedLastSeq`; nothing is written then.
     */
    const commitTurn = (input: CommitTurn): Effect.Effect<Committed, NotOwner | SeqConflict | TurnExists | Failure> =>
      commitParams(input).pipe(
        Effect.flatMap(group.submit),
        Effect.flatMap((row) => outcome(input, row)),
        logFailure("session store: commitTurn"),
        Spans.span("SessionStore.commitTurn", { attributes: { messages: input.messages.length, fenced: input.fence !== undefined } }),
      )

    /** The session's newest committed turns, newest first, at most `limit` (none for an unknown session). */
    const listTurns = (tenant: string, session: string, limit: number): Effect.Effect<ReadonlyArray<TurnEntry>, Failure> =>
      db.query<{ turn_id: string; first_seq: number; last_seq: number; created_at: Date }>(LIST_TURNS, [tenant, session, limit]).pipe(
        Effect.map(({ rows }) =>
          rows.map((r) => ({ turnId: r.turn_id, firstSeq: r.first_seq, lastSeq: r.last_seq, createdAt: r.created_at })),
        ),
        logFailure("session store: listTurns"),
        Spans.span("SessionStore.listTurns"),
      )

    return { findTurn, loadMessages, commitTurn, listTurns } as const
  }),
}) {}

/**
 * How commits are grouped: concurrent commits of other sessions wait while
 * `statements` commit statements are in flight, then go out together, up to
 * `maxBatch` in one (`ctxd_commit_turns_v12`: one round trip and one
 * transaction for them all). `maxBatch: 1` commits every turn alone.
 */
export class Commits extends Context.Tag("@ctxd/db/SessionStore/Commits")<Commits, GroupCommit.Options>() {}

/**
 * 16 turns a statement, 2 statements in flight: under load the batches
 * grow to what waits, and a slow statement does not hold every other
 * session's commit behind it. The worker's own come from
 * `FlowControl.derive` (same defaults), which also derives how many commits
 * may wait at once.
 */
export const defaults: GroupCommit.Options = { maxBatch: 16, statements: 2 }

/** The store; needs a migrated {@link Database}. Commits grouped as {@link defaults}. */
export const layer: Layer.Layer<SessionStore, never, Database> = SessionStore.Default

/** The store with commits grouped as `options` says (the rest as {@link defaults}). */
export const layerWith = (options: Partial<GroupCommit.Options>): Layer.Layer<SessionStore, never, Database> =>
  SessionStore.Default.pipe(Layer.provide(Layer.succeed(Commits, { ...defaults, ...options })))

/** Options of {@link layerMemory}. */
export interface MemoryOptions {
  /**
   * Whether a commit's shard lease is current (Postgres checks the lease
   * row); default: every lease is (one process owns every shard).
   */
  readonly owns?: ((fence: Fence) => boolean) | undefined
}

interface MemorySession {
  readonly messages: Array<StoredMessage>
  readonly turns: Map<string, StoredTurn & { readonly createdAt: Date }>
}

/**
 * The store in memory: the same outcomes as the Postgres store (checks in
 * its order: lease, turn id, last seq; a reply or message Postgres' jsonb
 * would refuse — a NUL character — fails the same way and writes nothing),
 * replies and messages kept as their JSON round trip. Session lengths are
 * not recorded (use `SessionLengthStore.layerMemory`). Unbounded: for one
 * replay or one test.
 */
export const makeMemory = (options: MemoryOptions = {}): SessionStore => {
  const sessions = new Map<string, MemorySession>()
  const key = (tenant: string, session: string) => `${tenant}\u0000${session}`
  const clone = <A>(value: A): A => JSON.parse(JSON.stringify(value) ?? "null") as A
  return SessionStore.make({
    findTurn: (tenant, session, turnId) =>
      Effect.sync(() => {
        const turn = sessions.get(key(tenant, session))?.turns.get(turnId)
        return turn === undefined
          ? Option.none()
          : Option.some({
              turnId: turn.turnId,
              requestHash: turn.requestHash,
              reply: clone(turn.reply),
              firstSeq: turn.firstSeq,
              lastSeq: turn.lastSeq,
            })
      }),
    loadMessages: (tenant, session, afterSeq) =>
      Effect.sync(() => (sessions.get(key(tenant, session))?.messages ?? []).filter((m) => m.seq > afterSeq)),
    listTurns: (tenant, session, limit) =>
      Effect.sync(() =>
        [...(sessions.get(key(tenant, session))?.turns.values() ?? [])]
          .reverse()
          .slice(0, Math.max(0, limit))
          .map((t) => ({ turnId: t.turnId, firstSeq: t.firstSeq, lastSeq: t.lastSeq, createdAt: t.createdAt })),
      ),
    commitTurn: (input) =>
      Effect.suspend((): Effect.Effect<Committed, NotOwner | SeqConflict | TurnExists | Failure> => {
        const fence = input.fence
        if (fence !== undefined && options.owns !== undefined && !options.owns(fence)) {
          return outcome(input, { status: "not_owner" } as CommitRow)
        }
        const current = sessions.get(key(input.tenant, input.session))
        const stored = current?.turns.get(input.turnId)
        if (stored !== undefined) {
          return Effect.fail(
            new TurnExists({
              message: `turn ${input.turnId} was already committed`,
              stored: {
                turnId: stored.turnId,
                requestHash: stored.requestHash,
                reply: clone(stored.reply),
                firstSeq: stored.firstSeq,
                lastSeq: stored.lastSeq,
              },
            }),
          )
        }
        const lastSeq = current?.messages.at(-1)?.seq ?? 0
        if (lastSeq !== input.expectedLastSeq) return outcome(input, { status: "conflict", actual_last_seq: lastSeq } as CommitRow)
        const messages = JSON.stringify(input.messages.map((m) => m.message))
        if (ReplyCodec.hasNul(input.replyUtf8 ?? JSON.stringify(input.reply) ?? "null") || ReplyCodec.hasNul(messages)) {
          return Effect.fail(new DatabaseError({ message: "unsupported Unicode escape sequence: \\u0000", code: "22P05" }))
        }
        const session: MemorySession = current ?? { messages: [], turns: new Map() }
        const firstSeq = lastSeq + 1
        input.messages.forEach((m, i) =>
          session.messages.push({ seq: firstSeq + i, message: clone(m.message), tokens: m.tokens, encoding: m.encoding }),
        )
        const last = lastSeq + input.messages.length
        const reply: unknown =
          input.replyUtf8 === undefined ? clone(input.reply) : JSON.parse(Buffer.from(input.replyUtf8).toString("utf8"))
        session.turns.set(input.turnId, {
          turnId: input.turnId,
          requestHash: input.requestHash,
          reply,
          firstSeq,
          lastSeq: last,
          createdAt: new Date(),
        })
        sessions.set(key(input.tenant, input.session), session)
        return Effect.succeed({ firstSeq, lastSeq: last })
      }),
  })
}

/** The store in memory ({@link makeMemory}); a fresh, empty store per build. */
export const layerMemory = (options: MemoryOptions = {}): Layer.Layer<SessionStore> => Layer.sync(SessionStore, () => makeMemory(options))
