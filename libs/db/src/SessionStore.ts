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
 * `last_seq`). It writes everything or nothing.
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
 * An `Effect.Service`: there is one implementation (the store is Postgres;
 * tests use a real Postgres in a throwaway schema).
 */
import type { Conversation } from "@ctxd/contracts"
import { Data, Effect, type Layer, Option } from "effect"
import { Database, type DatabaseError, type DatabaseUnavailable } from "./Database.ts"

/** A stored message and how many tokens it was counted as, with which encoding. */
export interface StoredMessage {
  readonly seq: number
  readonly message: Conversation.Message
  readonly tokens: number
  readonly encoding: string
}

/** A committed turn: the hash of its request and the reply that was sent. */
export interface StoredTurn {
  readonly turnId: string
  readonly requestHash: string
  readonly reply: unknown
  /** The sequence numbers of the messages it appended (`firstSeq > lastSeq` when it appended none). */
  readonly firstSeq: number
  readonly lastSeq: number
}

/** A message to append. */
export interface NewMessage {
  readonly message: Conversation.Message
  readonly tokens: number
  readonly encoding: string
}

/** Everything one turn writes. */
export interface CommitTurn {
  readonly tenant: string
  readonly session: string
  readonly turnId: string
  readonly requestHash: string
  /** The `last_seq` the caller's view of the session ends at (0 for a new session). */
  readonly expectedLastSeq: number
  readonly messages: ReadonlyArray<NewMessage>
  /** The reply, stored as JSON so a retry of the turn gets it back. */
  readonly reply: unknown
  /** The writer's shard lease; when present the commit is applied only while that lease is current. */
  readonly fence?: Fence | undefined
}

/** A shard lease as the writer holds it: `ctxd_shard_leases` row `shard` with this `owner` and `epoch`. */
export interface Fence {
  readonly shard: number
  readonly owner: string
  readonly epoch: bigint | number
}

/** The sequence numbers a commit appended (`firstSeq > lastSeq` when it appended none). */
export interface Committed {
  readonly firstSeq: number
  readonly lastSeq: number
}

/** Another writer appended to the session since the caller loaded it: reload the new messages and retry. */
export class SeqConflict extends Data.TaggedError("SeqConflict")<{
  readonly message: string
  readonly expectedLastSeq: number
  readonly actualLastSeq: number
}> {}

/** The turn id was committed before. Same request hash: answer `stored.reply`; different: a conflict. */
export class TurnExists extends Data.TaggedError("TurnExists")<{
  readonly message: string
  readonly stored: StoredTurn
}> {}

/** The writer's shard lease is no longer current (released, expired, or taken over with a newer epoch); nothing was written. */
export class NotOwner extends Data.TaggedError("NotOwner")<{
  readonly message: string
  readonly shard: number
  readonly owner: string
  readonly epoch: string
}> {}

interface TurnRow {
  readonly turn_id: string
  readonly request_hash: string
  readonly first_seq: number
  readonly last_seq: number
  readonly reply: unknown
}

const toTurn = (row: TurnRow): StoredTurn => ({
  turnId: row.turn_id,
  requestHash: row.request_hash,
  reply: row.reply,
  firstSeq: row.first_seq,
  lastSeq: row.last_seq,
})

const FIND_TURN = `
  SELECT t.turn_id, t.request_hash, t.first_seq, t.last_seq, t.reply
  FROM ctxd_turns t JOIN ctxd_sessions s ON s.id = t.session_id
  WHERE s.tenant = $1 AND s.session = $2 AND t.turn_id = $3`

const LOAD_MESSAGES = `
  SELECT m.seq, m.content, m.tokens, m.encoding
  FROM ctxd_messages m JOIN ctxd_sessions s ON s.id = m.session_id
  WHERE s.tenant = $1 AND s.session = $2 AND m.seq > $3
  ORDER BY m.seq`

// ON CONFLICT DO UPDATE takes the same row lock as SELECT ... FOR UPDATE and
// returns the latest committed last_seq, in one round trip for new and
// existing sessions alike.
const LOCK_SESSION = `
  INSERT INTO ctxd_sessions (tenant, session) VALUES ($1, $2)
  ON CONFLICT (tenant, session) DO UPDATE SET updated_at = now()
  RETURNING id, last_seq`

// After the session lock (which may have waited), against the database
// clock at this moment rather than the transaction's start.
const CHECK_FENCE = `
  SELECT EXISTS (
    SELECT 1 FROM ctxd_shard_leases
    WHERE shard = $1 AND owner = $2 AND epoch = $3::bigint AND expires_at > clock_timestamp()
  ) AS current`

// A separate statement after the lock, so its snapshot sees a turn committed
// by a writer we waited for.
const TURN_BY_SESSION = `
  SELECT turn_id, request_hash, first_seq, last_seq, reply
  FROM ctxd_turns WHERE session_id = $1 AND turn_id = $2`

