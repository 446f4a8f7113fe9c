/**
 * Compaction on the wire: `<root>.v1.compact.<tenant>.<session>` runs a
 * compaction of the session now and answers with its outcome.
 */
import { Schema } from "effect"
import * as Summarize from "./Summarize.ts"
import * as Turn from "./Turn.ts"

/**
 * What a compaction attempt came to. Audited (one `ctxd_compactions` row):
 * `ok`, `tool_result_truncated` (ok, but some tool results were cut for the
 * summarizer), `failed` (the provider failed after the retries; history
 * unchanged), `lock_held` (another compactor holds the session's lease),
 * `no_boundary` (no cut keeps the tail and folds something without
 * splitting a tool call from its result). Not audited, decided before any
 * work: `cooldown` (the session failed 3 times in a row recently) and
 * `not_needed` (below the soft threshold; queued jobs only).
 */
export const Outcome = Schema.Literal(
  "ok",
  "failed",
  "lock_held",
  "no_boundary",
  "tool_result_truncated",
  "cooldown",
  "not_needed",
).annotations({ identifier: "CompactionOutcome" })
export type Outcome = typeof Outcome.Type

/** `<root>.v1.compact.<tenant>.<session>` request. A manual compaction ignores the thresholds and the cooldown. */
export const CompactRequest = Schema.Struct({
  /** The session's model: its window sizes the kept tail; it summarizes when no summarizer model is configured. */
  model: Turn.Model,
  /** Default: the compactor's configured mode (`CTXD_SUMMARIZER_MODE`, default `rolling`). */
  mode: Schema.optional(Summarize.Mode),
  /**
   * The session's request format: the latest provider compaction of that
   * format (Anthropic `compaction` block, Responses `compaction` item) is a
   * boundary the summary never folds across. Default: any format's.
   */
  format: Schema.optional(Turn.Format),
}).annotations({ identifier: "CompactRequest", description: "ctx.v1.compact.<tenant>.<session> request" })
export type CompactRequest = typeof CompactRequest.Type

/** `<root>.v1.compact.<tenant>.<session>` success reply (the compaction ran, whatever its outcome). */
export const CompactReply = Schema.Struct({
  ok: Schema.Literal(true),
  outcome: Outcome,
  /** The sequence range the new summary covers (`ok`, `tool_result_truncated`). */
  coversFromSeq: Schema.NullOr(Schema.Number),
  coversToSeq: Schema.NullOr(Schema.Number),
  mode: Schema.NullOr(Summarize.Mode),
  depth: Schema.NullOr(Schema.Number),
  tokensIn: Schema.Number,
  tokensOut: Schema.Number,
  durationMs: Schema.Number,
  /** Why it failed or what was lossy (`lock_held` until, the provider error, JSON fallback...). */
  detail: Schema.NullOr(Schema.String),
}).annotations({ identifier: "CompactReply", description: "ctx.v1.compact.<tenant>.<session> success reply" })
export type CompactReply = typeof CompactReply.Type
