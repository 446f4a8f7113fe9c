/**
 * A small request/reply endpoint over core NATS: subscribe (optionally in a
 * queue group), run a handler per request in a fiber owned by the endpoint's
 * scope, answer with JSON. Whatever the handler does, the caller gets a JSON
 * reply: a defect or an interruption becomes the `Internal` error envelope.
 *
 * Flow control: at most `maxConcurrent` handlers run at once; further
 * requests wait in arrival order (`Permits`), and once `maxPending` wait, or once their bytes would not
 * fit the byte budget (`maxInflightBytes`, or the `Admission` budget in
 * context shared by the process's endpoints), new ones are answered `Busy`
 * at once, from the payload's length alone (nothing is decoded). With
 * `tenantOf`, a request is also held against its tenant's share
 * (`Admission`: requests and bytes in flight): a tenant over its share is
 * answered `Busy` while the others are still admitted. Requests
 * larger than `maxPayload` are answered `TooLarge` without calling the
 * handler. nats.js hands a callback subscription every message as the socket
 * is read (no client-side pending queue, and `slow` notifications do not
 * apply to callbacks), so these limits are the subscription's pending
 * limits; answering at once keeps the event loop reading, which is what keeps
 * the server from cutting the connection as a slow consumer.
 *
 * Large bodies (see `LargePayload`): a request with the header
 * `ctxd-payload: objectstore` names its body in the `PayloadStore` in
 * context; it is admitted on its declared size (at most the store's
 * `maxRequestBytes`, else `TooLarge`), fetched and verified once it has a
 * handler slot, and the handler sees the body's bytes. A reply whose encoded
 * bytes plus headers exceed the server's `max_payload` is put into the
 * object store and a small reference reply is sent instead (`TooLarge` when
 * there is no store or it fails for good). A reply that cannot be sent is
 * logged.
 *
 * Shutdown (the scope closes): the subscription is drained (the server stops
 * delivering; messages already on the wire are still served), then the
 * handlers in flight get `drainTimeoutMs` to finish and reply; any still
 * running after that are interrupted and answered `Unavailable` (retryable).
 *
 * A handler returns the JSON value of its reply, or a {@link Reply} made with
 * {@link reply} to send ready bytes (a relayed reply) or NATS headers along.
 *
 * Tracing: a request carrying a W3C `traceparent` (and `tracestate`) header
 * runs its handler as a continuation of that trace (`TraceContext`), so the
 * spans the handler makes join the caller's trace.
 */
import type { Errors } from "@ctxd/contracts"
import { TraceContext } from "@ctxd/observe"
import type { Msg, MsgHdrs } from "@nats-io/transport-node"
import { Cause, Duration, Effect, Either, Exit, FiberRef, FiberSet, HashMap, Option, type Scope } from "effect"
import * as Admission from "./Admission.ts"
import * as Json from "./Json.ts"
import * as LargePayload from "./LargePayload.ts"
import { NatsClient } from "./NatsClient.ts"
import * as PayloadStore from "./PayloadStore.ts"
import * as Permits from "./Permits.ts"
import { nextMacrotask } from "./internal/cpuYield.ts"
import { encodeReply, errorReply, INTERNAL, isReply, storeErrorReply } from "./internal/replies.ts"

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
  /**
   * Request bytes this endpoint holds in flight before answering `Busy`: its
   * own budget. Default: the {@link Admission.Admission} budget in context
   * (shared with the process's other endpoints), else unbounded.
   */
  readonly maxInflightBytes?: number | undefined
  /**
   * The tenant a request counts against (read from its subject; `undefined`:
   * none): the request and its bytes are held against the tenant's share of
   * the budget as well. Default: no tenant.
   */
  readonly tenantOf?: ((subject: string) => string | undefined) | undefined
  /** How long handlers in flight may take to finish when the scope closes; default 10 s. */
  readonly drainTimeoutMs?: number | undefined
  /**
   * Log annotations of a request (read from its subject), beside `endpoint`:
   * on every line its handler logs. Default: none.
   */
  readonly logAnnotations?: ((subject: string) => Readonly<Record<string, unknown>> | undefined) | undefined
  /** Computes the JSON reply value. Cannot fail: map errors to an error envelope. */
  readonly handler: (request: Request) => Effect.Effect<unknown, never, R>
}

/** A running endpoint. */
export interface Endpoint {
  readonly subject: string
  /** Requests accepted and not answered yet (running + waiting). */
  readonly inFlight: () => number
  /** Handlers running now. */
  readonly running: () => number
  /** Requests waiting for a handler slot. */
  readonly waiting: () => number
  /** Request bytes accepted here and not answered yet. */
  readonly inFlightBytes: () => number
  /** True once the scope started closing. */
  readonly draining: () => boolean
}

export { decodeRequest, errorReply, isReply, type Reply, reply } from "./internal/replies.ts"
export { yieldIfBusy } from "./internal/cpuYield.ts"

/**
 * Serves `subject` until the surrounding scope closes (see the module doc
 * for flow control, large bodies and shutdown). Returns counters for health
 * reports. Dies (a defect, not a failure) if the connection is already
 * closed or the subject is invalid: both are wiring bugs.
 */
