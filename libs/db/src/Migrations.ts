/**
 * Versioned schema migrations, kept in code and applied at start.
 *
 * All pending migrations run in one transaction that first takes
 * `pg_advisory_xact_lock(lockKey(schema))`, so workers starting together
 * queue on the lock and the later ones find nothing left to do; a migration
 * that fails rolls back every one applied with it. Applied versions are
 * recorded in `ctxd_schema_migrations`. Versions the code does not know
 * (written by a newer release during a rolling deploy) are left alone.
 *
 * Rules for new migrations: append with the next version, never edit one
 * that has shipped, and keep them additive (old workers keep running
 * against the new schema until they are replaced).
 */
import { Effect, Layer } from "effect"
import { hash } from "node:crypto"
import { Database, type DatabaseError, type DatabaseUnavailable } from "./Database.ts"

/** One schema change. */
export interface Migration {
  readonly version: number
  readonly name: string
  /** One or more statements, run with the simple protocol (no parameters). */
  readonly sql: string
}

/** Every migration, in version order. */
export const migrations: ReadonlyArray<Migration> = [
  {
    version: 1,
    name: "sessions, messages, turns",
    sql: `
      CREATE TABLE ctxd_sessions (
        id bigserial PRIMARY KEY,
        tenant text NOT NULL,
        session text NOT NULL,
        last_seq integer NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (tenant, session)
      );
      CREATE TABLE ctxd_messages (
        session_id bigint NOT NULL REFERENCES ctxd_sessions (id) ON DELETE CASCADE,
        seq integer NOT NULL,
        role text NOT NULL,
        content jsonb NOT NULL,
        tokens integer NOT NULL,
        encoding text NOT NULL,
        turn_id text,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (session_id, seq)
      );
      CREATE TABLE ctxd_turns (
        session_id bigint NOT NULL REFERENCES ctxd_sessions (id) ON DELETE CASCADE,
        turn_id text NOT NULL,
        request_hash text NOT NULL,
        first_seq integer NOT NULL,
        last_seq integer NOT NULL,
        reply jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (session_id, turn_id)
      );
    `,
  },
  {
    version: 2,
    name: "workers, shard leases, cluster settings",
    // Times are the database clock's (now()); a worker's own clock never
    // decides a lease. Lease rows are seeded per shard by @ctxd/sharding once
    // the cluster's shard count is known (it is stored in ctxd_cluster).
    sql: `
      CREATE TABLE ctxd_workers (
        id text PRIMARY KEY,
        address text NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now(),
        heartbeat_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE TABLE ctxd_shard_leases (
        shard integer PRIMARY KEY CHECK (shard >= 0),
        owner text,
        epoch bigint NOT NULL DEFAULT 0,
        expires_at timestamptz
      );
      CREATE TABLE ctxd_cluster (
        key text PRIMARY KEY,
        value text NOT NULL
      );
    `,
  },
]

/** The advisory lock key for migrating `schema`: the first 8 bytes of SHA-1(`ctxd/migrations/<schema>`), signed. */
export const lockKey = (schema: string): bigint =>
  hash("sha1", `ctxd/migrations/${schema}`, "buffer").readBigInt64BE(0)

const TABLE = `
  CREATE TABLE IF NOT EXISTS ctxd_schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`

/**
 * Applies the migrations of `list` not yet recorded, in version order, in one
 * transaction under the schema's advisory lock. Returns the versions applied
 * by this call (empty when the schema was up to date).
 */
export const apply = (
  list: ReadonlyArray<Migration>,
): Effect.Effect<ReadonlyArray<number>, DatabaseUnavailable | DatabaseError, Database> =>
  Effect.gen(function* () {
    const db = yield* Database
    const applied = yield* db.transaction((tx) =>
      Effect.gen(function* () {
        // a migration may legitimately take longer than a turn's statement
        yield* tx.query("SET LOCAL statement_timeout = 0")
        yield* tx.query("SELECT pg_advisory_xact_lock($1::bigint)", [lockKey(db.schema).toString()])
        yield* tx.query(TABLE)
        const { rows } = yield* tx.query<{ version: number }>("SELECT version FROM ctxd_schema_migrations")
        const done = new Set(rows.map((row) => row.version))
        const pending = [...list].filter((m) => !done.has(m.version)).sort((a, b) => a.version - b.version)
        for (const migration of pending) {
          yield* tx.query(migration.sql)
          yield* tx.query("INSERT INTO ctxd_schema_migrations (version, name) VALUES ($1, $2)", [
            migration.version,
            migration.name,
          ])
        }
        const newest = Math.max(0, ...list.map((m) => m.version))
        const unknown = rows.filter((row) => row.version > newest).map((row) => row.version)
        if (unknown.length > 0) {
          yield* Effect.logWarning(`schema ${db.schema} has migrations newer than this release: ${unknown.join(", ")}`)
        }
        return pending.map((m) => m.version)
      }),
    )
    if (applied.length > 0) {
      yield* Effect.logInfo(`schema ${db.schema}: applied migrations ${applied.join(", ")}`)
    }
    return applied
  })

/** Applies {@link migrations}. */
export const run: Effect.Effect<ReadonlyArray<number>, DatabaseUnavailable | DatabaseError, Database> =
  apply(migrations)

/** Runs {@link run} when built; provide it before anything that uses the tables. */
export const layer: Layer.Layer<never, DatabaseUnavailable | DatabaseError, Database> = Layer.effectDiscard(run)
