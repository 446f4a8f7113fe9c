import { TestDatabase } from "@ctxd/testing"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Metric, Option } from "effect"
import { Database, Migrations, SessionStore } from "../src/index.ts"
import { commit as commitTurn, legacyCommit, text } from "./Helpers.ts"
import * as ReplyCodec from "../src/internal/replyCodec.ts"

const Store = SessionStore.layer.pipe(Layer.provide(Migrations.layer), Layer.provideMerge(TestDatabase.layer))

let counter = 0
const fresh = () => `c${++counter}`

/** A commit of one user message (3 tokens) named after the turn. */
const commit = (session: string, turnId: string, expectedLastSeq: number, overrides: Partial<SessionStore.CommitTurn> = {}) =>
  commitTurn(session, turnId, expectedLastSeq, [], {
    messages: [{ message: text("user", turnId), tokens: 3, encoding: "o200k_base" }],
    ...overrides,
  })

/** Everything a commit could change: row counts and the session row's version. */
const snapshot = (session: string) =>
  Effect.gen(function* () {
    const db = yield* Database.Database
    const { rows } = yield* db.query<Record<string, string | null>>(
      `SELECT (SELECT count(*) FROM ctxd_sessions)::text AS sessions,
              (SELECT count(*) FROM ctxd_messages)::text AS messages,
              (SELECT count(*) FROM ctxd_turns)::text AS turns,
              (SELECT count(*) || '/' || coalesce(sum(turns), 0) FROM ctxd_session_lengths) AS lengths,
              (SELECT xmin::text || '/' || last_seq FROM ctxd_sessions WHERE tenant = 'acme' AND session = $1) AS row`,
      [session],
    )
    return rows[0]
  })

/** Overwrites the stored reply bytes of `session`'s turn `turnId` (as another release, or a corruption, left them). */
const storeReplyZ = (session: string, turnId: string, bytes: Uint8Array) =>
  Effect.flatMap(Database.Database, (db) =>
    db.query(
      `UPDATE ctxd_turns SET reply_z = $3 WHERE turn_id = $2
         AND session_id = (SELECT id FROM ctxd_sessions WHERE session = $1)`,
      [session, turnId, bytes],
    ),
  )

/** A ~30 KB reply shaped like a provider request body, with text in several scripts. */
const bigReply = (turnId: string) => ({
  ok: true,
  turnId,
  request: {
    model: "gpt-4o",
    messages: Array.from({ length: 60 }, (_, i) => ({
      role: i % 2 === 0 ? "user" : "assistant",
      content: `message ${i}: ünïcödé «quotes» — 日本語のテキスト 😀 \\u0000 is not a NUL here; "escaped" \\ backslash ${"x".repeat(300)}`,
    })),
    tools: [{ type: "function", function: { name: "get", description: "d".repeat(2_000), parameters: {} } }],
  },
  report: { tokens: { total: 12_345 }, lone: "\ud800 surrogate" },
})

