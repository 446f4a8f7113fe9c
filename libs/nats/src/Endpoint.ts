/**
 * A small request/reply endpoint over core NATS: subscribe (optionally in a
 * queue group), run a handler per request in a fiber owned by the endpoint's
 * scope, answer with JSON. Whatever the handler does, the caller gets a JSON
 * reply: a defect or an interruption becomes the `Internal` error envelope.
 *
 * Flow control: at most `maxConcurrent` handlers run at once; further
 * requests wait, and once `maxPending` wait, new ones are answered `Busy`
 * at once. Requests larger than `maxPayload` are answered `TooLarge` without
 * calling the handler.
 *
 * Shutdown (the scope closes): the subscription is drained (the server stops
 * delivering; messages already on the wire are still served), then the
 * handlers in flight get `drainTimeoutMs` to finish and reply; any still
 * running after that are interrupted and answered `Unavailable` (retryable).
 *
 * A handler returns the JSON value of its reply, or a {@link Reply} made with
 * {@link reply} to send ready bytes (a relayed reply) or NATS headers along.
 */
import type { Errors } from "@ctxd/contracts"
import type { Msg, MsgHdrs } from "@nats-io/transport-node"
import { Duration, Effect, Either, Exit, FiberSet, ParseResult, Schema, type Scope } from "effect"
import * as Json from "./Json.ts"
import { NatsClient } from "./NatsClient.ts"
import { headers as headersOf } from "./Request.ts"

/** One request as the handler sees it. */
export interface Request {
  /** The subject the request was sent to (useful with wildcard subscriptions). */
  readonly subject: string
  /** The raw payload; decode it with `Json.decode`. */
  readonly data: Uint8Array
  readonly headers?: MsgHdrs | undefined
}

/** How to serve. */
export interface ServeOptions<R> {
  /** Subject to subscribe to; wildcards allowed. */
  readonly subject: string
  /** Queue group: requests are spread over the members; default none (every subscriber gets each request). */
  readonly queue?: string | undefined
  /** Handlers running at once; default 64. */
  readonly maxConcurrent?: number | undefined
  /** Requests waiting for a handler slot before new ones are answered `Busy`; default 1024. */
  readonly maxPending?: number | undefined
  /** Largest accepted payload in bytes; larger requests get `TooLarge`. Default: no limit of our own (the server's `max_payload` applies). */
  readonly maxPayload?: number | undefined
  /** How long handlers in flight may take to finish when the scope closes; default 10 s. */
  readonly drainTimeoutMs?: number | undefined
  /** Computes the JSON reply value. Cannot fail: map errors to an error envelope. */
  readonly handler: (request: Request) => Effect.Effect<unknown, never, R>
}

const ReplyTypeId: unique symbol = Symbol.for("@ctxd/nats/Endpoint/Reply")

/** A reply with more than a JSON value: ready bytes and/or NATS headers. Make one with {@link reply}. */
export interface Reply {
  readonly [ReplyTypeId]: typeof ReplyTypeId
  /** The JSON value to encode, when `bytes` is absent. */
  readonly value?: unknown
  /** The payload as is (e.g. another service's reply being relayed). */
  readonly bytes?: Uint8Array | undefined
  readonly headers?: MsgHdrs | undefined
}

/**
 * A reply carrying `bytes` as they are (not re-encoded) or the JSON `value`,
 * with `headers` (a `MsgHdrs`, or a record of header names to values).
 */
export const reply = (options: {
  readonly value?: unknown
  readonly bytes?: Uint8Array | undefined
  readonly headers?: MsgHdrs | Readonly<Record<string, string>> | undefined
}): Reply => {
  const given = options.headers
  const headers =
    given === undefined || typeof (given as MsgHdrs).append === "function"
      ? (given as MsgHdrs | undefined)
      : headersOf(given as Readonly<Record<string, string>>)
  return { [ReplyTypeId]: ReplyTypeId, value: options.value, bytes: options.bytes, headers }
}

