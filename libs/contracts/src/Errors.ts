/**
 * The error envelope every failed reply uses: `{"ok": false, "error": {...}}`.
 * Errors that cross NATS are `Schema.TaggedError`s with noun names; each maps
 * to one wire code.
 */
import { Schema } from "effect"

export const ErrorCode = Schema.Literal(
  "BadRequest",
  "Conflict",
  "TooLarge",
  "Unavailable",
  "NotOwner",
  "Busy",
  "Timeout",
  "Internal",
)
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
export type WireError =
  | BadRequest
  | TurnConflict
  | PayloadTooLarge
  | ServiceUnavailable
  | RequestTimeout
  | InternalError
  | NotOwner
  | Busy

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

/** The wire envelope for an error. */
export const toReply = (error: WireError): ErrorReply => ({
  ok: false,
  error: {
    code: codes[error._tag],
    message: error.message,
    ...(error.path === undefined ? {} : { path: error.path }),
    ...(error.hint === undefined ? {} : { hint: error.hint }),
  },
})
