/**
 * The error envelope every failed reply uses: `{"ok": false, "error": {...}}`.
 * Errors that cross NATS are `Schema.TaggedError`s with noun names; each maps
 * to one wire code.
 */
import { Schema } from "effect"

export const ErrorCode = Schema.Literal("BadRequest", "Conflict", "TooLarge", "Unavailable", "NotOwner", "Busy", "Timeout", "Internal")
export type ErrorCode = typeof ErrorCode.Type

export const ErrorBody = Schema.Struct({
  code: ErrorCode,
  message: Schema.String,
  /** Where the input is wrong (a JSON path, a message index), when known. */
  path: Schema.optional(Schema.String),
  /** A hint on how to fix it, when there is one. */
  hint: Schema.optional(Schema.String),
})
export type ErrorBody = typeof ErrorBody.Type

export const ErrorReply = Schema.Struct({
  ok: Schema.Literal(false),
  error: ErrorBody,
}).annotations({ identifier: "ErrorReply", description: "Every failed reply" })
export type ErrorReply = typeof ErrorReply.Type

const fields = {
  message: Schema.String,
  path: Schema.optional(Schema.String),
  hint: Schema.optional(Schema.String),
}

/** The input is malformed or violates the contract. Nothing was stored. */
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields) {}
/** The same turnId arrived with different content. */
export class TurnConflict extends Schema.TaggedError<TurnConflict>()("TurnConflict", fields) {}
/** The payload is larger than the configured limit. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  ...fields,
  limit: Schema.Number,
  size: Schema.Number,
}) {}
/** A dependency (Postgres, NATS, a provider) is not available right now; retry. */
export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()("ServiceUnavailable", fields) {}
/** The request waited too long. */
export class RequestTimeout extends Schema.TaggedError<RequestTimeout>()("RequestTimeout", fields) {}
/** A bug or an unexpected failure. */
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", fields) {}
/**
 * This worker does not own the session's shard (or lost it while the turn
 * ran); nothing was stored. Retry with the same turnId: the owner answers it.
 */
export class NotOwner extends Schema.TaggedError<NotOwner>()("NotOwner", fields) {}
/** Too many requests are queued (for the worker or for the session); nothing was stored. Retry with backoff. */
export class Busy extends Schema.TaggedError<Busy>()("Busy", fields) {}

/** Every error that may be answered on the wire. */
export type WireError = BadRequest | TurnConflict | PayloadTooLarge | ServiceUnavailable | RequestTimeout | InternalError | NotOwner | Busy

const codes: Record<WireError["_tag"], ErrorCode> = {
  BadRequest: "BadRequest",
  TurnConflict: "Conflict",
  PayloadTooLarge: "TooLarge",
  ServiceUnavailable: "Unavailable",
  RequestTimeout: "Timeout",
  InternalError: "Internal",
  NotOwner: "NotOwner",
  Busy: "Busy",
}

/** Longest `message` in an error envelope, in characters (longer ones are cut: see {@link cap}). */
export const MAX_MESSAGE = 2_000
/** Longest `path` in an error envelope, in characters. */
export const MAX_PATH = 300
/** Longest `hint` in an error envelope, in characters. */
export const MAX_HINT = 500

/**
 * `text` cut to at most `max` characters, a short marker saying how much was
 * cut (`…(+12345 chars)`) included; unchanged when it fits. Never splits a
 * UTF-16 surrogate pair.
 */
export const cap = (text: string, max: number): string => {
  if (text.length <= max) return text
  const marker = (cut: number) => `…(+${cut} chars)`
  // the marker's length depends on how much it says was cut: settle it in a few rounds
  let end = Math.max(0, max - marker(text.length).length)
  while (end > 0 && end + marker(text.length - end).length < max) end++
  while (end > 0 && end + marker(text.length - end).length > max) end--
  const code = text.charCodeAt(end - 1)
  if (code >= 0xd800 && code <= 0xdbff) end--
  return `${text.slice(0, end)}${marker(text.length - end)}`
}

/**
 * A body with `message`, `path` and `hint` capped ({@link MAX_MESSAGE},
 * {@link MAX_PATH}, {@link MAX_HINT}): the last line of defence against an
 * error reply that echoes a large input and so exceeds the bus's limit.
 */
export const capBody = (body: ErrorBody): ErrorBody => ({
  code: body.code,
  message: cap(body.message, MAX_MESSAGE),
  ...(body.path === undefined ? {} : { path: cap(body.path, MAX_PATH) }),
  ...(body.hint === undefined ? {} : { hint: cap(body.hint, MAX_HINT) }),
})

/** An error envelope with its fields capped ({@link capBody}). */
export const capReply = (reply: ErrorReply): ErrorReply => ({ ok: false, error: capBody(reply.error) })

/** The wire envelope for an error; `message`, `path` and `hint` are capped ({@link capBody}). */
export const toReply = (error: WireError): ErrorReply => ({
  ok: false,
  error: capBody({
    code: codes[error._tag],
    message: error.message,
    ...(error.path === undefined ? {} : { path: error.path }),
    ...(error.hint === undefined ? {} : { hint: error.hint }),
  }),
})

/** The wire code of an error. */
export const codeOf = (error: WireError): ErrorCode => codes[error._tag]

/**
 * `message` fit for a log line: cut before its first quote (`"`, `'` or a
 * backtick), where error messages start echoing the caller's values, and
 * capped at 300 characters. Prompts and secrets stay out of logs; the code
 * and path are logged beside it.
 */
export const redact = (message: string): string => {
  const quote = message.search(/["'`]/)
  return cap(quote === -1 ? message : `${message.slice(0, quote)}…`, 300)
}