/** True for a {@link Reply}. */
export const isReply = (value: unknown): value is Reply =>
  typeof value === "object" && value !== null && ReplyTypeId in value

/** A running endpoint. */
export interface Endpoint {
  readonly subject: string
  /** Requests accepted and not answered yet (running + waiting). */
  readonly inFlight: () => number
  /** Handlers running now. */
  readonly running: () => number
  /** Requests waiting for a handler slot. */
  readonly waiting: () => number
  /** True once the scope started closing. */
  readonly draining: () => boolean
}

/** An error envelope (`{"ok": false, "error": {...}}`). */
/**
 * Decodes a UTF-8 JSON request against `schema`: the value, or the
 * `BadRequest` envelope naming what is wrong (with `hint`, when given).
 */
export const decodeRequest = <A, I>(
  schema: Schema.Schema<A, I>,
  data: Uint8Array,
  hint?: string,
): Either.Either<A, Errors.ErrorReply> => {
  const json = Json.decode(data)
  if (Either.isLeft(json)) return Either.left(errorReply("BadRequest", json.left.message, { hint }))
  const decoded = Schema.decodeUnknownEither(schema, { errors: "all" })(json.right)
  return Either.mapLeft(decoded, (error) =>
    errorReply("BadRequest", ParseResult.TreeFormatter.formatErrorSync(error), { hint }),
  )
}

export const errorReply = (
  code: Errors.ErrorCode,
  message: string,
  extra?: { readonly path?: string | undefined; readonly hint?: string | undefined },
): Errors.ErrorReply => ({
  ok: false,
  error: {
    code,
    message,
    ...(extra?.path === undefined ? {} : { path: extra.path }),
    ...(extra?.hint === undefined ? {} : { hint: extra.hint }),
  },
})

const INTERNAL = Json.encode(errorReply("Internal", "internal error"))

const encodeReply = (value: unknown): { readonly bytes: Uint8Array; readonly error?: string } =>
  Either.match(Json.encodeEither(value), {
    onLeft: (e) => ({ bytes: INTERNAL, error: e.message }),
    onRight: (bytes) => ({ bytes }),
  })

/**
 * Serves `subject` until the surrounding scope closes (see the module doc
 * for flow control and shutdown). Returns counters for health reports.
 * Dies (a defect, not a failure) if the connection is already closed or the
 * subject is invalid: both are wiring bugs.
 */
