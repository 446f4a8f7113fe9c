/**
 * One NATS request as an Effect, with the ways it can go wrong as distinct
 * tagged errors, so a caller can tell "nobody listens" (retry later) from
 * "it took too long" from "our connection is gone". Inside a trace, the
 * request is a client span (`nats.request`) and carries its W3C
 * `traceparent`, so the other side's spans continue the trace.
 */
import {
  ClosedConnectionError,
  DrainingConnectionError,
  headers as natsHeaders,
  type Msg,
  type MsgHdrs,
  NoRespondersError,
  PermissionViolationError,
  RequestError,
  TimeoutError,
} from "@nats-io/transport-node"
import { Spans, TraceContext } from "@ctxd/observe"
import { Data, Effect } from "effect"
import * as LargePayload from "./LargePayload.ts"
import { NatsClient } from "./NatsClient.ts"

/** Nobody subscribes to the subject (the server answered with a 503 status). */
export class NoResponders extends Data.TaggedError("NoResponders")<{
  readonly subject: string
  readonly message: string
}> {}

/** No reply arrived within the timeout. */
export class RequestTimedOut extends Data.TaggedError("RequestTimedOut")<{
  readonly subject: string
  readonly timeoutMs: number
  readonly message: string
}> {}

/** The connection is closed or draining: no request can be sent on it any more. */
export class ConnectionClosed extends Data.TaggedError("ConnectionClosed")<{
  readonly subject: string
  readonly message: string
}> {}

/** Anything else (a permissions violation, a payload over the server's `max_payload`...). */
export class RequestFailed extends Data.TaggedError("RequestFailed")<{
  readonly subject: string
  readonly message: string
  readonly cause: unknown
}> {}

/** Every way {@link request} can fail. */
export type RequestErrors = NoResponders | RequestTimedOut | ConnectionClosed | RequestFailed

/**
 * True when the server refused to let this connection publish the request
 * (its NATS user may not publish to the subject): a {@link RequestFailed}
 * caused by a permissions violation. Retrying the same subject cannot help.
 */
export const isPermissionViolation = (error: RequestErrors): boolean => {
  if (error._tag !== "RequestFailed") return false
  // nats.js rejects the request with a RequestError whose cause is the violation
  for (let cause: unknown = error.cause, depth = 0; cause instanceof Error && depth < 4; cause = cause.cause, depth++) {
    if (cause instanceof PermissionViolationError) return true
  }
  return false
}

/** Request options. */
export interface RequestOptions {
  /** How long to wait for the reply, in milliseconds. */
  readonly timeoutMs: number
  readonly headers?: MsgHdrs | undefined
}

/** NATS headers with the given names and values. */
export const headers = (values: Readonly<Record<string, string>>): MsgHdrs => {
  const result = natsHeaders()
  for (const [key, value] of Object.entries(values)) result.set(key, value)
  return result
}

/** Maps a nats.js request error to one of {@link RequestErrors}. */
export const mapError = (subject: string, timeoutMs: number, error: unknown): RequestErrors => {
  if (error instanceof NoRespondersError || (error instanceof RequestError && error.isNoResponders())) {
    return new NoResponders({ subject, message: `no responders on ${subject}` })
  }
  if (error instanceof TimeoutError) {
    return new RequestTimedOut({ subject, timeoutMs, message: `no reply on ${subject} within ${timeoutMs} ms` })
  }
  if (
    error instanceof ClosedConnectionError ||
    error instanceof DrainingConnectionError ||
    // pending requests are rejected with this when the connection closes under them
    (error instanceof RequestError && (error.cause instanceof ClosedConnectionError || error.message === "connection closed"))
  ) {
    return new ConnectionClosed({ subject, message: `NATS connection closed (request on ${subject})` })
  }
  const message = error instanceof Error ? error.message : String(error)
  return new RequestFailed({ subject, message: `request on ${subject} failed: ${message}`, cause: error })
}

/**
 * Sends `payload` to `subject` and waits up to `timeoutMs` for one reply.
 * Interrupting the effect stops the wait (the reply, if any, is dropped).
 * A payload above the server's `max_payload` goes through the
 * `PayloadStore` in context (a reference is sent; the object is deleted once
 * the request is over); without a store it fails with {@link RequestFailed}.
 * The reply is returned as it came (a reference reply is not resolved: see
 * `LargePayload.resolve`).
 */
export const request = (subject: string, payload: Uint8Array, options: RequestOptions): Effect.Effect<Msg, RequestErrors, NatsClient> =>
  Effect.flatMap(Effect.zip(NatsClient, TraceContext.headersOf), ([{ connection }, trace]) =>
    Effect.acquireUseRelease(
      LargePayload.outgoing(payload, withTrace(options.headers, trace)).pipe(
        Effect.mapError((error) => new RequestFailed({ subject, message: `request on ${subject} failed: ${error.message}`, cause: error })),
      ),
      (out) =>
        Effect.tryPromise({
          try: () =>
            connection.request(subject, out.payload, {
              timeout: options.timeoutMs,
              ...(out.headers === undefined ? {} : { headers: out.headers }),
            }),
          catch: (error) => mapError(subject, options.timeoutMs, error),
        }),
      LargePayload.cleanup,
    ),
  ).pipe(
    Spans.child("nats.request", {
      kind: "client",
      attributes: { "messaging.system": "nats", "messaging.destination.name": subject, "messaging.message.body.size": payload.byteLength },
    }),
  )

/** `headers` with the trace headers added (unless they carry their own); undefined when both are empty. */
const withTrace = (given: MsgHdrs | undefined, trace: Readonly<Record<string, string>>): MsgHdrs | undefined => {
  const names = Object.keys(trace)
  if (names.length === 0 || given?.has(TraceContext.TRACEPARENT) === true) return given
  const result = given ?? natsHeaders()
  for (const name of names) result.set(name, trace[name]!)
  return result
}
