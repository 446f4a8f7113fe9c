/**
 * The compactor's config, from the environment (constant case) through
 * Effect `Config`. Defaults:
 *
 * | env | default | meaning |
 * | --- | --- | --- |
 * | `CTXD_COMPACT_AT_PCT` | 0.75 | share of the effective window at which compaction is due (`compact_at_pct`) |
 * | `CTXD_COMPACT_SOFT_PCT` | 0.6 | share at which background compaction starts |
 * | `CTXD_COMPACT_TAIL_KEEP_TOKENS` | 20000 | newest tokens kept verbatim (`tail_keep_tokens`) |
 * | `CTXD_COMPACT_TAIL_MAX_PCT` | 0.3 | the kept tail is at most this share of the effective window |
 * | `CTXD_COMPACT_MIN_FOLD_PCT` | 0.05 | a background compaction folds at least this share of the effective window |
 * | `CTXD_COMPACT_LEASE_TTL_MS` | 300000 | compaction lease TTL (database clock); renewed every third of it while the compaction runs |
 * | `CTXD_COMPACT_COOLDOWN_MS` | 600000 | pause after `CTXD_COMPACT_COOLDOWN_FAILURES` failed compactions in a row |
 * | `CTXD_COMPACT_COOLDOWN_FAILURES` | 3 | failed compactions in a row that start a cooldown |
 * | `CTXD_WORKER_ID` | `<hostname>-<pid>` | the lease owner's name |
 * | `CTXD_COMPACT_STREAM` | `ctxd-compact-<root>` | JetStream stream of the work queue (one per subject root) |
 * | `CTXD_COMPACT_CONSUMER` | `ctxd-compactor` | the durable pull consumer every compactor shares |
 * | `CTXD_COMPACT_ACK_WAIT_MS` | 60000 | a job not acked (nor marked in progress) within this is redelivered |
 * | `CTXD_COMPACT_MAX_DELIVER` | 20 | deliveries of one job before JetStream gives up on it |
 * | `CTXD_COMPACT_DUPLICATE_WINDOW_MS` | 120000 | a job for the same session and live summary is dropped as a duplicate within this |
 * | `CTXD_COMPACT_MAX_AGE_MS` | 3600000 | jobs older than this are discarded |
 * | `CTXD_COMPACT_CONCURRENCY` | 2 | jobs one compactor runs at once |
 * | `CTXD_COMPACT_STORAGE` | `file` | `file` (jobs survive a server restart) or `memory` |
 */
import * as ConfigReference from "@ctxd/config/ConfigReference"
import { Config } from "effect"
import { hostname } from "node:os"
import type * as Plan from "./Plan.ts"

/** The work queue's config. */
export interface QueueConfig {
  /** Empty: `ctxd-compact-<root>`. */
  readonly stream: string
  readonly consumer: string
  readonly ackWaitMs: number
  readonly maxDeliver: number
  readonly duplicateWindowMs: number
  readonly maxAgeMs: number
  readonly concurrency: number
  readonly storage: "file" | "memory"
}

/** Everything the compactor needs (defaults in the module doc and {@link defaults}). */
export interface Config {
  readonly thresholds: Plan.Thresholds
  readonly leaseTtlMs: number
  readonly cooldownMs: number
  readonly cooldownAfterFailures: number
  readonly owner: string
  readonly queue: QueueConfig
}

/** The default owner name: `<hostname>-<pid>`. */
export const defaultOwner = (): string => `${hostname()}-${process.pid}`

/** The defaults. */
export const defaults: Config = {
  thresholds: { compactAtPct: 0.75, softPct: 0.6, tailKeepTokens: 20_000, tailMaxPct: 0.3, minFoldPct: 0.05 },
  leaseTtlMs: 300_000,
  cooldownMs: 600_000,
  cooldownAfterFailures: 3,
  owner: defaultOwner(),
  queue: {
    stream: "",
    consumer: "ctxd-compactor",
    ackWaitMs: 60_000,
    maxDeliver: 20,
    duplicateWindowMs: 120_000,
    maxAgeMs: 3_600_000,
    concurrency: 2,
    storage: "file",
  },
}

const fraction = (name: string, fallback: number, description: string) =>
  Config.number(name).pipe(
    ConfigReference.within({ above: 0, max: 1 }, "must be in (0, 1]"),
    Config.withDescription(description),
    Config.withDefault(fallback),
  )

const integer = (name: string, fallback: number, min: number, description: string) =>
  Config.integer(name).pipe(
    ConfigReference.within({ min }, `must be at least ${min}`),
    Config.withDescription(description),
    Config.withDefault(fallback),
  )

