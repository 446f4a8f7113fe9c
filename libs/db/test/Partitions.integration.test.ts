import { TestDatabase } from "@ctxd/testing"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Schedule } from "effect"
import { Database, Migrations, Partitions, SessionStore } from "../src/index.ts"
import { legacyCommit, text } from "./Helpers.ts"

/** A migrated (up to `upTo`) throwaway schema, its pool without statement timeout, and a store on it. */
const setup = (upTo = Infinity) =>
  Effect.gen(function* () {
    const { url, schema } = yield* TestDatabase.make
    const db = yield* Database.make({ url, schema, statementTimeoutMs: 0 })
    yield* Migrations.apply(Migrations.migrations.filter((m) => m.version <= upTo)).pipe(Effect.provideService(Database.Database, db))
    const store = yield* SessionStore.SessionStore.pipe(Effect.provide(SessionStore.layer), Effect.provideService(Database.Database, db))
    const input = (session: string, turn: number, expectedLastSeq: number): SessionStore.CommitTurn => ({
      tenant: "acme",
      session,
      turnId: `t${turn}`,
      requestHash: `h${turn}`,
      expectedLastSeq,
      messages: [text("user", `q${turn}`), text("assistant", `a${turn}`)].map((message) => ({
        message,
        tokens: 3,
        encoding: "o200k_base",
      })),
      reply: { ok: true, turn },
    })
    const commit = (session: string, turn: number, expectedLastSeq: number) => store.commitTurn(input(session, turn, expectedLastSeq))
    /** A commit as a worker of the release that stopped at migration `upTo` made it (its schema lacks this release's function). */
    const commitBefore = (session: string, turn: number, expectedLastSeq: number) =>
      legacyCommit("ctxd_commit_turn", input(session, turn, expectedLastSeq)).pipe(Effect.provideService(Database.Database, db))
    const count = (sql: string) => db.query<{ n: string }>(sql).pipe(Effect.map(({ rows }) => Number(rows[0]!.n)))
    const run = <A, E>(effect: Effect.Effect<A, E, Database.Database>) => Effect.provideService(effect, Database.Database, db)
    return { db, store, commit, commitBefore, count, run }
  })

const utcDay = (offsetDays: number) => {
  const d = new Date()
  d.setUTCHours(0, 0, 0, 0)
  return new Date(d.getTime() + offsetDays * 86_400_000)
}

