/**
 * The running worker's readiness checks (`/readyz`, see `WorkerStatus`):
 *
 * - `nats`: the connection is up (not disconnected, draining or closed);
 * - `postgres`: `select 1` on the worker's pool answers within
 *   {@link defaults.postgresTimeoutMs}; the answer is cached for
 *   {@link defaults.postgresCacheMs}, so probes cost at most one query per
 *   interval however often they come;
 * - `cluster`: the worker has joined (its last lease round is recent and
 *   its leases valid) and owns every shard the assignment gives it (a
 *   handover in progress shows as missing shards for a round or two).
 */
import type { Database } from "@ctxd/db"
import { NatsClient } from "@ctxd/nats"
import type { ShardLeases } from "@ctxd/sharding"
import { Duration, Effect } from "effect"
import type * as WorkerStatus from "./WorkerStatus.ts"

/** Bounds of the checks. */
export const defaults = {
  /** Longest the Postgres check waits for `select 1`. Default 1,000 ms. */
  postgresTimeoutMs: 1_000,
  /** How long a Postgres check's answer is reused. Default 2,000 ms. */
  postgresCacheMs: 2_000,
} as const

/** The checks, over the worker's connections. */
export const make = (sources: {
  readonly nats: NatsClient.NatsClientService
  readonly db: Database.DatabaseService
  readonly leases: ShardLeases.ShardLeasesService
}): Effect.Effect<Effect.Effect<Readonly<Record<string, WorkerStatus.Check>>>> =>
  Effect.gen(function* () {
    const postgres = yield* Effect.cachedWithTTL(
      sources.db.query("select 1").pipe(
        Effect.timeout(Duration.millis(defaults.postgresTimeoutMs)),
        Effect.as<WorkerStatus.Check>({ ok: true }),
        Effect.catchAllCause(() => Effect.succeed<WorkerStatus.Check>({ ok: false, detail: "select 1 failed or timed out" })),
      ),
      Duration.millis(defaults.postgresCacheMs),
    )
    const nats = Effect.sync((): WorkerStatus.Check => {
      const ok = NatsClient.isConnected(sources.nats)
      return ok ? { ok } : { ok, detail: sources.nats.connection.isClosed() ? "closed" : "disconnected" }
    })
    const cluster = Effect.map(sources.leases.status, (s): WorkerStatus.Check => ({
      ok: s.joined && s.missing === 0,
      detail: `${s.joined ? "joined" : "not joined"}; owns ${s.owned} shards, ${s.assigned - s.missing} of ${s.assigned} assigned`,
    }))
    return Effect.map(Effect.all([nats, postgres, cluster], { concurrency: "unbounded" }), ([n, p, c]) => ({
      nats: n,
      postgres: p,
      cluster: c,
    }))
  })
