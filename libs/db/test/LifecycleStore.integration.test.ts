import { Session } from "@ctxd/contracts"
import { TestDatabase } from "@ctxd/testing"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Either, Layer, Option, Schema } from "effect"
import { Database, LifecycleStore, Migrations, SessionStore } from "../src/index.ts"
import { type LegacyCommit, legacyCommit, text } from "./Helpers.ts"

const Stores = Layer.mergeAll(SessionStore.layer, LifecycleStore.layer).pipe(
  Layer.provide(Migrations.layer),
  Layer.provideMerge(TestDatabase.layer),
)

let counter = 0
const fresh = () => `s${++counter}`

/** Commits `turns` turns of two messages each on `tenant`/`session`; the replies are `{ok: true, turnId, n}`. */
const turns = (tenant: string, session: string, n: number, extra: Partial<SessionStore.CommitTurn> = {}) =>
  Effect.gen(function* () {
    const store = yield* SessionStore.SessionStore
    for (let i = 0; i < n; i++) {
      yield* store.commitTurn({
        tenant,
        session,
        turnId: `t${i}`,
        requestHash: `h${i}`,
        expectedLastSeq: 2 * i,
        messages: [text("user", `question ${i}`), text("assistant", `answer ${i}`)].map((message) => ({
          message,
          tokens: 3,
          encoding: "o200k_base",
        })),
        reply: { ok: true, turnId: `t${i}`, n: i },
        length: { agent: "default", turns: i + 1 },
        ...extra,
      })
    }
  })

const sql = <R = Record<string, unknown>>(text: string, params?: ReadonlyArray<unknown>) =>
  Effect.flatMap(Database.Database, (db) => Effect.map(db.query<R>(text, params), (r) => r.rows))

/** Moves the turns (and the session's last activity) of a session back by `hours`. */
const age = (tenant: string, session: string, hours: number) =>
  Effect.zipRight(
    sql(
      `UPDATE ctxd_turns t SET created_at = t.created_at - make_interval(hours => $3) FROM ctxd_sessions s
       WHERE s.id = t.session_id AND s.tenant = $1 AND s.session = $2`,
      [tenant, session, hours],
    ),
    sql(`UPDATE ctxd_sessions SET updated_at = updated_at - make_interval(hours => $3) WHERE tenant = $1 AND session = $2`, [
      tenant,
      session,
      hours,
    ]),
  )

/** Summaries, a compaction audit row, a compaction lease and a usage report for the session. */
const extras = (tenant: string, session: string) =>
  Effect.gen(function* () {
    const [{ id }] = (yield* sql<{ id: string }>(`SELECT id::text AS id FROM ctxd_sessions WHERE tenant = $1 AND session = $2`, [
      tenant,
      session,
    ])) as [{ id: string }]
    const [{ sid }] = (yield* sql<{ sid: string }>(
      `INSERT INTO ctxd_summaries (session_id, covers_from_seq, covers_to_seq, text, mode, depth, token)
       VALUES ($1, 1, 2, 'the summary', 'oneshot', 1, 1) RETURNING id::text AS sid`,
      [id],
    )) as [{ sid: string }]
    yield* sql(
      `INSERT INTO ctxd_compactions (session_id, outcome, trigger, covers_from_seq, covers_to_seq, summary_id, summary, duration_ms, finished_at)
       VALUES ($1, 'ok', 'threshold', 1, 2, $2, 'the summary', 12, now())`,
      [id, sid],
    )
    yield* sql(`INSERT INTO ctxd_compaction_leases (session_id, owner, token, expires_at) VALUES ($1, 'w1', 1, now())`, [id])
    yield* sql(`INSERT INTO ctxd_usage_reports (tenant, session, turn_id, billed) VALUES ($1, $2, 't0', 100)`, [tenant, session])
    return id
  })

