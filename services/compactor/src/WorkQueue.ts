/**
 * The compaction work queue on JetStream (NATS 2.9 features only).
 *
 * - Stream `ctxd-compact-<root>` (or `CTXD_COMPACT_STREAM`), work-queue
 *   retention, subjects `<root>.v1.compactjob.>`, file storage: a job is
 *   stored until a compactor acks it, so it survives any compactor's crash.
 * - One durable pull consumer (`ctxd-compactor`) shared by every compactor;
 *   explicit acks; `ack_wait` (60 s) after which an unacked job is
 *   redelivered — while a job runs its compactor marks it in progress every
 *   third of that, so only a dead compactor's job comes back.
 * - Jobs are deduplicated with `Nats-Msg-Id` = `<tenant>.<session>.<afterSeq>`
 *   (`afterSeq`: what the live summary covers when the job is enqueued), so
 *   every turn of a session above the threshold enqueues at most one job per
 *   summary within the duplicate window.
 * - A job is acked once its outcome is recorded. `retryInMs` from the handler
 *   naks it with that delay instead (a lease held by another compactor: try
 *   again when it runs out); a handler failure naks it after 5 s; a payload
 *   that is not a job is terminated.
 */
import { Subjects, Summarize, Turn } from "@ctxd/contracts"
import { Json, NatsClient } from "@ctxd/nats"
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, type JsMsg, RetentionPolicy, StorageType } from "@nats-io/jetstream"
import { Data, Duration, Effect, Either, FiberSet, Schedule, Schema, type Scope } from "effect"
import type * as CompactorConfig from "./CompactorConfig.ts"

/** One compaction job. */
export const Job = Schema.Struct({
  tenant: Subjects.TenantId,
  session: Subjects.SessionId,
  /** What the live summary covered when the job was enqueued (0: none); part of the dedup id. */
  afterSeq: Schema.Int.pipe(Schema.nonNegative()),
  trigger: Schema.Literal("soft", "hard", "over_window", "manual"),
  model: Turn.Model,
  mode: Schema.optional(Summarize.Mode),
  /** System + tools (+ memory) tokens of the turn that enqueued it. */
  fixedTokens: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  /** The request format of the turn that enqueued it: its provider compactions bound the cut (absent: any format's). */
  format: Schema.optional(Turn.Format),
  /** Who writes the summary, resolved by the turn (`Compactor.backendFor`; absent: `ctxd`, as before the field). */
  backend: Schema.optional(Schema.Literal("ctxd", "provider")),
})
export type Job = typeof Job.Type

/** The queue could not be reached or set up. */
export class QueueError extends Data.TaggedError("QueueError")<{ readonly message: string; readonly cause?: unknown }> {}

/** Where the queue lives. */
export interface QueueOptions {
  readonly subjects: Subjects.Subjects
  readonly config: CompactorConfig.QueueConfig
}

/** What to do with a job after the handler ran: ack it, or nak it for a retry after `retryInMs`. */
export interface Disposition {
  readonly retryInMs?: number | undefined
}

/** The stream name for a subject root: `ctxd-compact-<root>` with every character outside `[A-Za-z0-9_-]` replaced by `_`. */
export const streamName = (options: QueueOptions): string =>
  options.config.stream !== "" ? options.config.stream : `ctxd-compact-${options.subjects.root.replace(/[^A-Za-z0-9_-]/g, "_")}`

/** The dedup id of a job. */
export const jobId = (job: Job): string => `${job.tenant}.${job.session}.${job.afterSeq}`

const nanos = (ms: number): number => ms * 1_000_000

const wrap = <A>(what: string, f: () => Promise<A>): Effect.Effect<A, QueueError> =>
  Effect.tryPromise({
    try: f,
    catch: (cause) => new QueueError({ message: `${what}: ${cause instanceof Error ? cause.message : String(cause)}`, cause }),
  })

/** Creates the stream and the durable consumer when missing (idempotent, safe to race). */
export const ensure = (options: QueueOptions): Effect.Effect<void, QueueError, NatsClient.NatsClient> =>
  Effect.gen(function* () {
    const { connection } = yield* NatsClient.NatsClient
    const jsm = yield* wrap("jetstream manager", () => jetstreamManager(connection))
    const name = streamName(options)
    const q = options.config
    const stream = {
      name,
      subjects: [options.subjects.compactJobWildcard],
      retention: RetentionPolicy.Workqueue,
      storage: q.storage === "memory" ? StorageType.Memory : StorageType.File,
      max_age: nanos(q.maxAgeMs),
      duplicate_window: nanos(q.duplicateWindowMs),
    }
    const hasStream = yield* wrap("stream info", () =>
      jsm.streams.info(name).then(
        () => true,
        () => false,
      ),
    )
    if (!hasStream) {
      // a concurrent creator wins with the same config: check again instead of failing
      yield* wrap("stream add", () => jsm.streams.add(stream)).pipe(
        Effect.catchAll((e) => wrap("stream info", () => jsm.streams.info(name)).pipe(Effect.mapError(() => e))),
      )
    }
    const consumer = {
      durable_name: q.consumer,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(q.ackWaitMs),
      max_deliver: q.maxDeliver,
      filter_subject: options.subjects.compactJobWildcard,
    }
    const hasConsumer = yield* wrap("consumer info", () =>
      jsm.consumers.info(name, q.consumer).then(
        () => true,
        () => false,
      ),
    )
    if (!hasConsumer) {
      yield* wrap("consumer add", () => jsm.consumers.add(name, consumer)).pipe(
        Effect.catchAll((e) => wrap("consumer info", () => jsm.consumers.info(name, q.consumer)).pipe(Effect.mapError(() => e))),
      )
    }
  })

