/**
 * Session lengths (migration 7): recorded by a commit in the same statement,
 * raised only, read as one aggregate per tenant and agent over its most
 * recently created sessions; the memory store behaves the same; the
 * migration applies on a fresh schema and on one at version 6 (where
 * commits of the previous release keep working).
 */
import { TestDatabase } from "@ctxd/testing"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Database, Migrations, SessionLengthStore, SessionStore } from "../src/index.ts"
import { type LegacyCommit, legacyCommit, text } from "./Helpers.ts"

let counter = 0
const fresh = () => `len${++counter}`

const commit = (
  tenant: string,
  session: string,
  turnId: string,
  expectedLastSeq: number,
  length?: SessionStore.Length,
  messages = [text("user", "hi")],
) =>
  Effect.flatMap(SessionStore.SessionStore, (store) =>
    store.commitTurn({
      tenant,
      session,
      turnId,
      requestHash: `hash-${turnId}`,
      expectedLastSeq,
      messages: messages.map((message) => ({ message, tokens: 1, encoding: "o200k_base" })),
      reply: { ok: true, turnId },
      length,
    }),
  )

const stored = (tenant: string, session: string) =>
  Effect.flatMap(Database.Database, (db) =>
    db
      .query<{ agent: string; turns: number }>(
        `SELECT l.agent, l.turns FROM ctxd_session_lengths l JOIN ctxd_sessions s ON s.id = l.session_id
         WHERE s.tenant = $1 AND s.session = $2`,
        [tenant, session],
      )
      .pipe(Effect.map(({ rows }) => rows[0])),
  )

const sorted = (rows: ReadonlyArray<SessionLengthStore.LengthCount>) => [...rows].sort((a, b) => a.turns - b.turns)

const Live = Layer.mergeAll(SessionStore.layer, SessionLengthStore.layer).pipe(
  Layer.provideMerge(Migrations.layer),
  Layer.provideMerge(TestDatabase.layer),
)

describe("SessionLengthStore (Postgres)", () => {
  layer(Live)("on a migrated throwaway schema", (it) => {
    it.effect("a commit with a length records it in the same statement; later commits raise it, never lower it", () =>
      Effect.gen(function* () {
        const session = fresh()
        yield* commit("acme", session, "t1", 0, { agent: "coder", turns: 0 })
        expect(yield* stored("acme", session)).toEqual({ agent: "coder", turns: 0 })
        yield* commit("acme", session, "t2", 1, { agent: "coder", turns: 1 })
        yield* commit("acme", session, "t3", 2, { agent: "coder", turns: 2 })
        expect(yield* stored("acme", session)).toEqual({ agent: "coder", turns: 2 })
        // a lower count (an older view of the session) is ignored; the latest agent wins
        yield* commit("acme", session, "t4", 3, { agent: "coder", turns: 1 })
        expect(yield* stored("acme", session)).toEqual({ agent: "coder", turns: 2 })
        yield* commit("acme", session, "t5", 4, { agent: "reviewer", turns: 3 })
        expect(yield* stored("acme", session)).toEqual({ agent: "reviewer", turns: 3 })
      }),
    )

    it.effect("records nothing for a commit that fails, nor for one without a length", () =>
      Effect.gen(function* () {
        const session = fresh()
        yield* commit("acme", session, "t1", 0)
        expect(yield* stored("acme", session)).toBeUndefined()
        yield* commit("acme", session, "t2", 1, { agent: "coder", turns: 1 })
        // a stale expected seq and a repeated turn id: nothing written, the length stays
        expect((yield* commit("acme", session, "t3", 0, { agent: "coder", turns: 9 }).pipe(Effect.flip))._tag).toBe("SeqConflict")
        expect((yield* commit("acme", session, "t2", 2, { agent: "coder", turns: 9 }).pipe(Effect.flip))._tag).toBe("TurnExists")
        expect(yield* stored("acme", session)).toEqual({ agent: "coder", turns: 1 })
        // a new session that conflicts is not created, so has no length either
        const ghost = fresh()
        expect((yield* commit("acme", ghost, "t1", 3, { agent: "coder", turns: 9 }).pipe(Effect.flip))._tag).toBe("SeqConflict")
        expect(yield* stored("acme", ghost)).toBeUndefined()
      }),
    )

    it.effect("counts: one row per length, for that tenant and agent only", () =>
      Effect.gen(function* () {
        const lengths = yield* SessionLengthStore.SessionLengthStore
        const tenant = `t${fresh()}`
        for (const [agent, turns] of [
          ["coder", 3],
          ["coder", 3],
          ["coder", 10],
          ["reviewer", 7],
        ] as const) {
          yield* commit(tenant, fresh(), "t1", 0, { agent, turns })
        }
        yield* commit("other", fresh(), "t1", 0, { agent: "coder", turns: 99 })
        expect(sorted(yield* lengths.counts(tenant, "coder"))).toEqual([
          { turns: 3, sessions: 2 },
          { turns: 10, sessions: 1 },
        ])
        expect(yield* lengths.counts(tenant, "reviewer")).toEqual([{ turns: 7, sessions: 1 }])
        expect(yield* lengths.counts(tenant, "nobody")).toEqual([])
      }),
    )

    it.effect("counts are read over the most recently created sessions; record alone is the same upsert", () =>
      Effect.gen(function* () {
        const db = yield* Database.Database
        const recent = yield* SessionLengthStore.make({ sessions: 3 }).pipe(Effect.provideService(Database.Database, db))
        const lengths = yield* SessionLengthStore.SessionLengthStore
        const tenant = `t${fresh()}`
        const sessions = Array.from({ length: 5 }, fresh)
        for (const session of sessions) yield* commit(tenant, session, "t1", 0)
        // created in order; lengths recorded afterwards, in reverse: creation order decides
        for (const [i, session] of [...sessions.entries()].reverse()) yield* lengths.record(tenant, session, "coder", 100 + i)
        expect(sorted(yield* recent.counts(tenant, "coder")).map((r) => r.turns)).toEqual([102, 103, 104])
        expect((yield* lengths.counts(tenant, "coder")).length).toBe(5)
        yield* lengths.record(tenant, sessions[4]!, "coder", 1)
        yield* lengths.record(tenant, "never-stored", "coder", 50)
        expect(sorted(yield* recent.counts(tenant, "coder")).map((r) => r.turns)).toEqual([102, 103, 104])
      }),
    )
  })
})

