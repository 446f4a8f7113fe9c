/**
 * The migrator of the releases before the migration files, for upgrade tests:
 * their migrations read from git history (the newest commit whose
 * `libs/db/src/Migrations.ts` still lists them in code) and applied as that
 * migrator did, plus a catalog dump to compare the schemas two migrators built.
 */
import { runInNewContext } from "node:vm"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { Database, Migrations } from "../src/index.ts"

/** A migration as the releases before the files listed it. */
export interface LegacyMigration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

const root = join(import.meta.dirname, "..", "..", "..")
const git = (...args: ReadonlyArray<string>) =>
  execFileSync("git", ["-C", root, ...args], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024, stdio: ["ignore", "pipe", "pipe"] })

const START = "export const migrations: ReadonlyArray<Migration> = ["

/**
 * The migrations of the newest commit that kept them in code, with that
 * commit, or why they cannot be had (no git here, a shallow clone).
 * The list is a plain literal (template strings without substitutions), so
 * it is evaluated as one without loading that release's module.
 */
export const fromGit = (): { readonly commit: string; readonly migrations: ReadonlyArray<LegacyMigration> } | { readonly skip: string } => {
  let commits: ReadonlyArray<string>
  try {
    commits = git("log", "--first-parent", "--format=%H", "-n", "50", "HEAD", "--", "libs/db/src/Migrations.ts").split("\n").filter(Boolean)
  } catch (error) {
    return { skip: `no git history here (${String(error).split("\n")[0]})` }
  }
  for (const commit of commits) {
    const source = git("show", `${commit}:libs/db/src/Migrations.ts`)
    const start = source.indexOf(START)
    if (start < 0) continue
    const end = source.indexOf("\n]\n", start)
    const literal = source.slice(start + START.length - 1, end + 2)
    if (literal.includes("${")) return { skip: `the migrations of ${commit.slice(0, 12)} are not a plain literal` }
    const migrations = runInNewContext(`(${literal})`) as ReadonlyArray<LegacyMigration>
    return { commit, migrations }
  }
  return { skip: "no commit in the last 50 that changed Migrations.ts lists the migrations in code" }
}

/** Applies `list` as the releases before the files did: their bookkeeping table (no checksum), one transaction, the same lock. */
export const apply = (list: ReadonlyArray<LegacyMigration>) =>
  Effect.flatMap(Database.Database, (db) =>
    db.transaction((tx) =>
      Effect.gen(function* () {
        yield* tx.query("SET LOCAL statement_timeout = 0")
        yield* tx.query("SELECT pg_advisory_xact_lock($1::bigint)", [Migrations.lockKey(db.schema).toString()])
        yield* tx.query(`
          CREATE TABLE IF NOT EXISTS ctxd_schema_migrations (
            version integer PRIMARY KEY,
            name text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
          )`)
        const { rows } = yield* tx.query<{ version: number }>("SELECT version FROM ctxd_schema_migrations")
        const done = new Set(rows.map((row) => row.version))
        for (const m of list.filter((m) => !done.has(m.version))) {
          yield* tx.query(m.sql)
          yield* tx.query("INSERT INTO ctxd_schema_migrations (version, name) VALUES ($1, $2)", [m.version, m.name])
        }
      }),
    ),
  )

const CATALOG = {
  relations: `SELECT c.relname, c.relkind, c.relispartition, c.relpersistence, pg_get_expr(c.relpartbound, c.oid) AS bound,
                CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END AS partkey
              FROM pg_class c WHERE c.relnamespace = $1::regnamespace ORDER BY c.relname`,
  columns: `SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull, a.attstorage,
              a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid) AS default
            FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
            LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE c.relnamespace = $1::regnamespace AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm')
            ORDER BY c.relname, a.attnum`,
  constraints: `SELECT c.relname, k.conname, k.contype, k.convalidated, pg_get_constraintdef(k.oid) AS def
                FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
                WHERE k.connamespace = $1::regnamespace ORDER BY c.relname, k.conname`,
  indexes: `SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY tablename, indexname`,
  functions: `SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args, pg_get_functiondef(p.oid) AS def, p.prosrc
              FROM pg_proc p WHERE p.pronamespace = $1::regnamespace ORDER BY 1, 2`,
  triggers: `SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid) AS def FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
             WHERE c.relnamespace = $1::regnamespace AND NOT t.tgisinternal ORDER BY 1, 2`,
} as const

/**
 * The schema's tables, partitions, columns, constraints, indexes, functions
 * (their full definitions and bodies) and triggers, with the schema's name
 * and the day-named partitions' dates replaced, so two schemas compare equal
 * when they hold the same objects.
 */
export const dump = Effect.flatMap(Database.Database, (db) =>
  Effect.map(
    Effect.forEach(Object.entries(CATALOG), ([what, sql]) => Effect.map(db.query(sql, [db.schema]), ({ rows }) => [what, rows] as const)),
    (parts) =>
      JSON.parse(
        JSON.stringify(Object.fromEntries(parts))
          .replaceAll(db.schema, "<schema>")
          .replace(/\d{4}-\d{2}-\d{2}( 00:00:00\+00)?/g, "<day>")
          .replace(/ctxd_turns_p\d{8}/g, "ctxd_turns_p<day>"),
      ) as Record<keyof typeof CATALOG, ReadonlyArray<Record<string, unknown>>>,
  ),
)
