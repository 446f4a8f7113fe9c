/**
 * The worker's background pruner (a scoped fiber, stopped when the worker
 * stops). Every `intervalMs` it runs one tick of bounded work:
 *
 * 1. **Replies**: turn replies older than the idempotency window
 *    (`CTXD_REPLY_RETENTION`, default 24 h) are pruned in batches of `batch`
 *    rows (`LifecycleStore.pruneReplies`: each batch locks only the rows it
 *    updates, skipping rows another worker's pruner holds), pausing `pauseMs`
 *    between batches, at most `maxBatches` per tick. The turn row stays, so a
 *    retry after the window is recognised and answered `Conflict`.
 * 2. **Turn records** (`CTXD_TURN_RETENTION`, default 7 days, never
 *    shorter than the idempotency window): on a partitioned schema the day
 *    partitions of `ctxd_turns` whose every turn is older are dropped whole
 *    (`Partitions.dropBefore`, by this worker's clock). A commit looks its
 *    turn id up in every partition, so without this its cost grows with the
 *    days the deployment has run. Past it, a retry is answered `Conflict` by
 *    the session's sequence check instead (its messages stay).
 * 3. **Retention**: for the tenants whose section sets `retentionDays`
 *    (read through a getter at each tick, so a reloaded configuration
 *    applies), sessions idle longer than that are deleted with all their rows,
 *    `deleteBatch` sessions per transaction. The sweep walks `ctxd_sessions`
 *    by id, `sweepSpan` ids per step, at most `maxSweepSteps` steps per tick,
 *    and resumes where it stopped at the next tick.
 *
 * Every worker runs one; their work does not overlap harmfully (every step
 * is idempotent and skips what another holds: rows locked, a partition drop
 * under the upkeep lock). What it removes is counted
 * in `ctxd_pruned_total{what}` and logged as counts, never content.
 */
import { type Session, type Tenants } from "@ctxd/contracts"
import { LifecycleStore, Partitions } from "@ctxd/db"
import { Clock, Duration, Effect, Metric, Schedule } from "effect"

/** The pruner's settings. */
export interface Options {
  /** Idempotency window in seconds: replies older are pruned; undefined: kept forever. */
  readonly replyRetentionSeconds: number | undefined
  /** Turn records older than this (seconds) are dropped with their day partition; undefined: kept. */
  readonly turnRetentionSeconds: number | undefined
  /** Time between ticks, ms. */
  readonly intervalMs: number
  /** Turn replies pruned per batch (one statement). */
  readonly batch: number
  /** Pause between two batches of a tick, ms. */
  readonly pauseMs: number
  /** Reply batches per tick at most. */
  readonly maxBatches: number
  /** Sessions ids scanned per sweep step. */
  readonly sweepSpan: number
  /** Sweep steps per tick at most. */
  readonly maxSweepSteps: number
  /** Idle sessions deleted per transaction. */
  readonly deleteBatch: number
}

/**
 * Defaults: replies kept 24 h, turn records 7 days, a tick every 60 s, 500 replies per batch,
 * 50 ms between batches, at most 100 batches (50,000 replies) per tick;
 * 10,000 session ids per sweep step, 100 steps per tick, 20 sessions per
 * deletion.
 */
export const defaults: Options = {
  replyRetentionSeconds: 24 * 3600,
  turnRetentionSeconds: 7 * 86_400,
  intervalMs: 60_000,
  batch: 500,
  pauseMs: 50,
  maxBatches: 100,
  sweepSpan: 10_000,
  maxSweepSteps: 100,
  deleteBatch: 20,
}

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 }

/**
 * A duration as `CTXD_REPLY_RETENTION` takes it: a whole number with a unit
 * `s`, `m`, `h` or `d` (`24h`, `90m`), or a bare number of seconds (`3600`);
 * `off` keeps replies forever. In seconds (undefined for `off`); an
 * `Error` for anything else, or zero.
 */
export const parseRetention = (text: string): number | undefined | Error => {
  const trimmed = text.trim()
  if (trimmed === "off") return undefined
  const match = /^(\d{1,9})([smhd]?)$/.exec(trimmed)
  if (match === null) return new Error(`${JSON.stringify(text)} is not a duration (e.g. 24h, 90m, 3600s, 3600, or off)`)
  const seconds = Number(match[1]) * UNITS[match[2] || "s"]!
  return seconds > 0 ? seconds : new Error("the reply retention must be above 0 (off keeps replies forever)")
}

/**
 * The turn records' retention from `CTXD_TURN_RETENTION` (`text`, undefined
 * when unset) and the reply window (`reply`, undefined for `off`), in seconds
 * (undefined: kept forever). Unset: the default's 7 days, or the reply window
 * when longer, and kept while replies are. A duration shorter than the reply
 * window, or any duration while replies are kept forever, would drop replies
 * still meant to answer retries: an `Error`.
 */
