/**
 * Reading what comes back: a reply's `{ok}` envelope decoded into its value
 * or the client error it carries, a body the object store could not carry
 * as a client error, and a refused direct subject recognised. Apart from
 * `ContextClient.ts` because none of it depends on the client's state.
 */
import { Errors, Health, Session, Tokens, Turn } from "@ctxd/contracts"
import { Json, type PayloadStore, Request } from "@ctxd/nats"
import { Either, ParseResult, Schema } from "effect"
import * as ClientError from "../ClientError.ts"

/** A body that could not go through the object store, as a client error. */
export const storeError = (error: PayloadStore.PayloadStoreError, what: "request" | "reply"): ClientError.ClientError =>
  error.reason === "Unavailable" || error.reason === "TooLarge"
    ? new ClientError.ClientError({
        code: "TooLarge",
        message: `the ${what} exceeds the NATS max_payload and cannot go through the object store: ${error.message}`,
        hint: "enable JetStream (a worker creates the bucket at start), or raise max_payload",
        retryable: false,
        cause: error,
      })
    : // an expired, vanished or damaged body, or a store timeout: the same turnId again gets a fresh one
      new ClientError.ClientError({ code: "Unavailable", message: error.message, retryable: true, cause: error })

/** The `onOk` decoders of {@link readReply}, one per reply the client reads. */
export const decodeTurnReply = Schema.decodeUnknownEither(Turn.TurnReply)
/** {@link decodeTurnReply}'s kind, for a health reply. */
export const decodeHealthReply = Schema.decodeUnknownEither(Health.HealthReply)
/** {@link decodeTurnReply}'s kind, for a session deletion. */
export const decodeDeleteReply = Schema.decodeUnknownEither(Session.DeleteReply)
/** {@link decodeTurnReply}'s kind, for an export page. */
export const decodeExportReply = Schema.decodeUnknownEither(Session.ExportReply)
/** {@link decodeTurnReply}'s kind, for a user's deletion. */
export const decodeUserDeleteReply = Schema.decodeUnknownEither(Session.UserDeleteReply)
/** {@link decodeTurnReply}'s kind, for a usage report. */
export const decodeUsageReply = Schema.decodeUnknownEither(Tokens.UsageReply)
const decodeErrorReply = Schema.decodeUnknownEither(Schema.Struct({ ok: Schema.Literal(false), error: Schema.Unknown }))
const decodeErrorBody = Schema.decodeUnknownEither(
  Schema.Struct({
    code: Schema.String,
    message: Schema.String,
    path: Schema.optional(Schema.String),
    hint: Schema.optional(Schema.String),
  }),
)
const isErrorCode = Schema.is(Errors.ErrorCode)

/**
 * Reads a reply: `{ok: true}` → `onOk` decodes it; `{ok: false}` → the
 * error it carries (an unknown code is kept as `Internal`); anything else is
 * a malformed reply.
 */
export const readReply = <A>(
  data: Uint8Array,
  onOk: (value: unknown) => Either.Either<A, ParseResult.ParseError>,
): Either.Either<A, ClientError.ClientError> => {
  const json = Json.decode(data)
  if (Either.isLeft(json)) return Either.left(ClientError.malformedReply(json.left.message))
  const value = json.right
  if (typeof value === "object" && value !== null && (value as { ok?: unknown }).ok === true) {
    return Either.mapLeft(onOk(value), (e) => ClientError.malformedReply(ParseResult.TreeFormatter.formatErrorSync(e)))
  }
  const failed = decodeErrorReply(value)
  if (Either.isLeft(failed)) return Either.left(ClientError.malformedReply('expected {"ok": true|false, ...}'))
  const body = decodeErrorBody(failed.right.error)
  if (Either.isLeft(body)) return Either.left(ClientError.malformedReply("error reply without code and message"))
  const { code, message, path, hint } = body.right
  // a code from a newer server than this client: keep it visible in the message
  const error = isErrorCode(code) ? { code, message } : { code: "Internal" as const, message: `${code}: ${message}` }
  return Either.left(
    ClientError.fromReply({
      ok: false,
      error: { ...error, ...(path === undefined ? {} : { path }), ...(hint === undefined ? {} : { hint }) },
    }),
  )
}

/** A request the server refused to publish on a worker's direct subject (`<root>.v1.worker.<id>.turn...`). */
export const isDirectRefused = (cause: unknown): boolean =>
  cause instanceof Request.RequestFailed && Request.isPermissionViolation(cause) && cause.subject.includes(".v1.worker.")
