/**
 * Several workers in one test process, each with its own pool on one
 * throwaway schema, its own scope (stop = graceful shutdown) and a switch
 * that cuts it off from Postgres (every statement then fails as
 * `DatabaseUnavailable`, as if the network were gone; nothing it does
 * reaches the database again, finalizers included: a crash, seen from the
 * cluster).
 */
import { Database, Migrations } from "@ctxd/db"
import { TestDatabase } from "@ctxd/testing"
import { Context, Duration, Effect, Exit, Layer, Schedule, Scope } from "effect"
import { Membership, ShardingConfig, ShardLeases } from "../../src/index.ts"

/** A running worker. */
export interface TestWorker {
  readonly leases: ShardLeases.ShardLeases
  readonly membership: Membership.Membership
  /** Graceful shutdown: closes its scope. */
  readonly stop: Effect.Effect<void>
  /** Cuts it off from Postgres for good. */
  readonly cut: Effect.Effect<void>
}

/** The timing every test uses: TTL 1.5 s, so refresh 500 ms and margin 300 ms by default. */
export const TTL_MS = 1_500

/** A Database that forwards to `db` until `cut`. */
export const cuttable = (db: Database.DatabaseService) => {
  let down = false
  const unavailable = Effect.suspend(() => Effect.fail(new Database.DatabaseUnavailable({ message: "cut off from Postgres (test)" })))
  // decided when run, not when built: services build a statement once and rerun it
  const service: Database.DatabaseService = {
    schema: db.schema,
    query: (sql, params) => Effect.suspend(() => (down ? unavailable : db.query(sql, params))),
    transaction: (f) => Effect.suspend(() => (down ? unavailable : db.transaction(f))),
    poolStats: db.poolStats,
  }
  return { service, cut: Effect.sync(() => void (down = true)) }
}

/** A migrated throwaway schema and a pool on it (for looking at the tables). */
export const cluster = Effect.gen(function* () {
  const { url, schema } = yield* TestDatabase.make
  const db = yield* Database.make({ url, schema, poolMax: 2 })
  yield* Migrations.run.pipe(Effect.provideService(Database.Database, db))

  /** Starts a worker; it is stopped (if still running) when the test's scope closes. */
  const start = (options: ShardingConfig.ShardingOptions) =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
      const pool = yield* Database.make({ url, schema, poolMax: 3 }).pipe(Scope.extend(scope))
      const link = cuttable(pool)
      const context = yield* ShardLeases.layer.pipe(
        Layer.provide(ShardingConfig.layer({ leaseTtlMs: TTL_MS, ...options })),
        Layer.provide(Layer.succeed(Database.Database, link.service)),
        Layer.buildWithScope(scope),
        Effect.onError(() => Scope.close(scope, Exit.void)),
      )
      return {
        leases: Context.get(context, ShardLeases.ShardLeases),
        membership: Context.get(context, Membership.Membership),
        stop: Scope.close(scope, Exit.void),
        cut: link.cut,
      } satisfies TestWorker
    })

  return { db, start }
})

/**
 * Runs `check` every 25 ms until it returns true; fails after `withinMs`.
 * Returns the milliseconds it took.
 */
export const eventually = <E, R>(
  check: Effect.Effect<boolean, E, R>,
  withinMs: number,
  what: string,
): Effect.Effect<number, E | Error, R> =>
  Effect.gen(function* () {
    const started = Date.now()
    yield* check.pipe(
      Effect.repeat({ until: (ok) => ok, schedule: Schedule.spaced(Duration.millis(25)) }),
      Effect.timeoutFail({ duration: Duration.millis(withinMs), onTimeout: () => new Error(`not within ${withinMs} ms: ${what}`) }),
    )
    return Date.now() - started
  })

/** The owned shard numbers of a worker. */
export const shardsOf = (worker: TestWorker) => Effect.map(worker.leases.ownedShards, (owned) => owned.map((o) => o.shard))