describe("SessionLengthStore (memory)", () => {
  it.effect("raises counts, keeps the latest agent, reads the most recently created sessions, and is bounded", () =>
    Effect.gen(function* () {
      const memory = SessionLengthStore.makeMemory({ sessions: 3, maxSessions: 5 })
      for (let i = 0; i < 4; i++) yield* memory.record("acme", `s${i}`, "coder", 10 + i)
      yield* memory.record("acme", "s3", "coder", 1)
      // the 3 most recently created: s0 is left out
      expect(sorted(yield* memory.counts("acme", "coder")).map((r) => r.turns)).toEqual([11, 12, 13])
      yield* memory.record("acme", "s2", "coder", 20)
      yield* memory.record("acme", "s1", "reviewer", 30)
      expect(sorted(yield* memory.counts("acme", "coder")).map((r) => r.turns)).toEqual([10, 13, 20])
      // a sixth session drops the oldest created (s0)
      yield* memory.record("acme", "x", "reviewer", 5)
      yield* memory.record("acme", "y", "reviewer", 5)
      expect(sorted(yield* memory.counts("acme", "coder"))).toEqual([
        { turns: 13, sessions: 1 },
        { turns: 20, sessions: 1 },
      ])
      expect(sorted(yield* memory.counts("acme", "reviewer"))).toEqual([
        { turns: 5, sessions: 2 },
        { turns: 30, sessions: 1 },
      ])
      expect(yield* memory.counts("globex", "coder")).toEqual([])
    }),
  )
})

describe("migration 7", () => {
  it.scoped("applies on a schema at version 6, where commits of the previous release keep working", () =>
    Effect.gen(function* () {
      const { url, schema } = yield* TestDatabase.make
      const db = yield* Database.make({ url, schema })
      const provide = Effect.provideService(Database.Database, db)
      const atSix = Migrations.migrations.filter((m) => m.version <= 6)
      expect(yield* Migrations.apply(atSix).pipe(provide)).toEqual([1, 2, 3, 4, 5, 6])
      // the statements of the releases of those schema versions
      const commitOn = (fn: LegacyCommit, session: string, turnId: string, expected: number, length?: SessionStore.Length) =>
        legacyCommit(fn, {
          tenant: "acme",
          session,
          turnId,
          requestHash: `hash-${turnId}`,
          expectedLastSeq: expected,
          messages: [{ message: text("user", "hi"), tokens: 1, encoding: "o200k_base" }],
          reply: { ok: true, turnId },
          length,
        }).pipe(provide)
      // a session of the previous release, committed before the migration
      expect(yield* commitOn("ctxd_commit_turn", "old", "t1", 0)).toBe("ok")
      const atSeven = Migrations.migrations.filter((m) => m.version <= 7)
      expect(yield* Migrations.apply(atSeven).pipe(provide)).toEqual([7])
      // the previous release's statement still commits beside the new one
      expect(yield* commitOn("ctxd_commit_turn", "old", "t2", 1)).toBe("ok")
      expect(yield* commitOn("ctxd_commit_turn_v7", "old", "t3", 2, { agent: "default", turns: 4 })).toBe("ok")
      expect(yield* commitOn("ctxd_commit_turn_v7", "new", "t1", 0, { agent: "default", turns: 0 })).toBe("ok")
      const lengths = yield* SessionLengthStore.make().pipe(provide)
      expect(sorted(yield* lengths.counts("acme", "default"))).toEqual([
        { turns: 0, sessions: 1 },
        { turns: 4, sessions: 1 },
      ])
      expect(yield* Migrations.apply(atSeven).pipe(provide)).toEqual([])
    }),
  )
})
