/** What the shard leases tell their users: the service, a shard owned, a change of ownership, the status. */
import type { Database, SessionStore } from "@ctxd/db"
import type { Effect, Option, Stream } from "effect"
import type { Worker } from "../Membership.ts"

/** A shard this worker owns, with its lease epoch. */
export interface OwnedShard {
  readonly shard: number
  readonly epoch: number
}

/** This worker started (`Acquired`) or stopped (`Lost`) owning a shard. */
export interface ShardChange {
  readonly _tag: "Acquired" | "Lost"
  readonly shard: number
  readonly epoch: number
}

/** The service. */
export interface ShardLeasesService {
  /** This worker. */
  readonly self: Worker
  /** Shards in the cluster. */
  readonly shards: number
  /** The shard of a session ({@link ShardId.of} with this cluster's count). */
  readonly shardOf: (tenant: string, session: string) => number
  /** Whether this worker owns `shard` now: leased and within the local validity. */
  readonly isOwner: (shard: number) => Effect.Effect<boolean>
  /** {@link isOwner} as a plain call (on the clock the service was made with). */
  readonly isOwnerNow: (shard: number) => boolean
  /** The lease to pass to `SessionStore.commitTurn` as `fence`, while this worker owns `shard`. */
  readonly fence: (shard: number) => Effect.Effect<Option.Option<SessionStore.Fence & { readonly epoch: number }>>
  /** The shards this worker owns now, ascending. */
  readonly ownedShards: Effect.Effect<ReadonlyArray<OwnedShard>>
  /**
   * Where to send a request for `shard`, from the last round: this worker if
   * it owns it, else the live holder of the lease, else the worker it is
   * assigned to (which takes it within a refresh interval). None before any
   * round has read the workers. The worker named may still answer "not owner"
   * during a handover: retry with backoff.
   */
  readonly owner: (shard: number) => Effect.Effect<Option.Option<Worker>>
  /**
   * Ownership changes, starting with an `Acquired` for every shard owned when
   * the stream is run. `Acquired` may repeat for a shard already announced;
   * `Lost` comes when a round loses a shard or at most a quarter refresh
   * interval after its local validity ends (`isOwner` is exact, this is not).
   */
  readonly changes: Stream.Stream<ShardChange>
  /** Runs one round now (the loop runs one every refresh interval). */
  readonly refresh: Effect.Effect<void, Database.DatabaseUnavailable | Database.DatabaseError>
  /**
   * A hint that this worker may have to take a shard over now (another
   * worker sent it a turn of a shard it does not own): runs a round unless a
   * hinted one ran within a quarter refresh interval, or the last round
   * failed (cut off from Postgres, a round would not help); concurrent
   * callers wait for the same round. Never fails.
   */
  readonly refreshSoon: Effect.Effect<void>
  /**
   * Reports that `worker` did not answer on its NATS subject (no responders).
   * If its heartbeat is also older than the refresh interval plus the safety
   * margin, it is declared dead (membership row deleted, leases expired) and
   * a round runs now; when another worker declared it dead before, a round
   * runs now too. True when this worker's view changed. Checked at most once
   * per quarter refresh interval per worker; never fails.
   */
  readonly unreachable: (worker: string) => Effect.Effect<boolean>
  /**
   * For readiness probes and gauges: `joined` while the last successful
   * lease round is recent enough that the leases it renewed are still valid
   * and listed this worker as live; `assigned`: the shards the current
   * assignment gives this worker; `owned`: the shards it owns now;
   * `missing`: assigned shards it does not own yet (a handover in progress).
   */
  readonly status: Effect.Effect<ShardStatus>
}

/** See {@link ShardLeasesService.status}. */
export interface ShardStatus {
  readonly joined: boolean
  readonly assigned: number
  readonly owned: number
  readonly missing: number
}
