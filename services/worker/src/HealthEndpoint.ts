/**
 * `<root>.v1.health`: every worker answers (no queue group), so a caller
 * that gathers replies sees the whole fleet; a plain request gets the first.
 */
import type { Health, Subjects } from "@ctxd/contracts"
import { Database } from "@ctxd/db"
import { Endpoint } from "@ctxd/nats"
import { Effect } from "effect"

const VERSION = "0.1.0"

export const serve = (options: {
  readonly subjects: Subjects.Subjects
  readonly workerId: string
  readonly started: number
  readonly inFlight: () => number
  /** Request bytes in flight over the worker's endpoints, and their limit. */
  readonly inFlightBytes?: (() => number) | undefined
  readonly maxInFlightBytes?: number | undefined
  /** True once the worker is shutting down. */
  readonly draining?: (() => boolean) | undefined
  /** The configuration in effect: its hash, reloads applied and edits rejected since start. */
  readonly config?: (() => NonNullable<Health.HealthReply["config"]>) | undefined
  /** Sticky routing figures: shards owned now, turns handled as owner and forwarded since start. */
  readonly routing?: Effect.Effect<{ readonly shards: number; readonly turns: number; readonly forwarded: number }> | undefined
}) =>
  Effect.gen(function* () {
    const db = yield* Database.Database
    return yield* Endpoint.serve({
      subject: options.subjects.health,
      maxConcurrent: 4,
      // its own small budget: health answers while the turns' byte budget is full
      maxInflightBytes: 1024 * 1024,
      handler: () =>
        db.query("select 1").pipe(
          Effect.timeout("1 second"),
          Effect.as(true),
          Effect.orElseSucceed(() => false),
          Effect.zip(options.routing ?? Effect.succeed({})),
          Effect.map(([postgres, routing]): Health.HealthReply => ({
            ok: true,
            worker: options.workerId,
            version: VERSION,
            uptimeMs: Date.now() - options.started,
            inFlight: options.inFlight(),
            ...(options.inFlightBytes === undefined ? {} : { inFlightBytes: options.inFlightBytes() }),
            ...(options.maxInFlightBytes === undefined || !Number.isFinite(options.maxInFlightBytes)
              ? {}
              : { maxInFlightBytes: options.maxInFlightBytes }),
            postgres,
            draining: options.draining?.() ?? false,
            ...(options.config === undefined ? {} : { config: options.config() }),
            ...routing,
          })),
        ),
    })
  })
