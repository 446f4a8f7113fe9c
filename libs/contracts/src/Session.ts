/**
 * A session's stored data on request: `<root>.v1.session.<tenant>.<session>`
 * (`delete`: the right to be forgotten; `export`: the stored history,
 * summaries and compaction audit as JSON Lines, paged) and
 * `<root>.v1.user.<tenant>` (`deleteUser`: every session of the tenant whose
 * turns carried `options.user`). Both are scoped by tenant in the subject, so
 * NATS permissions guard them. Requests are unions by `op`: later releases
 * add ops (e.g. a read-only `inspect`) without changing these.
 */
import { Schema } from "effect"

/** Lines one export page holds when a request names no `limit`. */
export const DEFAULT_EXPORT_LINES = 500
/** Most lines one export page holds. */
export const MAX_EXPORT_LINES = 5_000
/** An export page stops before its lines take more than this many bytes of UTF-8 (256 KB; at least one line). */
export const EXPORT_PAGE_BYTES = 256 * 1024
/** Most sessions one `deleteUser` request deletes; `more: true` says to send it again. */
export const MAX_USER_SESSIONS = 1_000

const Cursor = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_-]{1,4096}$/, { message: () => "cursor must be the nextCursor of a previous page" }),
)

export const DeleteRequest = Schema.Struct({ op: Schema.Literal("delete") })
export const ExportRequest = Schema.Struct({
  op: Schema.Literal("export"),
  /** Where to continue: the `nextCursor` of the previous page (opaque). Absent = from the start. */
  cursor: Schema.optional(Cursor),
  /** Lines per page, 1 to 5,000; default 500. A page also stops at about 256 KB. */
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, MAX_EXPORT_LINES))),
})

/** Turns an `inspect` reply lists when a request names no `limit`. */
export const DEFAULT_INSPECT_TURNS = 10
/** Most turns an `inspect` reply lists. */
export const MAX_INSPECT_TURNS = 100
/** An `inspect` reply leaves the turn's request body out (`truncated: true`) when it would take more than this (256 KB). */
export const INSPECT_REPLY_BYTES = 256 * 1024

/** Read-only: the session's latest turns, and what one turn stored and sent (its report and provider request body). */
export const InspectRequest = Schema.Struct({
  op: Schema.Literal("inspect"),
  /** The turn to show; default the newest. */
  turnId: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
  /** Latest turns listed, 1 to 100; default 10 (the whole history: `export`). */
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, MAX_INSPECT_TURNS))),
})

/** `<root>.v1.session.<tenant>.<session>` request. */
export const Request = Schema.Union(DeleteRequest, ExportRequest, InspectRequest).annotations({
  identifier: "SessionRequest",
  description: "ctx.v1.session.<tenant>.<session> request: {op: delete}, {op: export, cursor?, limit?} or {op: inspect, turnId?, limit?}",
})
export type Request = typeof Request.Type

export const InspectReply = Schema.Struct({
  ok: Schema.Literal(true),
  /** The latest turns, newest first. Empty: no such session is stored. */
  turns: Schema.Array(Schema.Struct({ turnId: Schema.String, firstSeq: Schema.Number, lastSeq: Schema.Number, createdAt: Schema.String })),
  /** The turn shown (absent when the session has none, or the named turn is not stored). */
  turnId: Schema.optional(Schema.String),
  /** Messages the turn appended to the stored history. */
  stored: Schema.optional(Schema.Number),
  /** The turn's report as it was answered. */
  report: Schema.optional(Schema.Unknown),
  /** The provider request body it was answered with (left out above 256 KB: `truncated`). */
  request: Schema.optional(Schema.Unknown),
  /** True when `request` was left out to keep the reply small; `export` has the stored history. */
  truncated: Schema.optional(Schema.Boolean),
  /** True when the turn's reply is no longer stored (past `CTXD_REPLY_RETENTION`): no report or body. */
  pruned: Schema.optional(Schema.Boolean),
}).annotations({ identifier: "SessionInspectReply", description: "ctx.v1.session.<tenant>.<session> inspect reply" })
export type InspectReply = typeof InspectReply.Type

/** Rows deleted, per kind of stored data. */
export const Removed = Schema.Struct({
  sessions: Schema.Number,
  messages: Schema.Number,
  turns: Schema.Number,
  summaries: Schema.Number,
  compactions: Schema.Number,
  usageReports: Schema.Number,
}).annotations({ identifier: "SessionRemoved" })
export type Removed = typeof Removed.Type

export const DeleteReply = Schema.Struct({
  ok: Schema.Literal(true),
  /** False when there was nothing to delete (an unknown or already deleted session): deleting is idempotent. */
  deleted: Schema.Boolean,
  removed: Removed,
}).annotations({ identifier: "SessionDeleteReply", description: "ctx.v1.session.<tenant>.<session> delete reply" })
export type DeleteReply = typeof DeleteReply.Type

export const ExportReply = Schema.Struct({
  ok: Schema.Literal(true),
  /**
   * JSON Lines (one JSON object and `\n` per line), each with a `kind`:
   * `session` (first page only), then `message`, `turn`, `summary`,
   * `compaction` rows in their stored order. Empty for an unknown session.
   */
  lines: Schema.String,
  /** Present when there is more: send `{op: "export", cursor: nextCursor}` for the next page. */
  nextCursor: Schema.optional(Schema.String),
}).annotations({ identifier: "SessionExportReply", description: "ctx.v1.session.<tenant>.<session> export reply" })
export type ExportReply = typeof ExportReply.Type

/** `<root>.v1.user.<tenant>` request. */
export const UserRequest = Schema.Union(
  Schema.Struct({
    op: Schema.Literal("deleteUser"),
    /** The `options.user` the sessions' turns carried. */
    user: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,128}$/, { message: () => "user must match [A-Za-z0-9_-]{1,128}" })),
  }),
).annotations({ identifier: "UserRequest", description: "ctx.v1.user.<tenant> request: {op: deleteUser, user}" })
export type UserRequest = typeof UserRequest.Type

export const UserDeleteReply = Schema.Struct({
  ok: Schema.Literal(true),
  /** Rows deleted over all the user's sessions deleted by this request. */
  removed: Removed,
  /** True when more of the user's sessions remain (more than {@link MAX_USER_SESSIONS}): send the request again. */
  more: Schema.Boolean,
  /** Memory documents stored under the user (of every agent; the agents' shared ones stay) deleted by this request. */
  memories: Schema.optional(Schema.Number),
}).annotations({ identifier: "UserDeleteReply", description: "ctx.v1.user.<tenant> deleteUser reply" })
export type UserDeleteReply = typeof UserDeleteReply.Type
