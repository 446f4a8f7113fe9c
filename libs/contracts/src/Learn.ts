/**
 * Learnings on the wire: `<root>.v1.learn.<tenant>.<session>` folds the
 * session's stored history into at most 5 short lessons for the session's
 * agent (the summarizer extracts them), stored in the memory store with kind
 * `learning`; later sessions of that agent carry them in a stable system
 * section (docs/concepts.md, "Learnings").
 */
import { Schema } from "effect"
import * as Turn from "./Turn.ts"

/** Lessons one request may store: 1 to 5. */
export const MaxLessons = Schema.Int.pipe(Schema.between(1, 5))

/** `<root>.v1.learn.<tenant>.<session>` request. */
export const LearnRequest = Schema.Struct({
  /** The session's model: it extracts the lessons when no summarizer model is configured (`CTXD_SUMMARIZER_MODEL`). */
  model: Turn.Model,
  /** Whose learnings these become (default `default`); the session's `options.agent`. */
  agent: Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,128}$/))),
  /** Lessons wanted at most (default 5). */
  maxLessons: Schema.optional(MaxLessons),
}).annotations({ identifier: "LearnRequest", description: "ctx.v1.learn.<tenant>.<session> request" })
export type LearnRequest = typeof LearnRequest.Type

/** One lesson stored. */
export const Learning = Schema.Struct({
  id: Schema.String,
  text: Schema.String,
})
export type Learning = typeof Learning.Type

/** `<root>.v1.learn.<tenant>.<session>` success reply. */
export const LearnReply = Schema.Struct({
  ok: Schema.Literal(true),
  /** The lessons stored now (kind `learning`, source `session:<session>`). */
  learnings: Schema.Array(Learning),
  /** Lessons the model gave that the agent already had (a near-identical learning is stored): not stored again. */
  duplicates: Schema.Number,
  /** Stored messages of the session the lessons were drawn from. */
  messages: Schema.Number,
  model: Schema.String,
  tokensIn: Schema.Number,
  tokensOut: Schema.Number,
}).annotations({ identifier: "LearnReply", description: "ctx.v1.learn.<tenant>.<session> success reply" })
export type LearnReply = typeof LearnReply.Type
