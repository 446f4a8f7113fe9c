/**
 * Versioned schema migrations: one plain SQL file each in `libs/db/migrations`
 * (`NNNN_name.sql`, the version zero-padded), applied at start.
 *
 * All pending migrations run in one transaction that first takes
 * `pg_advisory_xact_lock(lockKey(schema))`, so workers starting together
 * queue on the lock and the later ones find nothing left to do; a migration
 * that fails rolls back every one applied with it. Applied versions are
 * recorded in `ctxd_schema_migrations` with the SHA-256 of their file; a
 * recorded checksum that differs from the file's refuses the start
 * ({@link MigrationChecksumMismatch}): an applied migration was edited. Versions
 * the files do not hold (written by a newer release during a rolling deploy)
 * are left alone.
 *
 * Rules for new migrations: add a file with the next version, never edit one
 * that has shipped, and keep them additive (old workers keep running against
 * the new schema until they are replaced).
 */
import { Data, Effect, Layer } from "effect"
import { hash } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { Database, type DatabaseError, type DatabaseUnavailable } from "./Database.ts"

/** One schema change: one file of {@link directory}. */
export interface Migration {
  readonly version: number
  /** The file's first line (`-- <name>`), recorded as the migration's name; the file name when it has none. */
  readonly name: string
  /** The file name, e.g. `0001_sessions_messages_turns.sql`. */
  readonly file: string
  /** The whole file: one or more statements, run with the simple protocol (no parameters). */
  readonly sql: string
  /** SHA-256 of the file's bytes, hex. */
  readonly checksum: string
}

/** An applied migration whose file no longer matches the checksum recorded when it was applied. */
export class MigrationChecksumMismatch extends Data.TaggedError("MigrationChecksumMismatch")<{
  readonly version: number
  readonly file: string
  readonly recorded: string
  readonly actual: string
}> {
  override get message(): string {
    return (
      `migration ${this.file} (version ${this.version}) was edited after it was applied: ` +
      `recorded sha256 ${this.recorded}, the file's ${this.actual}; restore the file and add a new migration instead`
    )
  }
}

/** The directory of the migration files, resolved from this module so it holds wherever the package is. */
export const directory: string = join(import.meta.dirname, "..", "migrations")

const FILE_NAME = /^(\d{4})_[a-z0-9_]+\.sql$/

/** SHA-256 of `content` (a string counts as its UTF-8 bytes), hex. */
export const checksumOf = (content: string | Uint8Array): string => hash("sha256", content, "hex")

/** The migration in `file` (a name like `0007_session_lengths.sql`) holding `content`. */
export const make = (file: string, content: string | Uint8Array): Migration => {
  const matched = FILE_NAME.exec(file)
  if (matched === null) throw new Error(`migration file name ${file} is not NNNN_lowercase_name.sql`)
  const sql = typeof content === "string" ? content : Buffer.from(content).toString("utf8")
  const named = /^-- (.+)$/.exec(sql.split("\n", 1)[0] ?? "")
  return {
    version: Number(matched[1]),
    name: named?.[1]?.trim() ?? file.slice(0, -".sql".length),
    file,
    sql,
    checksum: checksumOf(content),
  }
}

/**
 * The migrations of `dir` (default {@link directory}), in version order.
 * Throws when a `.sql` file is misnamed or the versions are not 1, 2, 3, ...
 * without gaps: a packaging mistake that must stop the start, not skip a migration.
 */
export const load = (dir: string = directory): ReadonlyArray<Migration> => {
  const list = readdirSync(dir)
    .filter((file) => file.endsWith(".sql"))
    .map((file) => make(file, readFileSync(join(dir, file))))
    .sort((a, b) => a.version - b.version)
  list.forEach((m, i) => {
    if (m.version !== i + 1) throw new Error(`migration ${m.file} in ${dir}: expected version ${i + 1}`)
  })
  return list
}

/** Every migration, in version order, read from {@link directory} when this module loads. */
export const migrations: ReadonlyArray<Migration> = load()

/** The advisory lock key for migrating `schema`: the first 8 bytes of SHA-1(`ctxd/migrations/<schema>`), signed. */
export const lockKey = (schema: string): bigint => hash("sha1", `ctxd/migrations/${schema}`, "buffer").readBigInt64BE(0)