// $1 session id, $2 expected last_seq, $3 messages (JSON array), $4 turn id,
// $5 request hash, $6 new last_seq, $7 reply (JSON). All messages in one
// INSERT; the data-modifying CTEs run to completion even though unread.
const APPEND = `
  WITH input AS (
    SELECT e.n::integer AS n, e.v FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS e (v, n)
  ), appended AS (
    INSERT INTO ctxd_messages (session_id, seq, role, content, tokens, encoding, turn_id)
    SELECT $1, $2 + n, v -> 'message' ->> 'role', v -> 'message', (v ->> 'tokens')::integer, v ->> 'encoding', $4
    FROM input
  ), turn AS (
    INSERT INTO ctxd_turns (session_id, turn_id, request_hash, first_seq, last_seq, reply)
    VALUES ($1, $4, $5, $2 + 1, $6, $7::jsonb)
  )
  UPDATE ctxd_sessions SET last_seq = $6, updated_at = now() WHERE id = $1`

type Failure = DatabaseUnavailable | DatabaseError

/** The session store: `findTurn`, `loadMessages`, `commitTurn`. Needs a migrated {@link Database}. */
export class SessionStore extends Effect.Service<SessionStore>()("@ctxd/db/SessionStore", {
  effect: Effect.gen(function* () {
    const db = yield* Database

    /** The turn `turnId` of the session, if it was committed. */
    const findTurn = (
      tenant: string,
      session: string,
      turnId: string,
    ): Effect.Effect<Option.Option<StoredTurn>, Failure> =>
      db.query<TurnRow>(FIND_TURN, [tenant, session, turnId]).pipe(
        Effect.map(({ rows }) => Option.map(Option.fromNullable(rows[0]), toTurn)),
        Effect.withSpan("SessionStore.findTurn"),
      )

    /**
     * The session's messages with `seq > afterSeq`, ascending (none for an
     * unknown session). The stored JSON is trusted as written by
     * {@link commitTurn}; it is not decoded again.
     */
    const loadMessages = (
      tenant: string,
      session: string,
      afterSeq: number,
    ): Effect.Effect<ReadonlyArray<StoredMessage>, Failure> =>
      db
        .query<{ seq: number; content: Conversation.Message; tokens: number; encoding: string }>(LOAD_MESSAGES, [
          tenant,
          session,
          afterSeq,
        ])
        .pipe(
          Effect.map(({ rows }) =>
            rows.map((row) => ({ seq: row.seq, message: row.content, tokens: row.tokens, encoding: row.encoding })),
          ),
          Effect.withSpan("SessionStore.loadMessages"),
        )

    /**
     * Appends `messages` as `expectedLastSeq + 1...` and records the turn with
     * its reply, atomically. Fails with {@link NotOwner} if `input.fence` is
     * given and is not the shard's current lease (checked first), with
     * {@link TurnExists} if the turn id was committed before and with
     * {@link SeqConflict} if the session's last sequence number is not
     * `expectedLastSeq`; nothing is written then.
     */
    const commitTurn = (
      input: CommitTurn,
    ): Effect.Effect<Committed, NotOwner | SeqConflict | TurnExists | Failure> => {
      const firstSeq = input.expectedLastSeq + 1
      const lastSeq = input.expectedLastSeq + input.messages.length
      return db
        .transaction((tx) =>
          Effect.gen(function* () {
            const locked = yield* tx.query<{ id: string; last_seq: number }>(LOCK_SESSION, [
              input.tenant,
              input.session,
            ])
            const { id, last_seq: actualLastSeq } = locked.rows[0]!
            const fence = input.fence
            if (fence !== undefined) {
              const epoch = String(fence.epoch)
              const check = yield* tx.query<{ current: boolean }>(CHECK_FENCE, [fence.shard, fence.owner, epoch])
              if (check.rows[0]?.current !== true) {
                return yield* new NotOwner({
                  message: `${fence.owner} does not hold shard ${fence.shard} at epoch ${epoch}`,
                  shard: fence.shard,
                  owner: fence.owner,
                  epoch,
                })
              }
            }
            const existing = yield* tx.query<TurnRow>(TURN_BY_SESSION, [id, input.turnId])
            if (existing.rows[0] !== undefined) {
              return yield* new TurnExists({
                message: `turn ${input.turnId} was already committed`,
                stored: toTurn(existing.rows[0]),
              })
            }
            if (actualLastSeq !== input.expectedLastSeq) {
              return yield* new SeqConflict({
                message: `session is at seq ${actualLastSeq}, expected ${input.expectedLastSeq}`,
                expectedLastSeq: input.expectedLastSeq,
                actualLastSeq,
              })
            }
            const messages = input.messages.map((m) => ({ message: m.message, tokens: m.tokens, encoding: m.encoding }))
            yield* tx.query(APPEND, [
              id,
              input.expectedLastSeq,
              JSON.stringify(messages),
              input.turnId,
              input.requestHash,
              lastSeq,
              JSON.stringify(input.reply) ?? "null",
            ])
            return { firstSeq, lastSeq }
          }),
        )
        .pipe(
          Effect.withSpan("SessionStore.commitTurn", {
            attributes: { messages: input.messages.length, fenced: input.fence !== undefined },
          }),
        )
    }

    return { findTurn, loadMessages, commitTurn } as const
  }),
}) {}

/** The store; needs a migrated {@link Database}. */
export const layer: Layer.Layer<SessionStore, never, Database> = SessionStore.Default
