/**
 * The workers of the cluster, in `ctxd_workers`.
 *
 * Joining first checks the cluster's shard count
 * ({@link ShardId.claimShardCount}): a worker configured with another count
 * fails with {@link ShardId.ShardCountMismatch} before it is ever seen as
 * live (others would otherwise start handing shards to it).
 *
 * A worker registers when its layer is built (an upsert: a row left behind
 * by a crashed process with the same id is taken over), heartbeats every
 * refresh interval, and deletes its row when its scope closes. It is live
 * while its last heartbeat is within the lease TTL, judged by the database
 * clock (`heartbeat_at > now() - ttl`), never by any worker's own clock.
 * Rows silent for {@link PRUNE_AFTER_TTLS} TTLs are deleted by whichever
 * worker notices first.
 *
 * An `Effect.Service`: one implementation; tests build several, each on its
 * own {@link ShardingConfig.ShardingConfig} and {@link Database.Database}.
 */
import { Database } from "@ctxd/db"
import { Duration, Effect, Schedule } from "effect"
import * as Sql from "./internal/sql.ts"
import * as ShardId from "./ShardId.ts"
import { ShardingConfig } from "./ShardingConfig.ts"

/** A worker as others see it. */
export interface Worker {
  readonly id: string
  /** How to reach it directly (its NATS subject). */
  readonly address: string
}

/** Rows of workers silent for this many TTLs are deleted: 20. */
export const PRUNE_AFTER_TTLS = 20

// Deregistering on shutdown should not hold the process up when Postgres is gone.
const DEREGISTER_TIMEOUT = Duration.seconds(5)

/** This worker's registration and the live workers. Needs a migrated {@link Database.Database}. */
export class Membership extends Effect.Service<Membership>()("@ctxd/sharding/Membership", {
  scoped: Effect.gen(function* () {
    const db = yield* Database.Database
    const config = yield* ShardingConfig
    const self: Worker = { id: config.workerId, address: config.address }
    const interval = Duration.millis(config.refreshIntervalMs)
    yield* ShardId.claimShardCount(db, config.shards)

    const heartbeat = db.query(Sql.HEARTBEAT, [self.id, self.address])
    yield* Effect.acquireRelease(heartbeat, () =>
      db.query(Sql.DEREGISTER, [self.id]).pipe(
        Effect.timeout(DEREGISTER_TIMEOUT),
        Effect.catchAllCause((cause) => Effect.logWarning("could not deregister", cause)),
        Effect.annotateLogs({ worker: self.id }),
      ),
    )

    yield* heartbeat.pipe(
      Effect.zipRight(db.query(Sql.PRUNE, [config.leaseTtlMs * PRUNE_AFTER_TTLS])),
      Effect.timeout(interval),
      Effect.catchAllCause((cause) => Effect.logWarning("heartbeat failed", cause)),
      Effect.repeat(Schedule.fixed(interval)),
      Effect.annotateLogs({ worker: self.id, loop: "heartbeat" }),
      Effect.forkScoped,
    )

    /** The live workers (this one included while its heartbeats land), by id. */
    const live: Effect.Effect<ReadonlyArray<Worker>, Database.DatabaseUnavailable | Database.DatabaseError> = db
      .query<{ id: string; address: string }>(Sql.LIVE, [config.leaseTtlMs])
      .pipe(Effect.map(({ rows }) => rows.map((row) => ({ id: row.id, address: row.address }))))

    return { self, live } as const
  }),
}) {}

/** The registration; needs a migrated {@link Database.Database} and the {@link ShardingConfig.ShardingConfig}. */
export const layer = Membership.Default