describe("Partitions", () => {
  it.scoped("a new install gets hash-partitioned messages and day-partitioned turns", () =>
    Effect.gen(function* () {
      const { store, commit, count, run } = yield* setup()
      const status = yield* run(Partitions.status)
      expect(status.partitioned).toBe(true)
      const days = status.turns.filter((p) => p.name.startsWith("ctxd_turns_p")).map((p) => p.from!.getTime())
      expect(days).toEqual([0, 1, 2, 3].map((d) => utcDay(d).getTime()))
      expect(yield* count("SELECT count(*) AS n FROM pg_inherits WHERE inhparent = 'ctxd_messages_h'::regclass")).toBe(16)

      for (let s = 0; s < 20; s++) yield* commit(`s${s}`, 1, 0)
      expect(yield* commit("s0", 2, 2)).toEqual({ firstSeq: 3, lastSeq: 4 })
      // messages spread over the hash partitions, none in the pre-partitioning one
      expect(yield* count("SELECT count(*) AS n FROM ctxd_messages_h")).toBe(42)
      expect(yield* count("SELECT count(*) AS n FROM ctxd_messages_v1")).toBe(0)
      expect(yield* count("SELECT count(DISTINCT tableoid) AS n FROM ctxd_messages")).toBeGreaterThan(4)
      // today's turns in today's partition
      const today = `ctxd_turns_p${utcDay(0).toISOString().slice(0, 10).replaceAll("-", "")}`
      expect(yield* count(`SELECT count(*) AS n FROM ${today}`)).toBe(21)
      expect((yield* store.loadMessages("acme", "s0", 0)).map((m) => m.seq)).toEqual([1, 2, 3, 4])
      expect(Option.map(yield* store.findTurn("acme", "s0", "t2"), (t) => t.reply)).toEqual(Option.some({ ok: true, turn: 2 }))
      // a retried turn is still answered from its stored reply
      const again = yield* commit("s0", 2, 2).pipe(Effect.flip)
      expect(again._tag).toBe("TurnExists")
    }),
  )

  it.scopedLive("ensureFuture creates days ahead once; dropBefore drops whole expired days and nothing else", () =>
    Effect.gen(function* () {
      const { db, store, commit, count, run } = yield* setup()
      const created = yield* run(Partitions.ensureFuture(5))
      expect(created.length).toBe(2)
      expect(yield* run(Partitions.ensureFuture(5))).toEqual([])
      // concurrent upkeep from several workers is safe
      const raced = yield* Effect.all([run(Partitions.ensureFuture(7)), run(Partitions.ensureFuture(7))], { concurrency: 2 })
      expect(raced.flat().sort()).toHaveLength(2)

      yield* commit("old", 1, 0)
      // a turn two days ahead (as if committed then) and one with no partition (the default catches it)
      yield* db.query(
        `INSERT INTO ctxd_turns (session_id, turn_id, request_hash, first_seq, last_seq, reply, created_at)
         SELECT id, 'later', 'h', 3, 2, '{}'::jsonb, $1::timestamptz FROM ctxd_sessions WHERE session = 'old'`,
        [new Date(utcDay(2).getTime() + 3_600_000)],
      )
      yield* db.query(
        `INSERT INTO ctxd_turns (session_id, turn_id, request_hash, first_seq, last_seq, reply, created_at)
         SELECT id, 'far', 'h', 3, 2, '{}'::jsonb, $1::timestamptz FROM ctxd_sessions WHERE session = 'old'`,
        [utcDay(400)],
      )
      expect(yield* count("SELECT count(*) AS n FROM ctxd_turns_default")).toBe(1)

      const dropped = yield* run(Partitions.dropBefore(utcDay(1)))
      expect(dropped.map((d) => d.name).sort()).toEqual(
        ["ctxd_turns_v1", `ctxd_turns_p${utcDay(0).toISOString().slice(0, 10).replaceAll("-", "")}`].sort(),
      )
      // today's turn is gone, the later ones and every message stay
      expect(Option.isNone(yield* store.findTurn("acme", "old", "t1"))).toBe(true)
      expect(Option.isSome(yield* store.findTurn("acme", "old", "later"))).toBe(true)
      expect(yield* count("SELECT count(*) AS n FROM ctxd_turns")).toBe(2)
      expect((yield* store.loadMessages("acme", "old", 0)).length).toBe(2)
      // idempotent, and the default partition is never dropped
      expect(yield* run(Partitions.dropBefore(utcDay(1)))).toEqual([])
      yield* run(Partitions.dropBefore(utcDay(1_000)))
      expect(yield* count("SELECT count(*) AS n FROM ctxd_turns")).toBe(1)
      // commits still work once today's partition is gone: today's turns go to the default partition
      expect(yield* commit("old", 2, 2)).toEqual({ firstSeq: 3, lastSeq: 4 })
      // and upkeep skips today (its turns are in the default partition) but still creates later days
      const day = (d: number) => `ctxd_turns_p${utcDay(d).toISOString().slice(0, 10).replaceAll("-", "")}`
      expect(yield* run(Partitions.ensureFuture(3))).toEqual([day(1), day(2), day(3)])
    }),
  )

  it.scopedLive("a worker's upkeep layer creates the days ahead at start", () =>
    Effect.gen(function* () {
      const { db } = yield* setup()
      const ahead = `ctxd_turns_p${utcDay(3).toISOString().slice(0, 10).replaceAll("-", "")}`
      yield* db.query(`DROP TABLE ${ahead}`)
      yield* Layer.build(Partitions.layerUpkeep).pipe(Effect.provideService(Database.Database, db))
      const exists = db
        .query<{ exists: boolean }>("SELECT to_regclass($1) IS NOT NULL AS exists", [ahead])
        .pipe(Effect.map(({ rows }) => rows[0]!.exists))
      yield* exists.pipe(Effect.repeat({ until: (found) => found, schedule: Schedule.spaced("50 millis"), times: 100 }))
      expect(yield* exists).toBe(true)
    }),
  )

  it.scopedLive(
    "a populated schema keeps its plain tables at migration 10 and converts online while commits go on",
    () =>
      Effect.gen(function* () {
        const { store, commit, commitBefore, count, run } = yield* setup(7)
        for (let s = 0; s < 10; s++) expect(yield* commitBefore(`pre${s}`, 1, 0)).toBe("ok")
        yield* run(Migrations.run)
        expect((yield* run(Partitions.status)).partitioned).toBe(false)
        // upkeep is a no-op on the plain layout
        expect(yield* run(Partitions.ensureFuture())).toEqual([])
        expect(yield* run(Partitions.dropBefore(utcDay(10)))).toEqual([])

        // a writer keeps committing on old and new sessions during the conversion
        const writer = yield* Effect.fork(
          Effect.gen(function* () {
            let turns = 0
            for (let k = 2; k <= 40; k++) {
              yield* commit(`pre${k % 10}`, k, 2 * Math.floor((k - 2) / 10 + 1))
              yield* commit(`during${k}`, 1, 0)
              turns += 2
            }
            return turns
          }),
        )
        const converted = yield* run(Partitions.convert({ sessionIdReserve: 1_000 }))
        const written = yield* Fiber.join(writer)
        expect(converted.converted).toBe(true)
        expect((yield* run(Partitions.status)).partitioned).toBe(true)
        // nothing lost: every turn and message written before, during and after
        expect(yield* count("SELECT count(*) AS n FROM ctxd_turns")).toBe(10 + written)
        expect(yield* count("SELECT count(*) AS n FROM ctxd_messages")).toBe(2 * (10 + written))
        expect((yield* store.loadMessages("acme", "pre3", 0)).length).toBe(10)

        // sessions created after the swap live in the hash partitions; old sessions keep theirs in _v1
        const hashed = yield* count("SELECT count(*) AS n FROM ctxd_messages_h")
        yield* commit("after", 1, 0)
        expect(yield* count("SELECT count(*) AS n FROM ctxd_messages_h")).toBe(hashed + 2)
        expect(
          yield* count(
            "SELECT count(*) AS n FROM ctxd_messages_v1 m JOIN ctxd_sessions s ON s.id = m.session_id WHERE s.session LIKE 'pre%'",
          ),
        ).toBe(
          yield* count("SELECT count(*) AS n FROM ctxd_messages m JOIN ctxd_sessions s ON s.id = m.session_id WHERE s.session LIKE 'pre%'"),
        )
        expect((yield* store.loadMessages("acme", "after", 0)).length).toBe(2)
        expect(yield* commit("pre0", 99, 10)).toEqual({ firstSeq: 11, lastSeq: 12 })
        // the old table covers the turns up to the cut; upkeep resumes from there
        expect(converted.cutAt!.getTime()).toBe(utcDay(2).getTime())
        const days = (yield* run(Partitions.status)).turns.filter((p) => p.name.startsWith("ctxd_turns_p"))
        expect(days[0]!.from!.getTime()).toBe(utcDay(2).getTime())
        // a second run has nothing to do
        expect((yield* run(Partitions.convert())).converted).toBe(false)
      }),
    // live clock: the swap retries (200 ms apart) while its locks are busy; CREATE INDEX CONCURRENTLY
    // waits for every older transaction of the database, other test files' too
    60_000,
  )
})
