// The migrations as .sql files: what the files hold, the checksums recorded
// and checked, a partial set continued, and a database of the releases
// before the files (their migrator, their migrations from git) upgraded
// unchanged, data and schema.
import { TestDatabase } from "@ctxd/testing"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { createHash } from "node:crypto"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Database, Migrations, SessionStore } from "../src/index.ts"
import { legacyCommit, text } from "./Helpers.ts"
import * as Legacy from "./Legacy.ts"

const fresh = Effect.flatMap(TestDatabase.make, ({ url, schema }) => Database.make({ url, schema }))

const recorded = Effect.flatMap(Database.Database, (db) =>
  Effect.map(
    db.query<{ version: number; name: string; checksum: string | null }>(
      "SELECT version, name, checksum FROM ctxd_schema_migrations ORDER BY version",
    ),
    ({ rows }) => rows,
  ),
)

const expected = (upTo: number) =>
  Migrations.migrations.filter((m) => m.version <= upTo).map((m) => ({ version: m.version, name: m.name, checksum: m.checksum }))

const newest = Math.max(...Migrations.migrations.map((m) => m.version))

const legacy = Legacy.fromGit()
if ("skip" in legacy) console.log(`upgrade from the migrations in code skipped: ${legacy.skip}`)

describe("migration files", () => {
  it("one plain SQL file per version, in order, named by its first line, checksummed over its bytes", () => {
    const files = readdirSync(Migrations.directory)
      .filter((f) => f.endsWith(".sql"))
      .sort()
    expect(Migrations.migrations.map((m) => m.file)).toEqual(files)
    files.forEach((file, i) => {
      expect(file).toMatch(new RegExp(`^${String(i + 1).padStart(4, "0")}_[a-z0-9_]+\\.sql$`))
      const bytes = readFileSync(join(Migrations.directory, file))
      const m = Migrations.migrations[i]!
      expect(m.checksum).toBe(createHash("sha256").update(bytes).digest("hex"))
      expect(m.sql).toBe(bytes.toString("utf8"))
      expect(`-- ${m.name}\n`).toBe(m.sql.slice(0, m.sql.indexOf("\n") + 1))
      // psql -f runs them as they are: no placeholders for code to fill in
      expect(m.sql).not.toMatch(/\$\{|\{\{/)
    })
  })

  it("a misnamed file or a gap in the versions refuses to load", () => {
    const dir = mkdtempSync(join(tmpdir(), "ctxd-migrations-"))
    try {
      writeFileSync(join(dir, "0001_a.sql"), "-- a\nSELECT 1;\n")
      writeFileSync(join(dir, "0003_c.sql"), "-- c\nSELECT 1;\n")
      expect(() => Migrations.load(dir)).toThrow(/0003_c\.sql.*expected version 2/)
      writeFileSync(join(dir, "0002_B.sql"), "SELECT 1;\n")
      expect(() => Migrations.load(dir)).toThrow(/0002_B\.sql is not NNNN_lowercase_name\.sql/)
      rmSync(join(dir, "0002_B.sql"))
      writeFileSync(join(dir, "0002_b.sql"), "SELECT 1;\n")
      expect(Migrations.load(dir).map((m) => [m.version, m.name])).toEqual([
        [1, "a"],
        [2, "0002_b"],
        [3, "c"],
      ])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it.scoped("an empty schema gets every migration, each recorded with its file's checksum", () =>
    Effect.gen(function* () {
      const db = yield* fresh
      const provide = Effect.provideService(Database.Database, db)
      expect(yield* Migrations.run.pipe(provide)).toEqual(Migrations.migrations.map((m) => m.version))
      expect(yield* recorded.pipe(provide)).toEqual(expected(newest))
      expect(yield* Migrations.run.pipe(provide)).toEqual([])
    }),
  )

  it.scoped("a set stopped at N continues from N + 1", () =>
    Effect.gen(function* () {
      const db = yield* fresh
      const provide = Effect.provideService(Database.Database, db)
      const stop = 6
      expect(yield* Migrations.apply(Migrations.migrations.slice(0, stop)).pipe(provide)).toEqual([1, 2, 3, 4, 5, 6])
      expect(yield* recorded.pipe(provide)).toEqual(expected(stop))
      expect(yield* Migrations.run.pipe(provide)).toEqual(Migrations.migrations.slice(stop).map((m) => m.version))
      expect(yield* recorded.pipe(provide)).toEqual(expected(newest))
    }),
  )

  it.scoped("an applied migration whose file was edited refuses the start, naming the file; nothing is applied", () =>
    Effect.gen(function* () {
      const db = yield* fresh
      const provide = Effect.provideService(Database.Database, db)
      yield* Migrations.apply(Migrations.migrations.slice(0, 5)).pipe(provide)
      const edited = Migrations.migrations.map((m) =>
        m.version === 4
          ? Migrations.make(m.file, m.sql.replace("CREATE INDEX ctxd_summaries_live", "CREATE INDEX ctxd_summaries_edited"))
          : m,
      )
      const error = yield* Migrations.apply(edited).pipe(provide, Effect.flip)
      expect(error).toMatchObject({
        _tag: "MigrationChecksumMismatch",
        version: 4,
        file: "0004_compaction_leases_summaries_audit.sql",
        recorded: Migrations.migrations[3]!.checksum,
        actual: edited[3]!.checksum,
      })
      expect(error.message).toContain("0004_compaction_leases_summaries_audit.sql")
      // migration 6 and later were pending: the refusal came first
      expect((yield* recorded.pipe(provide)).map((r) => r.version)).toEqual([1, 2, 3, 4, 5])
      // a checksum changed in the table is refused the same way
      yield* db.query("UPDATE ctxd_schema_migrations SET checksum = 'beef' WHERE version = 2")
      expect(yield* Migrations.run.pipe(provide, Effect.flip)).toMatchObject({
        _tag: "MigrationChecksumMismatch",
        version: 2,
        recorded: "beef",
      })
    }),
  )
})

describe.skipIf("skip" in legacy)("a database of the releases before the files", () => {
  const list = "skip" in legacy ? [] : legacy.migrations

  it("held the same statements the files hold, migration for migration", () => {
    expect(list.map((m) => [m.version, m.name])).toEqual(Migrations.migrations.slice(0, list.length).map((m) => [m.version, m.name]))
    list.forEach((m, i) => {
      // the file is a comment header, then that migration's SQL as it was (indentation included)
      expect(Migrations.migrations[i]!.sql.endsWith(`\n${m.sql.trimEnd()}\n`)).toBe(true)
    })
  })

  // the previous release's last migration, and one before it (its migrator stopped there)
  it.scoped.each([0, 1])(
    "at the previous release's last migration but %i: the new migrator applies the rest and records every checksum; data intact",
    (short) =>
      Effect.gen(function* () {
        const db = yield* fresh
        const provide = Effect.provideService(Database.Database, db)
        const previous = list.slice(0, list.length - short)
        yield* Legacy.apply(previous).pipe(provide)
        const input = (turnId: string, expectedLastSeq: number): SessionStore.CommitTurn => ({
          tenant: "acme",
          session: "upgraded",
          turnId,
          requestHash: `hash-${turnId}`,
          expectedLastSeq,
          messages: [{ message: text("user", turnId), tokens: 1, encoding: "o200k_base" }],
          reply: { ok: true, turnId },
          length: { agent: "default", turns: expectedLastSeq + 1 },
        })
        expect(yield* legacyCommit("ctxd_commit_turn_v9", input("t1", 0)).pipe(provide)).toBe("ok")
        expect(yield* legacyCommit("ctxd_commit_turn_v9", input("t2", 1)).pipe(provide)).toBe("ok")
        yield* db.query("INSERT INTO ctxd_knowledge (tenant, agent, id, title, body) VALUES ('acme', 'a', 'k1', 'title', 'body')")
        const snapshot = db.query(
          `SELECT json_build_object(
           'sessions', (SELECT json_agg(s ORDER BY s.id) FROM ctxd_sessions s),
           'messages', (SELECT json_agg(m ORDER BY m.session_id, m.seq) FROM ctxd_messages m),
           'turns', (SELECT json_agg(t ORDER BY t.turn_id) FROM ctxd_turns t),
           'lengths', (SELECT json_agg(l) FROM ctxd_session_lengths l),
           'knowledge', (SELECT json_agg(k) FROM ctxd_knowledge k)) AS data`,
        )
        const before = (yield* snapshot).rows

        expect(yield* Migrations.run.pipe(provide)).toEqual(Migrations.migrations.slice(previous.length).map((m) => m.version))
        expect((yield* snapshot).rows).toEqual(before)
        // the earlier ones backfilled: their statements are the files' (test above)
        expect(yield* recorded.pipe(provide)).toEqual(expected(newest))

        // this release's commits continue the session the previous one wrote
        const store = yield* SessionStore.SessionStore.pipe(Effect.provide(SessionStore.layer), provide)
        expect(yield* store.commitTurn(input("t3", 2))).toEqual({ firstSeq: 3, lastSeq: 3 })
        expect((yield* store.loadMessages("acme", "upgraded", 0)).map((m) => m.seq)).toEqual([1, 2, 3])
        expect(Option.getOrThrow(yield* store.findTurn("acme", "upgraded", "t1")).reply).toEqual({ ok: true, turnId: "t1" })

        // a worker of the previous release still migrates beside it: the checksum column does not get in its way
        yield* Legacy.apply(previous).pipe(provide)
      }),
  )

  it.scoped("the schema they built is the schema the files build", () =>
    Effect.gen(function* () {
      const [old, current] = yield* Effect.all([fresh, fresh])
      const files = Migrations.migrations.slice(0, list.length)
      yield* Legacy.apply(list).pipe(Effect.provideService(Database.Database, old))
      const oldOnly = yield* Legacy.dump.pipe(Effect.provideService(Database.Database, old))
      // the new migrator on it: nothing to apply, only the bookkeeping's checksums
      expect(yield* Migrations.apply(files).pipe(Effect.provideService(Database.Database, old))).toEqual([])
      yield* Migrations.apply(files).pipe(Effect.provideService(Database.Database, current))
      const upgraded = yield* Legacy.dump.pipe(Effect.provideService(Database.Database, old))
      const built = yield* Legacy.dump.pipe(Effect.provideService(Database.Database, current))
      expect(built).toEqual(upgraded)
      expect(built.functions.length).toBeGreaterThan(5)
      expect(built.indexes.length).toBeGreaterThan(10)
      // and apart from the bookkeeping's new column, the upgrade changed nothing
      const withoutChecksum = (d: typeof built) => ({
        ...d,
        columns: d.columns.filter((c) => !(c.relname === "ctxd_schema_migrations" && c.attname === "checksum")),
      })
      expect(withoutChecksum(upgraded)).toEqual(oldOnly)
    }),
  )
})