// Releases before the files created the table without `checksum` and still
// insert (version, name) only: the column stays nullable so their workers keep
// migrating beside this one, and a null is filled in by the next start here.
const TABLE = `
  CREATE TABLE IF NOT EXISTS ctxd_schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    checksum text
  )`
const CHECKSUM_COLUMN = "ALTER TABLE ctxd_schema_migrations ADD COLUMN IF NOT EXISTS checksum text"

/**
 * Applies the migrations of `list` not yet recorded, in version order, in one
 * transaction under the schema's advisory lock. Returns the versions applied
 * by this call (empty when the schema was up to date).
 *
 * Before applying anything it compares the checksum recorded for each
 * applied migration of `list` with the file's, and fails with
 * {@link MigrationChecksumMismatch} (nothing applied) on the first that
 * differs. Applied migrations recorded without a checksum (by a release
 * before the files, whose statements the files hold unchanged) get the
 * file's recorded.
 */
export const apply = (
  list: ReadonlyArray<Migration>,
): Effect.Effect<ReadonlyArray<number>, DatabaseUnavailable | DatabaseError | MigrationChecksumMismatch, Database> =>
  Effect.gen(function* () {
    const db = yield* Database
    const { applied, backfilled } = yield* db.transaction((tx) =>
      Effect.gen(function* () {
        // a migration may legitimately take longer than a turn's statement
        yield* tx.query("SET LOCAL statement_timeout = 0")
        yield* tx.query("SELECT pg_advisory_xact_lock($1::bigint)", [lockKey(db.schema).toString()])
        yield* tx.query(TABLE)
        yield* tx.query(CHECKSUM_COLUMN)
        const { rows } = yield* tx.query<{ version: number; checksum: string | null }>(
          "SELECT version, checksum FROM ctxd_schema_migrations",
        )
        const recorded = new Map(rows.map((row) => [row.version, row.checksum]))
        const sorted = [...list].sort((a, b) => a.version - b.version)
        for (const m of sorted) {
          const checksum = recorded.get(m.version)
          if (checksum !== undefined && checksum !== null && checksum !== m.checksum) {
            return yield* new MigrationChecksumMismatch({ version: m.version, file: m.file, recorded: checksum, actual: m.checksum })
          }
        }
        const backfill = sorted.filter((m) => recorded.get(m.version) === null)
        if (backfill.length > 0) {
          yield* tx.query(
            `UPDATE ctxd_schema_migrations m SET checksum = f.checksum
             FROM unnest($1::integer[], $2::text[]) AS f (version, checksum)
             WHERE m.version = f.version AND m.checksum IS NULL`,
            [backfill.map((m) => m.version), backfill.map((m) => m.checksum)],
          )
        }
        const pending = sorted.filter((m) => !recorded.has(m.version))
        for (const migration of pending) {
          yield* tx.query(migration.sql)
          yield* tx.query("INSERT INTO ctxd_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)", [
            migration.version,
            migration.name,
            migration.checksum,
          ])
        }
        const newest = Math.max(0, ...list.map((m) => m.version))
        const unknown = rows.filter((row) => row.version > newest).map((row) => row.version)
        if (unknown.length > 0) {
          yield* Effect.logWarning(`schema ${db.schema} has migrations newer than this release: ${unknown.join(", ")}`)
        }
        return { applied: pending.map((m) => m.version), backfilled: backfill.map((m) => m.version) }
      }),
    )
    if (backfilled.length > 0) {
      yield* Effect.logInfo(`schema ${db.schema}: recorded the checksums of migrations ${backfilled.join(", ")}`)
    }
    if (applied.length > 0) {
      yield* Effect.logInfo(`schema ${db.schema}: applied migrations ${applied.join(", ")}`)
    }
    return applied
  })

/** Applies {@link migrations}. */
export const run: Effect.Effect<ReadonlyArray<number>, DatabaseUnavailable | DatabaseError | MigrationChecksumMismatch, Database> = apply(
  migrations,
)

/** Runs {@link run} when built; provide it before anything that uses the tables. */
export const layer: Layer.Layer<never, DatabaseUnavailable | DatabaseError | MigrationChecksumMismatch, Database> = Layer.effectDiscard(run)
