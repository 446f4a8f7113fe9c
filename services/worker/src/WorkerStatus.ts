/**
 * What the worker's probes report: built before the worker itself (so
 * `/readyz` answers "starting" while it connects and migrates), attached to
 * by the running worker ({@link WorkerStatusService.attach}: its readiness
 * checks and its runtime gauges), and flipped to draining first thing at
 * shutdown ({@link WorkerStatusService.drain}), before any endpoint stops.
 *
 * A report is bounded in time: checks still running after
 * {@link defaults.reportTimeoutMs} count as failed (`timed out`).
 */
import { Context, Duration, Effect, Layer, type Scope } from "effect"

/** Bounds of a report. */
export const defaults = {
  /** Longest a readiness report may take; checks still running then fail. Default 2,000 ms. */
  reportTimeoutMs: 2_000,
} as const

/** One check of a readiness report. */
export interface Check {
  readonly ok: boolean
  /** A short description (numbers, states; nothing a caller sent). */
  readonly detail?: string | undefined
}

/** A readiness report: ready when every check passes and the worker is not draining. */
export interface Report {
  readonly ready: boolean
  readonly draining: boolean
  readonly checks: Readonly<Record<string, Check>>
  /** The configuration in effect (once the worker is attached). */
  readonly config?: ConfigStatus | undefined
}

/** The configuration in effect: its hash (`none` without a file), reloads applied and edits rejected since start. */
export interface ConfigStatus {
  readonly hash: string
  readonly reloads: number
  readonly rejected: number
}

/** What the running worker attaches. */
export interface Attached {
  /** Its readiness checks (they must not fail; bounded by the report's timeout). */
  readonly checks: Effect.Effect<Readonly<Record<string, Check>>>
  /** Sets the runtime gauges (shards owned, mailbox depth, bytes in flight) to their current values. */
  readonly gauges: Effect.Effect<void>
  /** The configuration in effect. */
  readonly config?: (() => ConfigStatus) | undefined
}

export interface WorkerStatusService {
  /** Attaches the running worker until the scope closes (then reports say `stopped`). */
  readonly attach: (attached: Attached) => Effect.Effect<void, never, Scope.Scope>
  /** From now on the worker is draining: not ready, whatever the checks say. */
  readonly drain: Effect.Effect<void>
  readonly draining: () => boolean
  readonly report: Effect.Effect<Report>
  /** Refreshes the runtime gauges of the attached worker (nothing before it attached). */
  readonly refreshGauges: Effect.Effect<void>
}

/** The worker status of this process. */
export class WorkerStatus extends Context.Tag("@ctxd/worker/WorkerStatus")<WorkerStatus, WorkerStatusService>() {}

/** A fresh status: starting, not draining. */
export const make = (): WorkerStatusService => {
  let attached: Attached | undefined
  let phase: "starting" | "running" | "stopped" = "starting"
  let draining = false

  const checks: Effect.Effect<Readonly<Record<string, Check>>> = Effect.suspend(() =>
    attached === undefined
      ? Effect.succeed({ worker: { ok: false, detail: phase } })
      : attached.checks.pipe(
          Effect.timeout(Duration.millis(defaults.reportTimeoutMs)),
          Effect.catchAllCause(() => Effect.succeed({ worker: { ok: false, detail: "checks timed out" } })),
        ),
  )

  return {
    attach: (next) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          attached = next
          phase = "running"
        }),
        () =>
          Effect.sync(() => {
            attached = undefined
            phase = "stopped"
          }),
      ),
    drain: Effect.sync(() => {
      draining = true
    }),
    draining: () => draining,
    report: Effect.map(checks, (results): Report => {
      const all = draining ? { ...results, draining: { ok: false, detail: "shutting down" } } : results
      const config = attached?.config?.()
      return {
        ready: !draining && Object.values(all).every((c) => c.ok),
        draining,
        checks: all,
        ...(config === undefined ? {} : { config }),
      }
    }),
    refreshGauges: Effect.suspend(() => attached?.gauges ?? Effect.void),
  }
}

/** A fresh status as a layer. */
export const layer: Layer.Layer<WorkerStatus> = Layer.sync(WorkerStatus, make)