/** Publishes a job; `duplicate` when the same job was enqueued within the duplicate window. */
export const enqueue = (
  options: QueueOptions,
  job: Job,
): Effect.Effect<{ readonly seq: number; readonly duplicate: boolean }, QueueError, NatsClient.NatsClient> =>
  Effect.gen(function* () {
    const { connection } = yield* NatsClient.NatsClient
    const js = jetstream(connection)
    const ack = yield* wrap("enqueue", () =>
      js.publish(options.subjects.compactJob(job.tenant, job.session), Json.encode(Schema.encodeSync(Job)(job)), {
        msgID: jobId(job),
        timeout: 5_000,
      }),
    )
    return { seq: ack.seq, duplicate: ack.duplicate }
  })

const decode = Schema.decodeUnknownEither(Job)

/**
 * Pulls jobs until the scope closes, running at most `concurrency` at once
 * through `handler` (see the module doc for acks). Ensures the stream and
 * consumer first. On shutdown the jobs in flight are interrupted and naked,
 * so another compactor takes them at once.
 */
export const consume = <R>(
  options: QueueOptions,
  handler: (job: Job, delivery: { readonly redelivered: boolean; readonly deliveries: number }) => Effect.Effect<Disposition, unknown, R>,
): Effect.Effect<void, QueueError, NatsClient.NatsClient | Scope.Scope | R> =>
  Effect.gen(function* () {
    yield* ensure(options)
    const { connection } = yield* NatsClient.NatsClient
    const q = options.config
    const consumer = yield* wrap("consumer", () => jetstream(connection).consumers.get(streamName(options), q.consumer))
    const permits = yield* Effect.makeSemaphore(q.concurrency)
    const fibers = yield* FiberSet.make<void, never>()
    const beat = Duration.millis(Math.max(200, Math.floor(q.ackWaitMs / 3)))

    const process = (msg: JsMsg): Effect.Effect<void, never, R> => {
      const parsed = Either.flatMap(Json.decode(msg.data), (json) => Either.mapLeft(decode(json), (e) => new Error(String(e))))
      if (Either.isLeft(parsed)) {
        return Effect.sync(() => msg.term("not a compaction job")).pipe(
          Effect.zipRight(Effect.logWarning(`terminated a malformed compaction job on ${msg.subject}`)),
        )
      }
      const job = parsed.right
      return Effect.scoped(
        Effect.gen(function* () {
          yield* Effect.sync(() => msg.working()).pipe(Effect.repeat(Schedule.spaced(beat)), Effect.delay(beat), Effect.forkScoped)
          const disposition = yield* handler(job, { redelivered: msg.redelivered, deliveries: msg.info.deliveryCount })
          if (disposition.retryInMs !== undefined) msg.nak(Math.max(0, Math.round(disposition.retryInMs)))
          else msg.ack()
        }),
      ).pipe(
        Effect.catchAllCause((cause) =>
          Effect.logWarning("compaction job failed; it will be redelivered", cause).pipe(
            Effect.zipRight(Effect.sync(() => msg.nak(5_000))),
          ),
        ),
        Effect.onInterrupt(() => Effect.sync(() => msg.nak())),
        Effect.annotateLogs({ tenant: job.tenant, session: job.session, job: jobId(job) }),
      )
    }

    const pullOne = Effect.gen(function* () {
      yield* permits.take(1)
      const msg = yield* wrap("pull", () => consumer.next({ expires: 1_000 })).pipe(Effect.tapError(() => permits.release(1)))
      if (msg === null) return yield* permits.release(1)
      yield* FiberSet.run(fibers, process(msg).pipe(Effect.ensuring(permits.release(1))))
    })

    yield* pullOne.pipe(
      Effect.catchAllCause((cause) =>
        Effect.logWarning("compaction queue pull failed", cause).pipe(Effect.zipRight(Effect.sleep("1 second"))),
      ),
      Effect.forever,
      Effect.annotateLogs({ queue: streamName(options) }),
      Effect.forkScoped,
    )
  })