export const serve = <R>(options: ServeOptions<R>): Effect.Effect<Endpoint, never, Scope.Scope | NatsClient | R> =>
  Effect.gen(function* () {
    const { connection } = yield* NatsClient
    const payloads = yield* Effect.serviceOption(PayloadStore.PayloadStore)
    const sharedBudget = yield* Effect.serviceOption(Admission.Admission)
    const budget =
      options.maxInflightBytes !== undefined
        ? Admission.make(options.maxInflightBytes)
        : Option.getOrElse(sharedBudget, () => Admission.make(Number.POSITIVE_INFINITY))
    const maxRequestBytes = Option.match(payloads, {
      onNone: () => PayloadStore.DEFAULT_MAX_REQUEST_BYTES,
      onSome: (store) => store.maxRequestBytes,
    })
    const maxConcurrent = Math.max(1, options.maxConcurrent ?? 64)
    const maxPending = Math.max(0, options.maxPending ?? 1024)
    const drainTimeout = Duration.millis(options.drainTimeoutMs ?? 10_000)
    const state = { running: 0, waiting: 0, bytes: 0, draining: false }
    const slots = yield* Permits.make(maxConcurrent)
    // made before the subscription, so its finalizer (interrupt leftovers) runs after the drain
    const fibers = yield* FiberSet.make<void, never>()
    const run = yield* FiberSet.runtime(fibers)<R>()
    const annotate = Effect.annotateLogs({ endpoint: options.subject })

    /** Publishes a reply; a reply that could not be sent is logged (never silently lost). */
    const send = (msg: Msg, bytes: Uint8Array, headers?: MsgHdrs): void => {
      let sent = false
      let why = "no reply subject, or the connection is closed"
      try {
        sent = msg.respond(bytes, headers === undefined ? undefined : { headers })
      } catch (error) {
        why = String(error)
      }
      if (!sent) run(annotate(Effect.logWarning(`reply to ${msg.subject} (${bytes.length} bytes) lost: ${why}`)))
    }

    const rejectNow = (msg: Msg, reply: Errors.ErrorReply) => send(msg, Json.encode(reply))

    /**
     * Sends `bytes` if they fit the server's max_payload; else stores them in
     * the object store and sends the reference reply (`value` gives it its `ok`
     * and `turnId`); when that is impossible, a coded error reply.
     */
    const deliver = (
      msg: Msg,
      bytes: Uint8Array,
      headers: MsgHdrs | undefined,
      value: unknown,
      sendOnce: (b: Uint8Array, h?: MsgHdrs) => Effect.Effect<void>,
    ) => {
      if (LargePayload.fits(connection, bytes, headers)) return sendOnce(bytes, headers)
      const failed = (error: PayloadStore.PayloadStoreError) =>
        Effect.logError(`reply of ${bytes.length} bytes to ${msg.subject} could not go by object store: ${error.message}`).pipe(
          Effect.zipRight(sendOnce(Json.encode(storeErrorReply(error, "reply")), headers)),
        )
      return Option.match(payloads, {
        onNone: () => failed(new PayloadStore.PayloadStoreError({ reason: "Unavailable", message: "no object store is configured" })),
        onSome: (store) =>
          store.put(bytes, "rep").pipe(
            Effect.flatMap((ref) =>
              Effect.logDebug(`reply of ${bytes.length} bytes sent by object store as ${ref.name}`).pipe(
                Effect.zipRight(sendOnce(LargePayload.referenceReply(ref, value), LargePayload.withReferenceHeader(headers))),
              ),
            ),
            Effect.catchAll(failed),
          ),
      })
    }

    const job = (
      msg: Msg,
      ref: PayloadStore.ObjectRef | undefined,
      size: number,
      tenant: string | undefined,
    ): Effect.Effect<void, never, R> => {
      let started = false
      let replied = false
      const sendOnce = (bytes: Uint8Array, headers?: MsgHdrs) =>
        Effect.sync(() => {
          if (replied) return
          replied = true
          send(msg, bytes, headers)
        })
      const respond = (bytes: Uint8Array, headers?: MsgHdrs, value?: unknown) =>
        Effect.suspend(() => (replied ? Effect.void : deliver(msg, bytes, headers, value, sendOnce)))
      // a small message may be a view into a large socket buffer: keep only its own bytes
      const own = msg.data.byteLength * 2 < msg.data.buffer.byteLength ? msg.data.slice() : msg.data
      const body: Effect.Effect<Uint8Array, PayloadStore.PayloadStoreError> =
        ref === undefined
          ? Effect.succeed(own)
          : Option.match(payloads, {
              onNone: () => new PayloadStore.PayloadStoreError({ reason: "Unavailable", message: "no object store is configured" }),
              onSome: (store) => store.get(ref, maxRequestBytes),
            })
      const handle = (data: Uint8Array) =>
        Effect.exit(TraceContext.continueFrom(msg.headers)(options.handler({ subject: msg.subject, data, headers: msg.headers }))).pipe(
          Effect.flatMap((exit) => {
            if (Exit.isSuccess(exit)) {
              const value = exit.value
              const headers = isReply(value) ? value.headers : undefined
              if (isReply(value) && value.bytes !== undefined) return respond(value.bytes, headers, value.value)
              const json = isReply(value) ? value.value : value
              const { bytes, error } = encodeReply(json)
              return error === undefined
                ? respond(bytes, headers, json)
                : Effect.logError(`reply is not JSON: ${error}`).pipe(Effect.zipRight(respond(bytes)))
            }
            return Effect.logError(`handler died on ${msg.subject}`, exit.cause).pipe(Effect.zipRight(respond(INTERNAL)))
          }),
        )
      const work = Effect.suspend(() => {
        started = true
        state.waiting--
        state.running++
        // one event-loop turn before the handler's CPU work: under a burst, socket reads (and the
        // cheap Busy answers) keep their share of the loop, so the server never sees a slow consumer
        return Effect.zipRight(nextMacrotask, body).pipe(
          Effect.matchEffect({
            onFailure: (error) =>
              Effect.logInfo(`request body not readable from the object store: ${error.message}`).pipe(
                Effect.zipRight(respond(Json.encode(storeErrorReply(error, "request")))),
              ),
            onSuccess: handle,
          }),
        )
      })
      // one finalizer (each is several runtime steps): the counters, and the answer to an interrupted request
      const finish = (exit: Exit.Exit<void>) =>
        Effect.suspend(() => {
          if (started) state.running--
          else state.waiting--
          state.bytes -= size
          if (tenant === undefined) budget.release(size)
          else budget.releaseFor(tenant, size)
          if (Exit.isSuccess(exit) || !Cause.isInterruptedOnly(exit.cause)) return Effect.void
          const message = state.draining ? "the worker is shutting down; retry" : "the request was interrupted; retry"
          return respond(Json.encode(errorReply(state.draining ? "Unavailable" : "Internal", message)))
        })
      // the request's own fiber: its log annotations are set once, not scoped (nothing runs on it after)
      const extra = options.logAnnotations?.(msg.subject)
      return Effect.zipRight(
        FiberRef.update(FiberRef.currentLogAnnotations, (current) => {
          let annotations = HashMap.set(current, "endpoint", options.subject as unknown)
          if (extra !== undefined) for (const key of Object.keys(extra)) annotations = HashMap.set(annotations, key, extra[key])
          return annotations
        }),
        Effect.onExit(slots.withPermit(work), finish),
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
      let ref: PayloadStore.ObjectRef | undefined
      if (LargePayload.isReference(msg.headers)) {
        const parsed = LargePayload.parseReference(msg.data)
        if (Either.isLeft(parsed)) return rejectNow(msg, errorReply("BadRequest", parsed.left))
        ref = parsed.right
        if (Option.isNone(payloads) || ref.size > maxRequestBytes) {
          const why = Option.isNone(payloads) ? "this endpoint has no object store" : `the limit is ${maxRequestBytes} bytes`
          return rejectNow(
            msg,
            errorReply("TooLarge", `request of ${ref.size} bytes refused: ${why}`, {
              hint: "raise CTXD_MAX_REQUEST_BYTES, or send fewer/lighter messages per turn",
            }),
          )
        }
      } else if (options.maxPayload !== undefined && msg.data.length > options.maxPayload) {
        return rejectNow(
          msg,
          errorReply("TooLarge", `request of ${msg.data.length} bytes exceeds the limit of ${options.maxPayload} bytes`, {
            hint: "raise max_payload on the NATS server and CTXD_MAX_PAYLOAD, or send fewer/lighter messages per turn",
          }),
        )
      }
      const size = ref?.size ?? msg.data.length
      if (state.running + state.waiting >= maxConcurrent + maxPending) {
        return rejectNow(
          msg,
          errorReply("Busy", `too many requests in flight (${state.running} running, ${state.waiting} waiting)`, {
            hint: "retry with backoff",
          }),
        )
      }
      const tenant = options.tenantOf?.(msg.subject)
      const refusal = tenant === undefined ? (budget.tryAcquire(size) ? undefined : "worker") : budget.tryAcquireFor(tenant, size)
      if (refusal === "turns" || refusal === "bytes") {
        Admission.recordBusy(tenant!, refusal)
        const held = budget.held(tenant!)
        const may = budget.shareFor(tenant!)
        const what =
          refusal === "turns"
            ? `turns in flight (${held.turns} of ${may.turns})`
            : `request bytes in flight (${held.bytes} of ${may.bytes} bytes)`
        return rejectNow(
          msg,
          errorReply("Busy", `tenant ${tenant} holds its share of this worker's ${what}`, { hint: "retry with backoff" }),
        )
      }
      if (refusal === "worker") {
        return rejectNow(
          msg,
          errorReply("Busy", `too many request bytes in flight (${budget.inFlightBytes()} of ${budget.maxBytes} bytes)`, {
            hint: "retry with backoff",
          }),
        )
      }
      state.bytes += size
      state.waiting++
      run(job(msg, ref, size, tenant))
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
      inFlightBytes: () => state.bytes,
      draining: () => state.draining,
    }
  })