/** {@link Config} from the environment (table in the module doc). */
export const config: Config.Config<Config> = Config.all({
  thresholds: Config.all({
    compactAtPct: fraction(
      "CTXD_COMPACT_AT_PCT",
      defaults.thresholds.compactAtPct,
      "Share of the effective window (context window less max output) at which compaction is due (the job is marked hard); a turn blocks on compaction only when it would exceed the window",
    ),
    softPct: fraction(
      "CTXD_COMPACT_SOFT_PCT",
      defaults.thresholds.softPct,
      "Share of the effective window, by the pre-flight estimate, at which a background compaction is scheduled",
    ),
    tailKeepTokens: integer(
      "CTXD_COMPACT_TAIL_KEEP_TOKENS",
      defaults.thresholds.tailKeepTokens,
      0,
      "Newest tokens a compaction keeps verbatim (capped by CTXD_COMPACT_TAIL_MAX_PCT)",
    ),
    tailMaxPct: fraction(
      "CTXD_COMPACT_TAIL_MAX_PCT",
      defaults.thresholds.tailMaxPct,
      "Largest share of the effective window the kept tail may take",
    ),
    minFoldPct: Config.number("CTXD_COMPACT_MIN_FOLD_PCT").pipe(
      ConfigReference.within({ min: 0, below: 1 }, "must be in [0, 1)"),
      Config.withDescription(
        "Smallest share of the effective window a background compaction folds (the prefix changes rarely, in large steps)",
      ),
      Config.withDefault(defaults.thresholds.minFoldPct),
    ),
  }),
  leaseTtlMs: integer(
    "CTXD_COMPACT_LEASE_TTL_MS",
    defaults.leaseTtlMs,
    100,
    "One compaction per session: the Postgres lease's time to live (database clock), renewed every third of it while the compaction runs; a fencing token per acquire",
  ),
  cooldownMs: integer(
    "CTXD_COMPACT_COOLDOWN_MS",
    defaults.cooldownMs,
    0,
    "How long a session waits before its next compaction attempt after CTXD_COMPACT_COOLDOWN_FAILURES failures in a row",
  ),
  cooldownAfterFailures: integer(
    "CTXD_COMPACT_COOLDOWN_FAILURES",
    defaults.cooldownAfterFailures,
    1,
    "Failed compactions in a row that start a session's cooldown (CTXD_COMPACT_COOLDOWN_MS)",
  ),
  owner: Config.string("CTXD_WORKER_ID").pipe(
    Config.withDescription("This process's name as a lease owner"),
    Config.withDefault(""),
    Config.map((s) => (s.trim() === "" ? defaultOwner() : s.trim())),
  ),
  queue: Config.all({
    stream: Config.string("CTXD_COMPACT_STREAM").pipe(
      Config.withDescription("JetStream stream of the compaction work queue, one per subject root"),
      Config.withDefault(""),
    ),
    consumer: Config.string("CTXD_COMPACT_CONSUMER").pipe(
      Config.withDescription("Durable pull consumer of that stream, shared by every worker's compactor"),
      Config.withDefault(defaults.queue.consumer),
    ),
    ackWaitMs: integer(
      "CTXD_COMPACT_ACK_WAIT_MS",
      defaults.queue.ackWaitMs,
      1_000,
      "A job neither acked nor marked in progress within this is redelivered (a silent compactor)",
    ),
    maxDeliver: integer("CTXD_COMPACT_MAX_DELIVER", defaults.queue.maxDeliver, 1, "Deliveries of one job before JetStream gives up on it"),
    duplicateWindowMs: integer(
      "CTXD_COMPACT_DUPLICATE_WINDOW_MS",
      defaults.queue.duplicateWindowMs,
      1_000,
      "A job for the same session and live summary within this is dropped as a duplicate",
    ),
    maxAgeMs: integer("CTXD_COMPACT_MAX_AGE_MS", defaults.queue.maxAgeMs, 1_000, "Jobs older than this are discarded"),
    concurrency: integer("CTXD_COMPACT_CONCURRENCY", defaults.queue.concurrency, 1, "Compaction jobs one worker runs at once"),
    storage: Config.literal(
      "file",
      "memory",
    )("CTXD_COMPACT_STORAGE").pipe(
      Config.withDescription("Storage of the work queue stream: file (jobs survive a NATS server restart) or memory"),
      Config.withDefault("file" as const),
    ),
  }),
})