/** Rows that name the session (by id or by tenant and name) in every ctxd table that has such a column. */
const leftovers = (tenant: string, session: string, id: string) =>
  Effect.gen(function* () {
    const columns = yield* sql<{ table_name: string; column_name: string }>(
      // partitions are counted through their partitioned table
      `SELECT c.table_name, c.column_name FROM information_schema.columns c
       JOIN pg_class r ON r.relname = c.table_name AND r.relnamespace = current_schema()::regnamespace
       WHERE c.table_schema = current_schema() AND c.table_name LIKE 'ctxd\\_%' AND c.column_name IN ('session_id', 'session', 'id')
         AND NOT r.relispartition
       ORDER BY c.table_name`,
    )
    const byTable = new Map<string, Set<string>>()
    for (const c of columns) byTable.set(c.table_name, (byTable.get(c.table_name) ?? new Set()).add(c.column_name))
    const found: Record<string, number> = {}
    let checked = 0
    for (const [table, cols] of byTable) {
      const where = cols.has("session_id")
        ? [`session_id = $1::bigint`, [id]]
        : cols.has("session")
          ? [`tenant = $1 AND session = $2`, [tenant, session]]
          : table === "ctxd_sessions"
            ? [`id = $1::bigint`, [id]]
            : undefined
      if (where === undefined) continue
      checked++
      const [row] = yield* sql<{ n: string }>(
        `SELECT count(*) AS n FROM ${table} WHERE ${where[0] as string}`,
        where[1] as ReadonlyArray<unknown>,
      )
      if (Number(row!.n) > 0) found[table] = Number(row!.n)
    }
    return { found, checked }
  })

