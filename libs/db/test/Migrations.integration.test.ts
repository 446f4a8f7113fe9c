import { TestDatabase } from "@ctxd/testing"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Database, Migrations } from "../src/index.ts"

const tables = (db: Database.DatabaseService) =>
  db
    .query<{ tablename: string }>(
      // partitions (migration 10) are not tables of their own here
      `SELECT c.relname AS tablename FROM pg_class c
       WHERE c.relnamespace = $1::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1`,
      [db.schema],
    )
    .pipe(Effect.map(({ rows }) => rows.map((r) => r.tablename)))

describe("Migrations", () => {
  it("lists versions in strictly increasing order", () => {
    const versions = Migrations.migrations.map((m) => m.version)
    expect(versions[0]).toBe(1)
    versions.slice(1).forEach((v, i) => expect(v).toBe(versions[i]! + 1))
  })

  it("derives a stable lock key per schema", () => {
    expect(Migrations.lockKey("public")).toBe(Migrations.lockKey("public"))
    expect(Migrations.lockKey("public")).not.toBe(Migrations.lockKey("t_1"))
    expect(typeof Migrations.lockKey("public")).toBe("bigint")
  })

  it.scoped("two workers migrating at once apply each version exactly once", () =>
    Effect.gen(function* () {
      const { url, schema } = yield* TestDatabase.make
      const a = yield* Database.make({ url, schema })
      const b = yield* Database.make({ url, schema })
      const applied = yield* Effect.all(
        [a, b].map((db) => Migrations.run.pipe(Effect.provideService(Database.Database, db))),
        { concurrency: "unbounded" },
      )
      const all = Migrations.migrations.map((m) => m.version)
      // one of them did the work, the other found it done
      expect(applied.flat().sort((x, y) => x - y)).toEqual(all)
      const { rows } = yield* a.query<{ version: number; n: string }>(
        "SELECT version, count(*) AS n FROM ctxd_schema_migrations GROUP BY version ORDER BY version",
      )
      expect(rows.map((r) => [r.version, Number(r.n)])).toEqual(all.map((v) => [v, 1]))
      expect(yield* tables(a)).toEqual([
        "ctxd_cluster",
        "ctxd_compaction_leases",
        "ctxd_compactions",
        "ctxd_knowledge",
        "ctxd_memory",
        "ctxd_memory_versions",
        "ctxd_memory_words",
        "ctxd_messages",
        "ctxd_schema_migrations",
        "ctxd_session_lengths",
        "ctxd_session_users",
        "ctxd_sessions",
        "ctxd_shard_leases",
        "ctxd_summaries",
        "ctxd_turns",
        "ctxd_usage_reports",
        "ctxd_workers",
      ])
      // and a restart has nothing to do
      expect(yield* Migrations.run.pipe(Effect.provideService(Database.Database, a))).toEqual([])
    }),
  )

  it.scoped("a failing migration rolls back every migration applied with it", () =>
    Effect.gen(function* () {
      const { url, schema } = yield* TestDatabase.make
      const db = yield* Database.make({ url, schema })
      const broken: ReadonlyArray<Migrations.Migration> = [
        ...Migrations.migrations,
        Migrations.make("1000_broken.sql", "CREATE TABLE ctxd_broken (n integer); SELECT * FROM no_such_table"),
      ]
      const error = yield* Migrations.apply(broken).pipe(Effect.provideService(Database.Database, db), Effect.flip)
      expect(error._tag).toBe("DatabaseError")
      expect(yield* tables(db)).toEqual([])
      expect(yield* Migrations.run.pipe(Effect.provideService(Database.Database, db))).toEqual(Migrations.migrations.map((m) => m.version))
    }),
  )
})
