/**
 * A throwaway Postgres schema per test file: `t_<12 hex>` is created in
 * `DATABASE_URL`'s database (default
 * `postgresql://postgres@127.0.0.1:5432/postgres`) and dropped `CASCADE`
 * when the scope closes, so test files can run in parallel against one
 * database without seeing each other's tables.
 */
import { Database } from "@ctxd/db"
import { Config, type ConfigError, Effect, Layer, type Scope } from "effect"
import { randomBytes } from "node:crypto"

/** Where the throwaway schema lives. */
export interface TestSchema {
  readonly url: string
  readonly schema: string
}

const url = Config.string("DATABASE_URL").pipe(Config.withDefault("postgresql://postgres@127.0.0.1:5432/postgres"))

/** Creates a unique schema; drops it (`CASCADE`) when the scope closes. */
export const make: Effect.Effect<TestSchema, Database.DatabaseUnavailable | Database.DatabaseError | ConfigError.ConfigError, Scope.Scope> =
  Effect.gen(function* () {
    const databaseUrl = yield* url
    const schema = `t_${randomBytes(6).toString("hex")}`
    const admin = yield* Database.make({ url: databaseUrl, poolMax: 1, connectTimeoutMs: 5_000 })
    yield* Effect.acquireRelease(admin.query(`CREATE SCHEMA ${schema}`), () =>
      admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).pipe(
        Effect.timeout("10 seconds"),
        Effect.catchAll((error) => Effect.logWarning(`could not drop test schema ${schema}: ${String(error)}`)),
      ),
    )
    return { url: databaseUrl, schema }
  })

/** A {@link Database.Database} on a fresh schema (not migrated), dropped with the layer. */
export const layer: Layer.Layer<Database.Database, Database.DatabaseUnavailable | Database.DatabaseError | ConfigError.ConfigError> =
  Layer.scoped(
    Database.Database,
    Effect.flatMap(make, ({ url, schema }) => Database.make({ url, schema })),
  )