describe("LifecycleStore", () => {
  layer(Stores, { timeout: 60_000 })("on a migrated throwaway schema", (it) => {
    it.effect("prunes expired replies in batches, keeps the turn rows, and a retry after the window is recognised as expired", () =>
      Effect.gen(function* () {
        const lifecycle = yield* LifecycleStore.LifecycleStore
        const store = yield* SessionStore.SessionStore
        const old = fresh()
        const recent = fresh()
        yield* turns("acme", old, 7)
        yield* turns("acme", recent, 3)
        yield* age("acme", old, 25)
        // batches of 3 under a 24 h window: 3, 3, 1, then nothing
        const batches = [
          yield* lifecycle.pruneReplies(24 * 3600, 3),
          yield* lifecycle.pruneReplies(24 * 3600, 3),
          yield* lifecycle.pruneReplies(24 * 3600, 3),
          yield* lifecycle.pruneReplies(24 * 3600, 3),
        ]
        expect(batches).toEqual([3, 3, 1, 0])
        const pruned = Option.getOrThrow(yield* store.findTurn("acme", old, "t4"))
        expect(pruned).toMatchObject({
          turnId: "t4",
          requestHash: "h4",
          firstSeq: 9,
          lastSeq: 10,
          expired: true,
          reply: SessionStore.EXPIRED_REPLY,
        })
        expect(Option.getOrThrow(yield* store.findTurn("acme", recent, "t1"))).toEqual({
          turnId: "t1",
          requestHash: "h1",
          firstSeq: 3,
          lastSeq: 4,
          reply: { ok: true, turnId: "t1", n: 1 },
        })
        // every message is still there; the commit of the same turn id meets the expired turn
        expect((yield* store.loadMessages("acme", old, 0)).length).toBe(14)
        const retry = yield* Effect.either(
          store.commitTurn({
            tenant: "acme",
            session: old,
            turnId: "t2",
            requestHash: "h2",
            expectedLastSeq: 14,
            messages: [],
            reply: { ok: true },
          }),
        )
        expect(Either.getLeft(retry).pipe(Option.getOrThrow)).toMatchObject({ _tag: "TurnExists", stored: { expired: true } })
        // the window decides: a 30 h window prunes nothing more
        yield* age("acme", recent, 25)
        expect(yield* lifecycle.pruneReplies(30 * 3600, 100)).toBe(0)
        expect(yield* lifecycle.pruneReplies(24 * 3600, 100)).toBe(3)
      }),
    )

    it.effect("finds expired replies through the partial index", () =>
      Effect.gen(function* () {
        const db = yield* Database.Database
        const plan = yield* db.transaction((tx) =>
          Effect.gen(function* () {
            yield* tx.query("SET LOCAL enable_seqscan = off")
            const { rows } = yield* tx.query<{ "QUERY PLAN": string }>(
              `EXPLAIN SELECT session_id, turn_id FROM ctxd_turns
               WHERE (reply_z IS NOT NULL OR reply ->> 'ok' = 'true') AND created_at < now() - make_interval(secs => 10)
               ORDER BY created_at LIMIT 5`,
            )
            return rows.map((r) => r["QUERY PLAN"]).join("\n")
          }),
        )
        // the index (on a partitioned ctxd_turns: each partition's copy of it), never a scan of the table
        expect(plan).toMatch(/Index Scan using \S*(reply_kept|created_at_idx)/)
        expect(plan).not.toMatch(/Seq Scan/)
      }),
    )

    it.effect("deletes a session and every row of it in every table, idempotently", () =>
      Effect.gen(function* () {
        const lifecycle = yield* LifecycleStore.LifecycleStore
        const session = fresh()
        const other = fresh()
        yield* turns("acme", session, 4, { user: "u1" })
        yield* turns("acme", other, 2)
        const id = yield* extras("acme", session)
        yield* extras("acme", other)
        const before = yield* leftovers("acme", session, id)
        expect(Object.keys(before.found).sort()).toEqual([
          "ctxd_compaction_leases",
          "ctxd_compactions",
          "ctxd_messages",
          "ctxd_session_lengths",
          "ctxd_session_users",
          "ctxd_sessions",
          "ctxd_summaries",
          "ctxd_turns",
          "ctxd_usage_reports",
        ])
        expect(yield* lifecycle.deleteSession("acme", session)).toEqual({
          sessions: 1,
          messages: 8,
          turns: 4,
          summaries: 1,
          compactions: 1,
          usageReports: 1,
        })
        const after = yield* leftovers("acme", session, id)
        expect(after.found).toEqual({})
        expect(after.checked).toBeGreaterThanOrEqual(9)
        // again: nothing left to delete; the other session and tenant untouched
        expect(yield* lifecycle.deleteSession("acme", session)).toEqual(LifecycleStore.NONE)
        expect(yield* lifecycle.deleteSession("globex", other)).toEqual(LifecycleStore.NONE)
        expect((yield* (yield* SessionStore.SessionStore).loadMessages("acme", other, 0)).length).toBe(4)
      }),
    )

    it.effect("finds and deletes only the sessions idle past their tenant's retention", () =>
      Effect.gen(function* () {
        const lifecycle = yield* LifecycleStore.LifecycleStore
        const idle = fresh()
        const active = fresh()
        const keep = fresh()
        yield* turns("ret-a", idle, 2)
        yield* turns("ret-a", active, 2)
        yield* turns("ret-b", keep, 2)
        yield* extras("ret-a", idle)
        yield* age("ret-a", idle, 24 * 31)
        yield* age("ret-a", active, 24 * 29)
        yield* age("ret-b", keep, 24 * 400)
        const rules = [{ tenant: "ret-a", days: 30 }]
        const { ids, maxId } = yield* lifecycle.idleSessions(rules, 0n, 1_000_000)
        expect(ids.length).toBe(1)
        expect(maxId).toBeGreaterThan(0n)
        // a span that ends before the idle session finds nothing
        expect((yield* lifecycle.idleSessions(rules, 0n, Number(ids[0]) - 1)).ids).toEqual([])
        const removed = yield* lifecycle.deleteIdle(rules, ids)
        expect(removed).toEqual({ sessions: 1, messages: 4, turns: 2, summaries: 1, compactions: 1, usageReports: 1 })
        const again = yield* lifecycle.deleteIdle(rules, ids)
        expect(again).toEqual(LifecycleStore.NONE)
        const names = yield* sql<{ tenant: string; session: string }>(
          `SELECT tenant, session FROM ctxd_sessions WHERE session = ANY($1) ORDER BY tenant, session`,
          [[idle, active, keep]],
        )
        expect(names).toEqual(
          [
            { tenant: "ret-a", session: active },
            { tenant: "ret-b", session: keep },
          ].sort((a, b) => (a.tenant + a.session < b.tenant + b.session ? -1 : 1)),
        )
      }),
    )

    it.effect("a session found idle that got a turn before its deletion is kept", () =>
      Effect.gen(function* () {
        const lifecycle = yield* LifecycleStore.LifecycleStore
        const session = fresh()
        yield* turns("ret-c", session, 1)
        yield* age("ret-c", session, 24 * 10)
        const rules = [{ tenant: "ret-c", days: 5 }]
        const { ids } = yield* lifecycle.idleSessions(rules, 0n, 1_000_000)
        expect(ids.length).toBe(1)
        yield* (yield* SessionStore.SessionStore).commitTurn({
          tenant: "ret-c",
          session,
          turnId: "late",
          requestHash: "h",
          expectedLastSeq: 2,
          messages: [{ message: text("user", "back again"), tokens: 2, encoding: "o200k_base" }],
          reply: { ok: true },
        })
        expect(yield* lifecycle.deleteIdle(rules, ids)).toEqual(LifecycleStore.NONE)
        expect((yield* (yield* SessionStore.SessionStore).loadMessages("ret-c", session, 0)).length).toBe(3)
      }),
    )

    it.effect("lists a user's sessions", () =>
      Effect.gen(function* () {
        const lifecycle = yield* LifecycleStore.LifecycleStore
        const a = fresh()
        const b = fresh()
        const c = fresh()
        yield* turns("users", a, 2, { user: "alice" })
        yield* turns("users", b, 1, { user: "bob" })
        yield* turns("users", c, 1)
        // a session whose later turn names alice
        yield* (yield* SessionStore.SessionStore).commitTurn({
          tenant: "users",
          session: b,
          turnId: "x",
          requestHash: "x",
          expectedLastSeq: 2,
          messages: [],
          reply: { ok: true },
          user: "alice",
        })
        expect([...(yield* lifecycle.sessionsOfUser("users", "alice", 10))].sort()).toEqual([a, b].sort())
        expect(yield* lifecycle.sessionsOfUser("users", "bob", 10)).toEqual([b])
        expect(yield* lifecycle.sessionsOfUser("other", "alice", 10)).toEqual([])
        expect((yield* lifecycle.sessionsOfUser("users", "alice", 1)).length).toBe(1)
      }),
    )

    it.effect("export pages reassemble to the whole stored session", () =>
      Effect.gen(function* () {
        const lifecycle = yield* LifecycleStore.LifecycleStore
        const session = fresh()
        yield* turns("exp", session, 30, { user: "carol" })
        yield* extras("exp", session)
        yield* age("exp", session, 48)
        yield* lifecycle.pruneReplies(24 * 3600, 100)
        const whole = yield* lifecycle.exportPage("exp", session, undefined, 10_000, 100 * 1024 * 1024)
        expect(whole.nextCursor).toBeUndefined()
        const lines = whole.lines
          .trimEnd()
          .split("\n")
          .map((l) => JSON.parse(l) as { kind: string; [k: string]: unknown })
        const kinds = lines.map((l) => l.kind)
        expect(kinds.filter((k) => k === "message").length).toBe(60)
        expect(kinds.filter((k) => k === "turn").length).toBe(30)
        expect(kinds[0]).toBe("session")
        expect(lines[0]).toMatchObject({ tenant: "exp", session, lastSeq: 60, users: ["carol"] })
        expect(kinds.slice(-2)).toEqual(["summary", "compaction"])
        expect(lines.find((l) => l.kind === "message" && l.seq === 3)).toMatchObject({
          role: "user",
          message: text("user", "question 1"),
          turnId: "t1",
        })
        expect(lines.find((l) => l.kind === "turn" && l.turnId === "t29")).toMatchObject({ firstSeq: 59, lastSeq: 60, replyStored: false })
        // pages by line count and by bytes, each page within its bounds
        for (const [limit, maxBytes] of [
          [7, 1024 * 1024],
          [1000, 600],
          [1, 1],
        ] as const) {
          let text = ""
          let cursor: string | undefined
          let pages = 0
          do {
            const page = yield* lifecycle.exportPage("exp", session, cursor, limit, maxBytes)
            const n = page.lines === "" ? 0 : page.lines.trimEnd().split("\n").length
            expect(n).toBeLessThanOrEqual(limit)
            if (n > 1) expect(Buffer.byteLength(page.lines)).toBeLessThanOrEqual(maxBytes)
            text += page.lines
            cursor = page.nextCursor
            pages++
          } while (cursor !== undefined && pages < 1000)
          expect(text).toBe(whole.lines)
          expect(pages).toBeGreaterThan(1)
        }
      }),
    )

    it.effect("an export cursor is refused for another session, garbage, or a session deleted since", () =>
      Effect.gen(function* () {
        const lifecycle = yield* LifecycleStore.LifecycleStore
        const session = fresh()
        const other = fresh()
        yield* turns("exp", session, 3)
        yield* turns("exp", other, 3)
        const first = yield* lifecycle.exportPage("exp", session, undefined, 2, 1024 * 1024)
        const cursor = first.nextCursor!
        expect(cursor).toBeDefined()
        const refused = (c: string, s = session) =>
          lifecycle.exportPage("exp", s, c, 2, 1024 * 1024).pipe(
            Effect.flip,
            Effect.map((e) => e instanceof LifecycleStore.BadCursor),
          )
        expect(yield* refused(cursor, other)).toBe(true)
        expect(yield* refused("bm9wZQ")).toBe(true)
        yield* lifecycle.deleteSession("exp", session)
        expect(yield* refused(cursor)).toBe(true)
        expect(yield* lifecycle.exportPage("exp", session, undefined, 2, 1024)).toEqual({ lines: "" })
        // the longest turn id, all of it escaped in JSON: its cursor still fits the request schema
        const odd = fresh()
        const turnId = "\u0001".repeat(200)
        yield* (yield* SessionStore.SessionStore).commitTurn({
          tenant: "exp",
          session: odd,
          turnId,
          requestHash: "h",
          expectedLastSeq: 0,
          messages: [],
          reply: { ok: true },
        })
        yield* (yield* SessionStore.SessionStore).commitTurn({
          tenant: "exp",
          session: odd,
          turnId: "z",
          requestHash: "h",
          expectedLastSeq: 0,
          messages: [],
          reply: { ok: true },
        })
        const page = yield* lifecycle.exportPage("exp", odd, undefined, 2, 1024 * 1024)
        expect(page.lines).toContain('"kind":"turn"')
        expect(Schema.decodeUnknownSync(Session.ExportRequest)({ op: "export", cursor: page.nextCursor })).toMatchObject({
          cursor: page.nextCursor,
        })
      }),
    )
  })

  it.scoped(
    "migration 9 applies on a schema at version 8: the previous release's commits keep working, its replies (and pre-v3 ones) are pruned",
    () =>
      Effect.gen(function* () {
        const { url, schema } = yield* TestDatabase.make
        const db = yield* Database.make({ url, schema })
        const provide = Effect.provideService(Database.Database, db)
        expect(yield* Migrations.apply(Migrations.migrations.filter((m) => m.version <= 8)).pipe(provide)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
        const stores = Effect.provide(Layer.mergeAll(SessionStore.layer, LifecycleStore.layer))
        const message = { message: text("user", "more"), tokens: 1, encoding: "o200k_base" }
        const commitOn = (fn: LegacyCommit, turnId: string, expectedLastSeq: number, extra: Partial<SessionStore.CommitTurn> = {}) =>
          legacyCommit(fn, {
            tenant: "acme",
            session: "old",
            turnId,
            requestHash: "h",
            expectedLastSeq,
            messages: [message],
            reply: { ok: true, turnId },
            ...extra,
          }).pipe(provide)
        // two turns of the release of schema version 8
        for (const [i, turnId] of ["t0", "t1"].entries()) {
          expect(yield* commitOn("ctxd_commit_turn_v7", turnId, i, { length: { agent: "default", turns: i + 1 } })).toBe("ok")
        }
        expect(yield* Migrations.apply(Migrations.migrations.filter((m) => m.version <= 9)).pipe(provide)).toEqual([9])
        // the previous release's statements (ctxd_commit_turn_v7 without a user) beside the new one
        yield* Effect.gen(function* () {
          const store = yield* SessionStore.SessionStore
          expect(yield* commitOn("ctxd_commit_turn_v7", "v7", 2, { length: { agent: "default", turns: 3 } })).toBe("ok")
          expect(yield* commitOn("ctxd_commit_turn_v9", "v8", 3, { user: "u" })).toBe("ok")
          // a reply as the first release stored it (jsonb, no reply_z)
          yield* db.query(
            `INSERT INTO ctxd_turns (session_id, turn_id, request_hash, first_seq, last_seq, reply)
           SELECT id, 'v1', 'h', 7, 6, '{"ok": true, "turnId": "v1"}'::jsonb FROM ctxd_sessions WHERE session = 'old'`,
          )
          yield* db.query(`UPDATE ctxd_turns SET created_at = created_at - interval '2 days'`)
          const lifecycle = yield* LifecycleStore.LifecycleStore
          expect(yield* lifecycle.pruneReplies(24 * 3600, 100)).toBe(5)
          expect(Option.getOrThrow(yield* store.findTurn("acme", "old", "v1"))).toMatchObject({ expired: true })
          expect(yield* lifecycle.sessionsOfUser("acme", "u", 10)).toEqual(["old"])
        }).pipe(stores, provide)
      }),
  )
})
