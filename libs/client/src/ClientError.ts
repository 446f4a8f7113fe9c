/**
 * The one error a {@link ContextClient} call fails with: the wire code of an
 * error reply (`BadRequest`, `TooLarge`, `Unavailable`...) or the code that
 * best describes a local or transport failure, plus whether retrying later
 * may help.
 */
import type { Errors } from "@ctxd/contracts"
import type { Request } from "@ctxd/nats"
import { Data } from "effect"

/** Reply codes that mean "not now": another attempt with the same turnId may succeed. */
export const RETRYABLE_CODES: ReadonlySet<Errors.ErrorCode> = new Set<Errors.ErrorCode>(["Unavailable", "NotOwner", "Busy"])

/** A failed call. */
export class ClientError extends Data.TaggedError("ClientError")<{
  /** The wire code (from the server's error reply, or chosen locally for transport failures). */
  readonly code: Errors.ErrorCode
  readonly message: string
  /** Where the input is wrong, when the server said so. */
  readonly path?: string | undefined
  /** How to fix it, when known. */
  readonly hint?: string | undefined
  /** True when the failure is transient (no responders, timeout, `Unavailable`/`NotOwner`/`Busy`). */
  readonly retryable: boolean
  /** The underlying error, for transport failures. */
  readonly cause?: unknown
}> {}

/** A `BadRequest` detected before anything was sent. */
export const badRequest = (message: string, extra?: { readonly path?: string; readonly hint?: string }): ClientError =>
  new ClientError({ code: "BadRequest", message, path: extra?.path, hint: extra?.hint, retryable: false })

/** The error carried by an error reply. */
export const fromReply = (reply: Errors.ErrorReply): ClientError =>
  new ClientError({
    code: reply.error.code,
    message: reply.error.message,
    path: reply.error.path,
    hint: reply.error.hint,
    retryable: RETRYABLE_CODES.has(reply.error.code),
  })

/** A transport failure: no responders and timeouts are retryable; a closed connection is not. */
export const fromRequestError = (error: Request.RequestErrors): ClientError => {
  switch (error._tag) {
    case "NoResponders":
      return new ClientError({
        code: "Unavailable",
        message: `no ctxd worker answers on ${error.subject}`,
        hint: "start a worker, or check that client and workers use the same subject root (CTXD_SUBJECT_ROOT)",
        retryable: true,
        cause: error,
      })
    case "RequestTimedOut":
      return new ClientError({ code: "Timeout", message: error.message, retryable: true, cause: error })
    case "ConnectionClosed":
      return new ClientError({ code: "Unavailable", message: error.message, retryable: false, cause: error })
    case "RequestFailed":
      return new ClientError({ code: "Internal", message: error.message, retryable: false, cause: error })
  }
}

/** A reply that does not follow the contract. */
export const malformedReply = (message: string): ClientError =>
  new ClientError({ code: "Internal", message: `malformed reply: ${message}`, retryable: false })

/** Re-exported so callers can match codes without importing the contracts package. */
export type ErrorCode = Errors.ErrorCode