export const serve = <R>(options: ServeOptions<R>): Effect.Effect<Endpoint, never, Scope.Scope | NatsClient | R> =>
  Effect.gen(function* () {
    const { connection } = yield* NatsClient
    const maxConcurrent = Math.max(1, options.maxConcurrent ?? 64)
    const maxPending = Math.max(0, options.maxPending ?? 1024)
    const drainTimeout = Duration.millis(options.drainTimeoutMs ?? 10_000)
    const state = { running: 0, waiting: 0, draining: false }
    const semaphore = yield* Effect.makeSemaphore(maxConcurrent)
    // made before the subscription, so its finalizer (interrupt leftovers) runs after the drain
    const fibers = yield* FiberSet.make<void, never>()
    const run = yield* FiberSet.runtime(fibers)<R>()
    const annotate = Effect.annotateLogs({ endpoint: options.subject })

    const send = (msg: Msg, bytes: Uint8Array, headers?: MsgHdrs): boolean => {
      try {
        return msg.respond(bytes, headers === undefined ? undefined : { headers })
      } catch (error) {
        run(annotate(Effect.logWarning(`reply to ${msg.subject} lost: ${String(error)}`)))
        return false
      }
    }

    const job = (msg: Msg): Effect.Effect<void, never, R> => {
      let started = false
      let replied = false
      const respond = (bytes: Uint8Array, headers?: MsgHdrs) =>
        Effect.sync(() => {
          if (replied) return
          replied = true
          send(msg, bytes, headers)
        })
      const request: Request = { subject: msg.subject, data: msg.data, headers: msg.headers }
      const work = Effect.suspend(() => {
        started = true
        state.waiting--
        state.running++
        return Effect.exit(options.handler(request)).pipe(
          Effect.flatMap((exit) => {
            if (Exit.isSuccess(exit)) {
              const value = exit.value
              const headers = isReply(value) ? value.headers : undefined
              if (isReply(value) && value.bytes !== undefined) return respond(value.bytes, headers)
              const { bytes, error } = encodeReply(isReply(value) ? value.value : value)
              return error === undefined
                ? respond(bytes, headers)
                : Effect.logError(`reply is not JSON: ${error}`).pipe(Effect.zipRight(respond(bytes)))
            }
            return Effect.logError(`handler died on ${msg.subject}`, exit.cause).pipe(Effect.zipRight(respond(INTERNAL)))
          }),
          Effect.ensuring(Effect.sync(() => void state.running--)),
        )
      })
      return semaphore.withPermits(1)(work).pipe(
        Effect.onInterrupt(() =>
          Effect.suspend(() => {
            if (!started) state.waiting--
            const message = state.draining
              ? "the worker is shutting down; retry"
              : "the request was interrupted; retry"
            return respond(Json.encode(errorReply(state.draining ? "Unavailable" : "Internal", message)))
          }),
        ),
        annotate,
      )
    }

    const onMessage = (err: Error | null, msg: Msg): void => {
      if (err !== null) {
        run(annotate(Effect.logError(`subscription error: ${err.message}`)))
        return
      }
      if (msg.reply === undefined || msg.reply === "") {
        run(annotate(Effect.logWarning(`ignored a message without a reply subject on ${msg.subject}`)))
        return
      }
      if (options.maxPayload !== undefined && msg.data.length > options.maxPayload) {
        send(
          msg,
          Json.encode(
            errorReply("TooLarge", `request of ${msg.data.length} bytes exceeds the limit of ${options.maxPayload} bytes`, {
              hint: "raise max_payload on the NATS server and CTXD_MAX_PAYLOAD, or send fewer/lighter messages per turn",
            }),
          ),
        )
        return
      }
      if (state.running + state.waiting >= maxConcurrent + maxPending) {
        send(
          msg,
          Json.encode(
            errorReply("Busy", `too many requests in flight (${state.running} running, ${state.waiting} waiting)`, {
              hint: "retry with backoff",
            }),
          ),
        )
        return
      }
      state.waiting++
      run(job(msg))
    }

    const stop = (sub: ReturnType<typeof connection.subscribe>) =>
      Effect.gen(function* () {
        state.draining = true
        if (!sub.isClosed() && !connection.isClosed()) {
          // finalizers run uninterruptibly: the bounded waits must opt back in, or timeouts cannot fire
          yield* Effect.tryPromise(() => sub.drain()).pipe(
            Effect.interruptible,
            Effect.timeout(Duration.seconds(5)),
            Effect.catchAll((error) =>
              Effect.logWarning(`subscription drain failed: ${String(error)}`).pipe(
                Effect.zipRight(Effect.sync(() => sub.unsubscribe())),
                Effect.catchAllDefect(() => Effect.void),
              ),
            ),
          )
        }
        const left = state.running + state.waiting
        if (left > 0) yield* Effect.logInfo(`waiting for ${left} request(s) in flight`)
        yield* FiberSet.awaitEmpty(fibers).pipe(
          Effect.interruptible,
          Effect.timeout(drainTimeout),
          Effect.catchAll(() =>
            Effect.logWarning(
              `${state.running + state.waiting} request(s) still in flight after ${Duration.format(drainTimeout)}; interrupting`,
            ),
          ),
        )
      }).pipe(annotate)

    yield* Effect.acquireRelease(
      Effect.sync(() => connection.subscribe(options.subject, { queue: options.queue, callback: onMessage })),
      stop,
    )
    yield* annotate(Effect.logDebug(`serving ${options.subject}${options.queue ? ` (queue ${options.queue})` : ""}`))

    return {
      subject: options.subject,
      inFlight: () => state.running + state.waiting,
      running: () => state.running,
      waiting: () => state.waiting,
      draining: () => state.draining,
    }
  })
