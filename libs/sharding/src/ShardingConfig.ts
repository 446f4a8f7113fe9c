/**
 * The config of one worker's membership and shard leases.
 *
 * Timing: a lease lives `leaseTtlMs` on the database clock from its last
 * renewal; the worker renews every `refreshIntervalMs` (at most a third of
 * the TTL, so two renewals in a row may fail before the lease lapses) and
 * stops serving a shard `safetyMarginMs` before the TTL would end, measured
 * on its own monotonic clock from the moment it sent the renewal (which is
 * before the database stamped it). `2 × refresh + margin < TTL` is required,
 * so that one failed renewal does not make the worker drop and re-take (with
 * a new epoch) shards it still holds.
 */
import { Subjects } from "@ctxd/contracts"
import { Config, type ConfigError, Context, Data, Effect, Layer, Option } from "effect"
import { randomBytes } from "node:crypto"
import { hostname } from "node:os"
import * as ShardId from "./ShardId.ts"

/** What a worker may set; every field has a default. */
export interface ShardingOptions {
  /**
   * This worker's id, unique per process start (a restarted process is a new
   * worker): `[A-Za-z0-9_-]{1,128}` so it fits a NATS subject token. Default
   * `<hostname>-<pid>-<6 random hex>`, cleaned to that alphabet.
   */
  readonly workerId?: string | undefined
  /** How others reach this worker directly (its NATS subject); default the worker id. */
  readonly address?: string | undefined
  /** Shards in the cluster, fixed for its life; default 256. */
  readonly shards?: number | undefined
  /** Lease (and membership) time to live, on the database clock; default 15,000 ms. */
  readonly leaseTtlMs?: number | undefined
  /** How often leases are renewed and the heartbeat written; default a third of the TTL. */
  readonly refreshIntervalMs?: number | undefined
  /** How long before the TTL ends a worker stops serving a shard it could not renew; default a fifth of the TTL. */
  readonly safetyMarginMs?: number | undefined
}

/** The resolved config: the options with their defaults filled in. */
export interface Config {
  readonly workerId: string
  readonly address: string
  readonly shards: number
  readonly leaseTtlMs: number
  readonly refreshIntervalMs: number
  readonly safetyMarginMs: number
}

/** The options are inconsistent (see the module doc); the worker must not start. */
export class InvalidShardingConfig extends Data.TaggedError("InvalidShardingConfig")<{
  readonly message: string
}> {}

/** The config of this worker. */
export class ShardingConfig extends Context.Tag("@ctxd/sharding/ShardingConfig")<ShardingConfig, Config>() {}

/** A fresh worker id: `<hostname>-<pid>-<6 random hex>` in `[A-Za-z0-9_-]`, at most 128 characters. */
export const defaultWorkerId = (): string => {
  const host =
    hostname()
      .replace(/[^A-Za-z0-9_-]+/g, "_")
      .slice(0, 100) || "worker"
  return `${host}-${process.pid}-${randomBytes(3).toString("hex")}`
}

/** Fills in the defaults and checks the options. */
export const make = (options: ShardingOptions = {}): Effect.Effect<Config, InvalidShardingConfig> =>
  Effect.suspend(() => {
    const workerId = options.workerId ?? defaultWorkerId()
    const shards = options.shards ?? ShardId.DEFAULT_SHARDS
    const leaseTtlMs = options.leaseTtlMs ?? 15_000
    const refreshIntervalMs = options.refreshIntervalMs ?? Math.floor(leaseTtlMs / 3)
    const safetyMarginMs = options.safetyMarginMs ?? Math.floor(leaseTtlMs / 5)
    const invalid = (message: string) => Effect.fail(new InvalidShardingConfig({ message }))
    if (!Subjects.isValidToken(workerId)) return invalid(`worker id ${JSON.stringify(workerId)}: use 1-128 of [A-Za-z0-9_-]`)
    if (!ShardId.isValidCount(shards)) return invalid(`shards must be an integer from 1 to ${ShardId.MAX_SHARDS}, got ${shards}`)
    if (!Number.isInteger(leaseTtlMs) || leaseTtlMs < 30) return invalid(`lease TTL must be at least 30 ms, got ${leaseTtlMs}`)
    if (refreshIntervalMs < 1 || refreshIntervalMs * 3 > leaseTtlMs) {
      return invalid(`refresh interval must be from 1 ms to a third of the lease TTL (${leaseTtlMs} ms), got ${refreshIntervalMs}`)
    }
    if (safetyMarginMs < 0 || 2 * refreshIntervalMs + safetyMarginMs >= leaseTtlMs) {
      return invalid(`need 2 × refresh interval + safety margin < lease TTL: 2 × ${refreshIntervalMs} + ${safetyMarginMs} >= ${leaseTtlMs}`)
    }
    return Effect.succeed({
      workerId,
      address: options.address ?? workerId,
      shards,
      leaseTtlMs,
      refreshIntervalMs,
      safetyMarginMs,
    })
  })

/** The config for explicit options. */
export const layer = (options: ShardingOptions = {}): Layer.Layer<ShardingConfig, InvalidShardingConfig> =>
  Layer.effect(ShardingConfig, make(options))

/**
 * Options from the environment: `CTXD_WORKER_ID` (default generated),
 * `CTXD_WORKER_ADDRESS` (default the worker id), `CTXD_SHARDS` (default 256),
 * `CTXD_LEASE_TTL_MS` (default 15,000), `CTXD_LEASE_REFRESH_MS` (default a
 * third of the TTL) and `CTXD_LEASE_MARGIN_MS` (default a fifth of the TTL).
 */
export const config: Config.Config<ShardingOptions> = Config.all({
  workerId: Config.option(Config.string("CTXD_WORKER_ID").pipe(Config.withDescription("This worker's id, unique per process start"))),
  address: Config.option(
    Config.string("CTXD_WORKER_ADDRESS").pipe(
      Config.withDescription("The prefix of this worker's direct subjects, as the other workers reach it"),
    ),
  ),
  shards: Config.integer("CTXD_SHARDS").pipe(
    Config.withDescription(
      "Shards sessions are hashed to; fixed for the life of a cluster (a worker configured otherwise refuses to start)",
    ),
    Config.withDefault(ShardId.DEFAULT_SHARDS),
  ),
  leaseTtlMs: Config.integer("CTXD_LEASE_TTL_MS").pipe(
    Config.withDescription("Shard lease and membership time to live, on the database clock"),
    Config.withDefault(15_000),
  ),
  refreshIntervalMs: Config.option(
    Config.integer("CTXD_LEASE_REFRESH_MS").pipe(Config.withDescription("Lease renewal and heartbeat interval (at most TTL / 3)")),
  ),
  safetyMarginMs: Config.option(
    Config.integer("CTXD_LEASE_MARGIN_MS").pipe(
      Config.withDescription(
        "A worker that cannot renew stops serving this long before its leases could expire (2 × refresh + margin < CTXD_LEASE_TTL_MS)",
      ),
    ),
  ),
}).pipe(
  Config.map((c) => ({
    workerId: Option.getOrUndefined(c.workerId),
    address: Option.getOrUndefined(c.address),
    shards: c.shards,
    leaseTtlMs: c.leaseTtlMs,
    refreshIntervalMs: Option.getOrUndefined(c.refreshIntervalMs),
    safetyMarginMs: Option.getOrUndefined(c.safetyMarginMs),
  })),
)

/** The config read by {@link config}. */
export const layerConfig: Layer.Layer<ShardingConfig, ConfigError.ConfigError | InvalidShardingConfig> = Layer.effect(
  ShardingConfig,
  Effect.flatMap(config, make),
)
