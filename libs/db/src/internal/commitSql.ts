/**
 * The store's hot statements, prepared once per connection, and the rows
 * they return. Every one names the tenant and the session (or runs inside
 * `ctxd_commit_turn`, which does), never an internal id alone.
 */
import { prepared } from "../Database.ts"

/** A `ctxd_turns` row as {@link FIND_TURN} returns it: `reply` for rows written before v3, `reply_z` after. */
export interface TurnRow {
  readonly turn_id: string
  readonly request_hash: string
  readonly first_seq: number
  readonly last_seq: number
  readonly reply: unknown
  readonly reply_z: Uint8Array | null
}

/** A `ctxd_messages` row as {@link LOAD_MESSAGES} returns it. */
export interface MessageRow<M> {
  readonly seq: number
  readonly content: M
  readonly tokens: number
  readonly encoding: string
}

/** The outcome of `ctxd_commit_turn` (migration 3; `_v11`, migration 11, returns the same columns); the `stored_*` columns are set for `exists` only. */
export interface CommitRow {
  readonly status: "ok" | "exists" | "conflict" | "not_owner"
  /** For `ok` the new last seq; for `conflict` the session's; null for `not_owner`. */
  readonly actual_last_seq: number | null
  readonly stored_request_hash: string | null
  readonly stored_first_seq: number | null
  readonly stored_last_seq: number | null
  readonly stored_reply: unknown
  readonly stored_reply_z: Uint8Array | null
}

/** $1 tenant, $2 session, $3 turn id. */
export const FIND_TURN = prepared(
  "ctxd_find_turn_v3",
  `SELECT t.turn_id, t.request_hash, t.first_seq, t.last_seq, t.reply, t.reply_z
   FROM ctxd_turns t JOIN ctxd_sessions s ON s.id = t.session_id
   WHERE s.tenant = $1 AND s.session = $2 AND t.turn_id = $3`,
)

/** $1 tenant, $2 session, $3 limit: the newest turns first. */
export const LIST_TURNS = prepared(
  "ctxd_list_turns_v1",
  `SELECT t.turn_id, t.first_seq, t.last_seq, t.created_at
   FROM ctxd_turns t JOIN ctxd_sessions s ON s.id = t.session_id
   WHERE s.tenant = $1 AND s.session = $2
   ORDER BY t.created_at DESC, t.last_seq DESC, t.turn_id DESC
   LIMIT $3`,
)

/** $1 tenant, $2 session, $3 after seq. */
export const LOAD_MESSAGES = prepared(
  "ctxd_load_messages_v1",
  `SELECT m.seq, m.content, m.tokens, m.encoding
   FROM ctxd_messages m JOIN ctxd_sessions s ON s.id = m.session_id
   WHERE s.tenant = $1 AND s.session = $2 AND m.seq > $3
   ORDER BY m.seq`,
)

/**
 * $1 tenant, $2 session, $3 turn id, $4 request hash, $5 expected last seq,
 * $6 messages (JSON array of `{message, tokens, encoding}`), $7 reply
 * (`reply_z` form), $8..$10 fence shard, owner, epoch (all null for none),
 * $11 agent and $12 turns after this commit (both null: no length recorded),
 * $13 user (null for none); see migration 11. One statement, so one implicit
 * transaction: it commits what the function wrote (nothing unless the status
 * is `ok`), or rolls back on an error.
 */
export const COMMIT_TURN = prepared(
  "ctxd_commit_turn_v11",
  `SELECT status, actual_last_seq, stored_request_hash, stored_first_seq, stored_last_seq, stored_reply, stored_reply_z
   FROM ctxd_commit_turn_v11($1::text, $2::text, $3::text, $4::text, $5::integer, $6::jsonb, $7::bytea,
                             $8::integer, $9::text, $10::bigint, $11::text, $12::integer, $13::text)`,
)

/**
 * Commits many turns (of other sessions) in one statement, each as
 * {@link COMMIT_TURN} commits it, in one transaction (migration 12): $1..$5
 * tenants, sessions, turn ids, request hashes, expected last seqs (arrays),
 * $6 each turn's messages (a JSON array of {@link COMMIT_TURN}'s $6), $7 the
 * stored replies joined and $8 their lengths, $9..$14 fence shards, owners,
 * epochs, agents, turns, users (arrays, null where none). One row per turn,
 * `idx` its place (from 0), with {@link CommitRow}'s columns.
 */
export const COMMIT_TURNS = prepared(
  "ctxd_commit_turns_v12",
  `SELECT idx, status, actual_last_seq, stored_request_hash, stored_first_seq, stored_last_seq, stored_reply, stored_reply_z
   FROM ctxd_commit_turns_v12($1::text[], $2::text[], $3::text[], $4::text[], $5::integer[], $6::jsonb, $7::bytea, $8::integer[],
                              $9::integer[], $10::text[], $11::bigint[], $12::text[], $13::integer[], $14::text[])`,
)

/**
 * The parameters of {@link COMMIT_TURNS} for commits whose {@link commitParams} are `items`: each
 * column as an array, the messages as one JSON array, the stored replies joined with their lengths.
 */
export const batchParams = (items: ReadonlyArray<ReadonlyArray<unknown>>): ReadonlyArray<unknown> => {
  const column = (i: number) => items.map((params) => params[i])
  const replies = items.map((params) => params[6] as Uint8Array)
  return [
    column(0),
    column(1),
    column(2),
    column(3),
    column(4),
    `[${column(5).join(",")}]`,
    Buffer.concat(replies),
    replies.map((r) => r.length),
    column(7),
    column(8),
    column(9),
    column(10),
    column(11),
    column(12),
  ]
}

/** The rows of {@link COMMIT_TURNS} in item order; none unless there is one per item (the batch then runs again item by item). */
export const byIndex = (rows: ReadonlyArray<CommitRow & { readonly idx: number }>, n: number): ReadonlyArray<CommitRow> => {
  if (rows.length !== n) return []
  const out: Array<CommitRow | undefined> = new Array<CommitRow | undefined>(n).fill(undefined)
  for (const row of rows) out[row.idx] = row
  return out.every((row) => row !== undefined) ? (out as Array<CommitRow>) : []
}