export const turnRetention = (text: string | undefined, reply: number | undefined): number | undefined | Error => {
  if (text === undefined || text.trim() === "") return reply === undefined ? undefined : Math.max(defaults.turnRetentionSeconds!, reply)
  const seconds = parseRetention(text)
  if (seconds === undefined || seconds instanceof Error) return seconds
  if (reply === undefined)
    return new Error("CTXD_TURN_RETENTION drops turns with their replies: it must be off while CTXD_REPLY_RETENTION is off")
  if (seconds < reply) return new Error(`CTXD_TURN_RETENTION (${seconds} s) must not be shorter than CTXD_REPLY_RETENTION (${reply} s)`)
  return seconds
}

/** `ctxd_pruned_total{what}`. */
export const pruned = Metric.counter("ctxd_pruned_total", {
  description:
    "rows the pruner removed: replies (turn replies past the idempotency window), turn_partitions (day partitions of turn records past their retention), and for sessions past their tenant's retention: sessions, messages, turns, summaries, compactions, usage_reports",
  incremental: true,
})

const KINDS = [
  ["sessions", "sessions"],
  ["messages", "messages"],
  ["turns", "turns"],
  ["summaries", "summaries"],
  ["compactions", "compactions"],
  ["usageReports", "usage_reports"],
] as const

const count = (what: string, n: number) => (n > 0 ? Metric.incrementBy(Metric.tagged(pruned, "what", what), n) : Effect.void)

/** The tenants' retention rules from their sections. */
export const rulesOf = (sections: Readonly<Record<string, Tenants.Tenant>>): ReadonlyArray<LifecycleStore.RetentionRule> =>
  Object.entries(sections).flatMap(([tenant, section]) =>
    section.retentionDays === undefined ? [] : [{ tenant, days: section.retentionDays }],
  )

/** What one tick removed. */
export interface TickResult {
  readonly replies: number
  /** Day partitions of turn records dropped. */
  readonly turnPartitions: number
  readonly removed: Session.Removed
}

/**
 * The pruner's tick as an effect (the fiber runs it every `intervalMs`); its
 * sweep position is kept between ticks.
 */
export const make = (options: Options, sections: () => Readonly<Record<string, Tenants.Tenant>>) =>
  Effect.gen(function* () {
    const store = yield* LifecycleStore.LifecycleStore
    let cursor = 0n
    const pause = options.pauseMs > 0 ? Effect.sleep(Duration.millis(options.pauseMs)) : Effect.void

    const replies = Effect.gen(function* () {
      const window = options.replyRetentionSeconds
      if (window === undefined) return 0
      let total = 0
      for (let i = 0; i < options.maxBatches; i++) {
        if (i > 0) yield* pause
        const n = yield* store.pruneReplies(window, options.batch)
        total += n
        yield* count("replies", n)
        if (n < options.batch) break
      }
      return total
    })

    const turnPartitions = Effect.gen(function* () {
      const keep = options.turnRetentionSeconds
      if (keep === undefined) return 0
      const now = yield* Clock.currentTimeMillis
      const dropped = yield* Partitions.dropBefore(new Date(now - keep * 1000))
      yield* count("turn_partitions", dropped.length)
      return dropped.length
    })

    const retention = Effect.gen(function* () {
      const rules = rulesOf(sections())
      let removed = LifecycleStore.NONE
      if (rules.length === 0) return removed
      for (let step = 0; step < options.maxSweepSteps; step++) {
        const { ids, maxId } = yield* store.idleSessions(rules, cursor, options.sweepSpan)
        for (let at = 0; at < ids.length; at += options.deleteBatch) {
          if (at > 0) yield* pause
          const batch = yield* store.deleteIdle(rules, ids.slice(at, at + options.deleteBatch))
          removed = LifecycleStore.add(removed, batch)
          yield* Effect.forEach(KINDS, ([key, what]) => count(what, batch[key]), { discard: true })
        }
        cursor += BigInt(options.sweepSpan)
        if (cursor >= maxId) {
          // a pass is complete: the next tick starts over
          cursor = 0n
          break
        }
      }
      return removed
    })

    const tick = Effect.gen(function* () {
      const replyCount = yield* replies
      const partitionCount = yield* turnPartitions
      const removed = yield* retention
      if (replyCount > 0 || partitionCount > 0 || removed.sessions > 0) {
        yield* Effect.logInfo(
          `pruner: ${replyCount} replies pruned, ${partitionCount} turn partitions dropped, ${removed.sessions} idle sessions deleted`,
        ).pipe(Effect.annotateLogs({ replies: replyCount, turnPartitions: partitionCount, ...removed }))
      }
      return { replies: replyCount, turnPartitions: partitionCount, removed } satisfies TickResult
    })
    return tick
  })

/** Runs the pruner every `intervalMs` until the scope closes; a failed tick is logged and the next one runs. */
export const run = (options: Options, sections: () => Readonly<Record<string, Tenants.Tenant>>) =>
  Effect.gen(function* () {
    const tick = yield* make(options, sections)
    yield* tick.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("pruner: tick failed", cause)),
      Effect.repeat(Schedule.spaced(Duration.millis(options.intervalMs))),
      Effect.annotateLogs({ component: "pruner" }),
      Effect.forkScoped,
    )
  })
