/**
 * What the assembler needs from compaction, as a port: the live summary of
 * a session, scheduling a background compaction (a JetStream job any
 * compactor may take), and compacting now when a turn would otherwise not
 * fit. `layer` wires the compactor; `layerInProcess` runs a given function
 * at once in this process (`InProcessTurns`); `layerDisabled` turns
 * compaction off (tests, embedding). Failures never fail a turn: the turn goes out without
 * the new summary and the failure is logged and audited by the compactor.
 */
import type { Pipeline } from "@ctxd/context"
import { Subjects } from "@ctxd/contracts"
import { SessionStore } from "@ctxd/db"
import { NatsClient } from "@ctxd/nats"
import { CompactionStore, Compactor, type CompactorConfig, type Plan, type View, WorkQueue } from "@ctxd/compactor"
import { Context, type Duration, Effect, FiberSet, Layer, Option } from "effect"

export interface CompactionApi {
  /** When to compact; `undefined`: compaction is off. */
  readonly thresholds: Plan.Thresholds | undefined
  /** The session's live summary, if any. */
  readonly latest: (tenant: string, session: string) => Effect.Effect<View.Summary | undefined>
  /** Enqueues a background compaction (returns at once; the job runs on any compactor). */
  readonly schedule: (job: WorkQueue.Job) => Effect.Effect<void>
  /** Compacts now, bounded by `timeout`; the caller reads `latest` afterwards. */
  readonly now: (job: WorkQueue.Job, timeout: Duration.DurationInput) => Effect.Effect<void>
}

export class CompactionPort extends Context.Tag("@ctxd/assembler/CompactionPort")<CompactionPort, CompactionApi>() {}

/** Compaction off: no summaries, nothing scheduled. */
export const layerDisabled: Layer.Layer<CompactionPort> = Layer.succeed(CompactionPort, {
  thresholds: undefined,
  latest: () => Effect.succeed(undefined),
  schedule: () => Effect.void,
  now: () => Effect.void,
})

/** Folds the head of a session's stored `history` (after its `live` summary) into a new summary (undefined: none made). */
export type Compact = (
  job: WorkQueue.Job,
  history: ReadonlyArray<Pipeline.StoredMessage>,
  live: View.Summary | undefined,
) => Promise<View.Summary | undefined>

/**
 * Compaction in this process by `compact`, over the history as the session
 * store holds it (as a compactor reads it): a scheduled job runs at once and
 * its summary is the live one from the session's next turn on; compacting
 * now lands it for the turn that asked. Live summaries are kept in memory.
 * A failed `compact` is logged; the turn goes on without a new summary.
 */
export const layerInProcess = (options: {
  readonly thresholds: Plan.Thresholds
  readonly compact: Compact
}): Layer.Layer<CompactionPort, never, SessionStore.SessionStore> =>
  Layer.effect(
    CompactionPort,
    Effect.gen(function* () {
      const store = yield* SessionStore.SessionStore
      const live = new Map<string, View.Summary>()
      const keyOf = (tenant: string, session: string) => `${tenant}\u0000${session}`
      const run = (job: WorkQueue.Job): Effect.Effect<void> =>
        store.loadMessages(job.tenant, job.session, 0).pipe(
          Effect.flatMap((rows) => {
            const key = keyOf(job.tenant, job.session)
            const history = rows.map((r): Pipeline.StoredMessage => ({ seq: r.seq, message: r.message, tokens: r.tokens }))
            return Effect.tryPromise(() => options.compact(job, history, live.get(key))).pipe(
              Effect.map((summary) => void (summary === undefined ? undefined : live.set(key, summary))),
            )
          }),
          Effect.catchAllCause((cause) => Effect.logWarning("in-process compaction failed; the turn goes on without it", cause)),
        )
      return {
        thresholds: options.thresholds,
        latest: (tenant, session) => Effect.sync(() => live.get(keyOf(tenant, session))),
        schedule: run,
        now: (job) => run(job),
      }
    }),
  )

/** Compaction through the compactor, its store and the JetStream work queue under `root`. */
export const layer = (options: {
  readonly root: string
  readonly config: CompactorConfig.Config
}): Layer.Layer<CompactionPort, never, Compactor.Compactor | CompactionStore.CompactionStore | NatsClient.NatsClient> =>
  Layer.scoped(
    CompactionPort,
    Effect.gen(function* () {
      const store = yield* CompactionStore.CompactionStore
      const compactor = yield* Compactor.Compactor
      const nats = yield* NatsClient.NatsClient
      const queue: WorkQueue.QueueOptions = { subjects: Subjects.make(options.root), config: options.config.queue }
      const background = yield* FiberSet.make<void, never>()
      yield* WorkQueue.ensure(queue).pipe(
        Effect.provideService(NatsClient.NatsClient, nats),
        Effect.catchAll((e) => Effect.logWarning(`compaction queue not ready yet: ${String(e)}`)),
      )
      return {
        thresholds: options.config.thresholds,
        latest: (tenant, session) =>
          store.latestSummary(tenant, session).pipe(
            Effect.map(Option.getOrUndefined),
            Effect.catchAll((e) => Effect.logWarning(`could not read the live summary: ${e.message}`).pipe(Effect.as(undefined))),
          ),
        schedule: (job) =>
          FiberSet.run(
            background,
            WorkQueue.enqueue(queue, job).pipe(
              Effect.provideService(NatsClient.NatsClient, nats),
              Effect.tap(({ duplicate }) => (duplicate ? Effect.void : Effect.logInfo(`compaction scheduled (${job.trigger})`))),
              Effect.catchAllCause((cause) => Effect.logWarning("could not schedule a compaction", cause)),
              Effect.asVoid,
              Effect.annotateLogs({ tenant: job.tenant, session: job.session }),
            ),
          ).pipe(Effect.asVoid),
        now: (job, timeout) =>
          compactor
            .compact({
              tenant: job.tenant,
              session: job.session,
              model: job.model,
              trigger: "over_window",
              ...(job.fixedTokens === undefined ? {} : { fixedTokens: job.fixedTokens }),
              ...(job.format === undefined ? {} : { format: job.format }),
              ...(job.backend === undefined ? {} : { backend: job.backend }),
            })
            .pipe(
              Effect.timeout(timeout),
              Effect.tap((result) => Effect.logInfo(`blocking compaction: ${result.outcome}`)),
              Effect.catchAllCause((cause) => Effect.logWarning("blocking compaction failed; the turn goes out without it", cause)),
              Effect.asVoid,
            ),
      }
    }),
  )