describe("ctxd_commit_turn", () => {
  layer(Store)("on a migrated throwaway schema", (it) => {
    // this release's function, and the first one (workers of earlier releases still call it)
    it.effect.each([
      ["ctxd_commit_turn_v11", ", 'agent', $9::integer, NULL"],
      ["ctxd_commit_turn", ""],
    ] as const)("%s returns ok / not_owner / exists / conflict, and writes only on ok", ([fn, tail]) =>
      Effect.gen(function* () {
        const db = yield* Database.Database
        const session = fresh()
        yield* db.query(
          `INSERT INTO ctxd_shard_leases (shard, owner, epoch, expires_at) VALUES (21, 'w1', 2, now() + interval '1 minute') ON CONFLICT DO NOTHING`,
        )
        const call = (turnId: string, expected: number, fence: readonly [number, string, string] | null = null) =>
          db
            .query<{ status: string; actual_last_seq: number | null; stored_request_hash: string | null }>(
              `SELECT status, actual_last_seq, stored_request_hash
               FROM ${fn}('acme', $1, $2, 'h', $3, $4::jsonb, $5, $6, $7, $8${tail})`,
              [
                session,
                turnId,
                expected,
                JSON.stringify([{ message: text("user", turnId), tokens: 1, encoding: "e" }]),
                ReplyCodec.encode("{}"),
                ...(fence ?? [null, null, null]),
                ...(tail === "" ? [] : [expected + 1]),
              ],
            )
            .pipe(Effect.map(({ rows }) => rows[0]))

        // a new session: failures create nothing
        const empty = yield* snapshot(session)
        expect(yield* call("t1", 0, [21, "w1", "1"])).toMatchObject({ status: "not_owner", actual_last_seq: null })
        expect(yield* call("t1", 4)).toMatchObject({ status: "conflict", actual_last_seq: 0 })
        expect(yield* snapshot(session)).toEqual(empty)

        expect(yield* call("t1", 0, [21, "w1", "2"])).toMatchObject({ status: "ok", actual_last_seq: 1 })
        expect(yield* call("t2", 1)).toMatchObject({ status: "ok", actual_last_seq: 2 })
        // an existing session: failures leave even the session row's version alone
        const before = yield* snapshot(session)
        expect(yield* call("t2", 2, [21, "w2", "2"])).toMatchObject({ status: "not_owner" })
        expect(yield* call("t1", 2)).toMatchObject({ status: "exists", stored_request_hash: "h" })
        expect(yield* call("t3", 1)).toMatchObject({ status: "conflict", actual_last_seq: 2 })
        expect(yield* snapshot(session)).toEqual(before)
      }),
    )

    /** A commit of one user message named after the turn, for `session`, as a worker makes it. */
    const turnInput = (
      session: string,
      turnId: string,
      expectedLastSeq: number,
      overrides: Partial<SessionStore.CommitTurn> = {},
    ): SessionStore.CommitTurn => ({
      tenant: "acme",
      session,
      turnId,
      requestHash: `hash-${turnId}`,
      expectedLastSeq,
      messages: [{ message: text("user", turnId), tokens: 3, encoding: "o200k_base" }],
      reply: { ok: true, turnId },
      ...overrides,
    })

    /** The transaction that wrote each session's row last (one statement: one transaction). */
    const writers = (sessions: ReadonlyArray<string>) =>
      Effect.flatMap(Database.Database, (db) =>
        db.query<{ session: string; xmin: string }>(
          "SELECT session, xmin::text AS xmin FROM ctxd_sessions WHERE tenant = 'acme' AND session = ANY ($1::text[])",
          [sessions],
        ),
      ).pipe(Effect.map(({ rows }) => new Map(rows.map((r) => [r.session, r.xmin]))))

    it.effect("commits arriving while one is in flight go out together in one statement, each with its own outcome", () =>
      Effect.gen(function* () {
        const db = yield* Database.Database
        // one statement in flight: the first commit goes alone, the five after it wait and go together
        const store = yield* SessionStore.SessionStore.pipe(Effect.provide(SessionStore.layerWith({ statements: 1 })))
        const [first, ok, stored, behind, fenced, full] = Array.from({ length: 6 }, fresh)
        const before = yield* Metric.value(SessionStore.commitTurns)
        yield* db.query(
          `INSERT INTO ctxd_shard_leases (shard, owner, epoch, expires_at) VALUES (33, 'w1', 2, now() + interval '1 minute') ON CONFLICT DO NOTHING`,
        )
        yield* store.commitTurn(turnInput(stored!, "t1", 0, { reply: { ok: true, turnId: "t1", stored: true } }))
        yield* store.commitTurn(turnInput(behind!, "t1", 0))
        const exits = yield* Effect.all(
          [
            store.commitTurn(turnInput(first!, "t1", 0)),
            store.commitTurn(turnInput(ok!, "t1", 0)),
            // a retry of a committed turn: its stored reply
            store.commitTurn(turnInput(stored!, "t1", 1)),
            // the session is at 1
            store.commitTurn(turnInput(behind!, "t2", 0)),
            store.commitTurn(turnInput(fenced!, "t1", 0, { fence: { shard: 33, owner: "w2", epoch: 2 } })),
            store.commitTurn(
              turnInput(full!, "t1", 0, { fence: { shard: 33, owner: "w1", epoch: 2 }, length: { agent: "a", turns: 1 }, user: "u1" }),
            ),
          ].map(Effect.exit),
          { concurrency: "unbounded" },
        )
        expect(exits[0]).toEqual(Exit.succeed({ firstSeq: 1, lastSeq: 1 }))
        expect(exits[1]).toEqual(Exit.succeed({ firstSeq: 1, lastSeq: 1 }))
        expect(exits[2]).toMatchObject(
          Exit.fail({
            _tag: "TurnExists",
            stored: { turnId: "t1", reply: { ok: true, turnId: "t1", stored: true }, firstSeq: 1, lastSeq: 1 },
          }),
        )
        expect(exits[3]).toMatchObject(Exit.fail({ _tag: "SeqConflict", expectedLastSeq: 0, actualLastSeq: 1 }))
        expect(exits[4]).toMatchObject(Exit.fail({ _tag: "NotOwner", shard: 33, owner: "w2" }))
        expect(exits[5]).toEqual(Exit.succeed({ firstSeq: 1, lastSeq: 1 }))
        // the first alone, the two that wrote after it in one transaction; the failed ones wrote nothing
        const xmin = yield* writers([first!, ok!, full!, fenced!])
        expect(xmin.get(ok!)).toBe(xmin.get(full!))
        expect(xmin.get(first!)).not.toBe(xmin.get(ok!))
        expect(xmin.has(fenced!)).toBe(false)
        expect((yield* store.loadMessages("acme", full!, 0)).map((m) => m.message)).toEqual([text("user", "t1")])
        const side = yield* db.query<{ n: string }>(
          `SELECT ((SELECT count(*) FROM ctxd_session_lengths l JOIN ctxd_sessions s ON s.id = l.session_id WHERE s.session = $1)
                 + (SELECT count(*) FROM ctxd_session_users u JOIN ctxd_sessions s ON s.id = u.session_id WHERE s.session = $1 AND u.user_id = 'u1'))::text AS n`,
          [full!],
        )
        expect(side.rows[0]!.n).toBe("2")
        // ctxd_commit_batch_turns: the two commits before, the first alone, the five together
        const after = yield* Metric.value(SessionStore.commitTurns)
        expect([after.count - before.count, after.sum - before.sum]).toEqual([4, 8])
      }),
    )

    it.effect("a commit Postgres refuses fails alone: the batch it was in runs again commit by commit", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore.pipe(Effect.provide(SessionStore.layerWith({ statements: 1 })))
        const [first, a, bad, b] = Array.from({ length: 4 }, fresh)
        const splits = (yield* Metric.value(SessionStore.commitSplits)).count
        const exits = yield* Effect.all(
          [
            store.commitTurn(turnInput(first!, "t1", 0)),
            store.commitTurn(turnInput(a!, "t1", 0)),
            // jsonb holds no U+0000: Postgres rolls the whole statement back
            store.commitTurn(
              turnInput(bad!, "t1", 0, { messages: [{ message: text("user", "nul \u0000 here"), tokens: 3, encoding: "o200k_base" }] }),
            ),
            store.commitTurn(turnInput(b!, "t1", 0)),
          ].map(Effect.exit),
          { concurrency: "unbounded" },
        )
        expect(exits[1]).toEqual(Exit.succeed({ firstSeq: 1, lastSeq: 1 }))
        expect(exits[2]).toMatchObject(Exit.fail({ _tag: "DatabaseError", code: "22P05" }))
        expect(exits[3]).toEqual(Exit.succeed({ firstSeq: 1, lastSeq: 1 }))
        const xmin = yield* writers([a!, bad!, b!])
        expect(xmin.has(bad!)).toBe(false)
        // committed alone after the batch failed
        expect(xmin.get(a!)).not.toBe(xmin.get(b!))
        expect((yield* Metric.value(SessionStore.commitSplits)).count - splits).toBe(1)
      }),
    )

    it.effect("maxBatch 1: every commit alone, as before group commit", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore.pipe(Effect.provide(SessionStore.layerWith({ statements: 1, maxBatch: 1 })))
        const sessions = Array.from({ length: 4 }, fresh)
        yield* Effect.all(
          sessions.map((s) => store.commitTurn(turnInput(s, "t1", 0))),
          { concurrency: "unbounded" },
        )
        expect(new Set((yield* writers(sessions)).values()).size).toBe(4)
      }),
    )

    it.effect("stores the reply compressed and gives it back intact (unicode, escapes, lone surrogates)", () =>
      Effect.gen(function* () {
        const db = yield* Database.Database
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        const reply = bigReply("t1")
        yield* commit(session, "t1", 0, { reply })
        const expected = JSON.parse(JSON.stringify(reply)) as unknown
        expect(Option.getOrThrow(yield* store.findTurn("acme", session, "t1")).reply).toEqual(expected)
        const again = yield* commit(session, "t1", 1, { reply: { other: true } }).pipe(Effect.flip)
        expect(again._tag === "TurnExists" && again.stored.reply).toEqual(expected)

        const { rows } = yield* db.query<{ reply: unknown; size: number; storage: string }>(
          `SELECT t.reply, octet_length(t.reply_z) AS size, a.attstorage AS storage
           FROM ctxd_turns t JOIN ctxd_sessions s ON s.id = t.session_id
           JOIN pg_attribute a ON a.attrelid = 'ctxd_turns'::regclass AND a.attname = 'reply_z'
           WHERE s.session = $1`,
          [session],
        )
        expect(rows[0]?.reply).toBeNull()
        expect(rows[0]?.storage).toBe("e")
        expect(rows[0]!.size).toBeLessThan(Buffer.byteLength(JSON.stringify(reply)) / 3)

        // an absent reply is stored as null, as before
        yield* commit(session, "t2", 1, { reply: undefined })
        expect(Option.getOrThrow(yield* store.findTurn("acme", session, "t2")).reply).toBeNull()
      }),
    )

    it.effect("reads turns written before v3 (reply as jsonb)", () =>
      Effect.gen(function* () {
        const db = yield* Database.Database
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        yield* commit(session, "t1", 0)
        const { rows } = yield* db.query<{ id: string }>("SELECT id FROM ctxd_sessions WHERE session = $1", [session])
        yield* db.query(
          `INSERT INTO ctxd_turns (session_id, turn_id, request_hash, first_seq, last_seq, reply)
           VALUES ($1, 'old', 'hash-old', 2, 1, $2::jsonb)`,
          [rows[0]!.id, JSON.stringify({ ok: true, text: "from v1 — ✓" })],
        )
        const stored = { turnId: "old", requestHash: "hash-old", reply: { ok: true, text: "from v1 — ✓" }, firstSeq: 2, lastSeq: 1 }
        expect(Option.getOrThrow(yield* store.findTurn("acme", session, "old"))).toEqual(stored)
        const error = yield* commit(session, "old", 1).pipe(Effect.flip)
        expect(error).toMatchObject({ _tag: "TurnExists", stored })
      }),
    )

    it.effect("reads a reply stored raw (codec 0: the UTF-8 JSON as it is, for a column Postgres compresses)", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        yield* commit(session, "t1", 0)
        const reply = { ok: true, text: "raw — ✓", pad: "x".repeat(5_000) }
        yield* storeReplyZ(session, "t1", Buffer.concat([Buffer.from([0]), Buffer.from(JSON.stringify(reply))]))
        expect(Option.getOrThrow(yield* store.findTurn("acme", session, "t1")).reply).toEqual(reply)
      }),
    )

    it.effect("a stored reply that cannot be decoded is a DatabaseError, not a defect", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        yield* commit(session, "t1", 0)
        yield* storeReplyZ(session, "t1", Uint8Array.of(0x07, 0xff))
        expect(yield* store.findTurn("acme", session, "t1").pipe(Effect.flip)).toMatchObject({ _tag: "DatabaseError" })
      }),
    )

    it.effect("concurrent commits on one session: exactly one wins per expected seq", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        for (let round = 0; round < 4; round++) {
          // round 0 races to create the session
          const results = yield* Effect.all(
            Array.from({ length: 8 }, (_, i) => commit(session, `r${round}w${i}`, round).pipe(Effect.either)),
            { concurrency: "unbounded" },
          )
          const won = results.flatMap((r) => (r._tag === "Right" ? [r.right] : []))
          expect(won).toEqual([{ firstSeq: round + 1, lastSeq: round + 1 }])
          for (const r of results) {
            if (r._tag === "Left") expect(r.left).toMatchObject({ _tag: "SeqConflict", actualLastSeq: round + 1 })
          }
        }
        expect((yield* store.loadMessages("acme", session, 0)).map((m) => m.seq)).toEqual([1, 2, 3, 4])
      }),
    )

    it.effect("concurrent retries of one turn: one commits, the others get TurnExists with it", () =>
      Effect.gen(function* () {
        const session = fresh()
        const results = yield* Effect.all(
          Array.from({ length: 6 }, () => commit(session, "t1", 0, { reply: bigReply("t1") }).pipe(Effect.either)),
          { concurrency: "unbounded" },
        )
        expect(results.filter((r) => r._tag === "Right").length).toBe(1)
        for (const r of results) {
          if (r._tag === "Left") {
            expect(r.left).toMatchObject({ _tag: "TurnExists", stored: { turnId: "t1", firstSeq: 1, lastSeq: 1 } })
            expect(r.left._tag === "TurnExists" && r.left.stored.reply).toEqual(JSON.parse(JSON.stringify(bigReply("t1"))))
          }
        }
        const store = yield* SessionStore.SessionStore
        expect((yield* store.loadMessages("acme", session, 0)).map((m) => m.seq)).toEqual([1])
      }),
    )
  })

  it.scoped("two schemas do not see each other's data through the function", () =>
    Effect.gen(function* () {
      const schemas = yield* Effect.all([TestDatabase.make, TestDatabase.make])
      const stores = yield* Effect.forEach(schemas, ({ url, schema }) =>
        Effect.gen(function* () {
          const db = yield* Database.make({ url, schema, poolMax: 1 })
          yield* Migrations.run.pipe(Effect.provideService(Database.Database, db))
          const store = yield* SessionStore.SessionStore.pipe(
            Effect.provide(SessionStore.layer),
            Effect.provideService(Database.Database, db),
          )
          return { db, store }
        }),
      )
      const a = stores[0]!
      const b = stores[1]!
      const input = (schema: string): SessionStore.CommitTurn => ({
        tenant: "acme",
        session: "same",
        turnId: "t1",
        requestHash: schema,
        expectedLastSeq: 0,
        messages: [{ message: text("user", `in ${schema}`), tokens: 1, encoding: "e" }],
        reply: { schema },
      })
      // same tenant, session and turn id in both: both are new
      expect(yield* a.store.commitTurn(input(a.db.schema))).toEqual({ firstSeq: 1, lastSeq: 1 })
      expect(yield* b.store.commitTurn(input(b.db.schema))).toEqual({ firstSeq: 1, lastSeq: 1 })
      for (const { db, store } of [a, b]) {
        expect((yield* store.loadMessages("acme", "same", 0)).map((m) => m.message)).toEqual([text("user", `in ${db.schema}`)])
        expect(Option.getOrThrow(yield* store.findTurn("acme", "same", "t1")).reply).toEqual({ schema: db.schema })
        // one function per schema, without a pinned search_path
        const { rows } = yield* db.query<{ schema: string; config: unknown }>(
          `SELECT n.nspname AS schema, p.proconfig AS config FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE p.proname = 'ctxd_commit_turn' AND n.nspname IN ($1, $2)`,
          [a.db.schema, b.db.schema],
        )
        expect(rows.map((r) => r.schema).sort()).toEqual([a.db.schema, b.db.schema].sort())
        expect(rows.every((r) => r.config === null)).toBe(true)
        // the hot statements were prepared on this (single) connection
        const prepared = yield* db.query<{ name: string }>("SELECT name FROM pg_prepared_statements ORDER BY name")
        expect(prepared.rows.map((r) => r.name)).toEqual(["ctxd_commit_turn_v11", "ctxd_find_turn_v3", "ctxd_load_messages_v1"])
      }
    }),
  )

  it.scoped("migration 11 applies on a schema at version 10: the previous release's commits and this one's interleave on a session", () =>
    Effect.gen(function* () {
      const { url, schema } = yield* TestDatabase.make
      const db = yield* Database.make({ url, schema })
      const provide = Effect.provideService(Database.Database, db)
      expect(yield* Migrations.apply(Migrations.migrations.filter((m) => m.version <= 10)).pipe(provide)).toHaveLength(10)
      const input = (turnId: string, expectedLastSeq: number, turns: number, user?: string): SessionStore.CommitTurn => ({
        tenant: "acme",
        session: "mixed",
        turnId,
        requestHash: `hash-${turnId}`,
        expectedLastSeq,
        messages: [{ message: text("user", turnId), tokens: 1, encoding: "o200k_base" }],
        reply: { ok: true, turnId },
        length: { agent: "default", turns },
        user,
      })
      expect(yield* legacyCommit("ctxd_commit_turn_v9", input("t1", 0, 1, "u1")).pipe(provide)).toBe("ok")
      expect(yield* Migrations.apply(Migrations.migrations).pipe(provide)).toEqual(
        Migrations.migrations.filter((m) => m.version > 10).map((m) => m.version),
      )
      const store = yield* SessionStore.SessionStore.pipe(Effect.provide(SessionStore.layer), provide)
      expect(yield* store.commitTurn(input("t2", 1, 2, "u2"))).toEqual({ firstSeq: 2, lastSeq: 2 })
      expect(yield* legacyCommit("ctxd_commit_turn_v9", input("t3", 2, 3, "u1")).pipe(provide)).toBe("ok")
      expect(yield* store.commitTurn(input("t4", 3, 4))).toEqual({ firstSeq: 4, lastSeq: 4 })
      // a retry of a turn the previous release committed, through this release: its reply
      const again = yield* store.commitTurn(input("t3", 4, 5)).pipe(Effect.flip)
      expect(again).toMatchObject({ _tag: "TurnExists", stored: { turnId: "t3", reply: { ok: true, turnId: "t3" } } })
      const { rows } = yield* db.query<{ turns: number; users: string }>(
        `SELECT l.turns, (SELECT string_agg(u.user_id, ',' ORDER BY u.user_id) FROM ctxd_session_users u WHERE u.session_id = s.id) AS users
         FROM ctxd_sessions s JOIN ctxd_session_lengths l ON l.session_id = s.id WHERE s.session = 'mixed'`,
      )
      expect(rows).toEqual([{ turns: 4, users: "u1,u2" }])
      expect((yield* store.loadMessages("acme", "mixed", 0)).map((m) => m.seq)).toEqual([1, 2, 3, 4])
    }),
  )

  it("detects U+0000 in JSON text, and only the character", () => {
    expect(ReplyCodec.hasNul(JSON.stringify({ t: "a\u0000b" }))).toBe(true)
    expect(ReplyCodec.hasNul(JSON.stringify({ t: "\\\u0000" }))).toBe(true)
    expect(ReplyCodec.hasNul(JSON.stringify({ t: "\\u0000" }))).toBe(false)
    expect(ReplyCodec.hasNul(JSON.stringify({ t: "\\\\u0000" }))).toBe(false)
    // the same on the UTF-8 bytes the worker sends and stores
    const utf8 = (value: unknown) => new TextEncoder().encode(JSON.stringify(value))
    expect(ReplyCodec.hasNul(utf8({ t: "a\u0000b" }))).toBe(true)
    expect(ReplyCodec.hasNul(utf8({ t: "\\u0000" }))).toBe(false)
    expect(ReplyCodec.hasNul(utf8({ t: "😀 ü" }))).toBe(false)
    expect(ReplyCodec.decode(ReplyCodec.encode(JSON.stringify({ t: "😀 ü" })))).toEqual({ t: "😀 ü" })
    expect(ReplyCodec.decode(ReplyCodec.encode(utf8({ t: "😀 ü" })))).toEqual({ t: "😀 ü" })
    expect(() => ReplyCodec.decode(Buffer.from([9, 1, 2]))).toThrow(/codec 9/)
  })
})
