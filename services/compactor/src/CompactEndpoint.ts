/**
 * The compactor's two ways in over NATS:
 *
 * - `<root>.v1.compact.<tenant>.<session>` (request/reply, queue group
 *   `ctxd-compactor`): a manual compaction, run now on the compactor that
 *   gets the request (ignoring the thresholds and the cooldown), answered
 *   with `Compact.CompactReply`. An unknown session → `BadRequest`;
 *   Postgres down → `Unavailable`.
 * - the JetStream work queue ({@link serveJobs}): queued jobs run through
 *   the same {@link Compactor}; a `lock_held` job is retried when the
 *   holder's lease runs out, every other outcome is acked.
 */
import { Compact, Errors, Requests, type Subjects } from "@ctxd/contracts"
import { Endpoint } from "@ctxd/nats"
import { Clock, Effect, Either } from "effect"
import { Compactor, type CompactionError, toReply } from "./Compactor.ts"
import * as WorkQueue from "./WorkQueue.ts"

const failure = (e: CompactionError) =>
  Errors.capReply(
    e.reason === "unknown_session"
      ? Endpoint.errorReply("BadRequest", e.message, { hint: "compact a session that has committed turns" })
      : Endpoint.errorReply("Unavailable", e.message, { hint: "retry later" }),
  )

/** The reply to one manual compaction request on `subject` (exported for tests and in-process callers). */
export const handle = (
  subjects: Subjects.Subjects,
  subject: string,
  data: Uint8Array,
): Effect.Effect<Compact.CompactReply | ReturnType<typeof Endpoint.errorReply>, never, Compactor> =>
  Effect.gen(function* () {
    const target = subjects.parseSession(subject)
    if (target === undefined) {
      return Endpoint.errorReply("BadRequest", `bad subject ${subject}`, { hint: "<root>.v1.compact.<tenant>.<session>" })
    }
    const request = Requests.decode(Compact.CompactRequest, data, {
      what: "compact requests",
      hint: "send {model: {provider, name, contextWindow?, maxOutputTokens?}, mode?}",
    })
    if (Either.isLeft(request)) return request.left
    const compactor = yield* Compactor
    const result = yield* Effect.either(
      compactor.compact({
        ...target,
        model: request.right.model,
        mode: request.right.mode,
        trigger: "manual",
        format: request.right.format,
      }),
    )
    return Either.isLeft(result) ? failure(result.left) : toReply(result.right)
  })

/** How to serve the manual endpoint. */
export interface ServeOptions {
  readonly subjects: Subjects.Subjects
  /** Queue group; default `ctxd-compactor`. */
  readonly queue?: string | undefined
  /** Compactions at once; default 4. */
  readonly maxConcurrent?: number | undefined
}

/** Serves `<root>.v1.compact.>` until the surrounding scope closes. */
export const serve = (options: ServeOptions) =>
  Effect.gen(function* () {
    const compactor = yield* Compactor
    return yield* Endpoint.serve({
      subject: options.subjects.compactWildcard,
      queue: options.queue ?? "ctxd-compactor",
      maxConcurrent: options.maxConcurrent ?? 4,
      handler: ({ subject, data }) => Effect.provideService(handle(options.subjects, subject, data), Compactor, compactor),
    })
  })

/** Runs one queued job: `lock_held` is retried just after the holder's lease runs out; the rest is acked. */
export const handleJob = (job: WorkQueue.Job): Effect.Effect<WorkQueue.Disposition, CompactionError, Compactor> =>
  Effect.gen(function* () {
    const compactor = yield* Compactor
    const result = yield* compactor
      .compact({
        tenant: job.tenant,
        session: job.session,
        model: job.model,
        mode: job.mode,
        trigger: job.trigger,
        fixedTokens: job.fixedTokens,
        format: job.format,
        backend: job.backend,
      })
      .pipe(
        Effect.catchIf(
          (e) => e.reason === "unknown_session",
          () => Effect.succeed(undefined),
        ),
      )
    if (result?.outcome !== "lock_held" || result.retryAt === undefined) return {}
    const now = yield* Clock.currentTimeMillis
    return { retryInMs: Math.max(250, result.retryAt.getTime() - now + 100) }
  })

/** Serves the work queue until the surrounding scope closes (see `WorkQueue.consume`). */
export const serveJobs = (options: WorkQueue.QueueOptions) => WorkQueue.consume(options, (job) => handleJob(job))
