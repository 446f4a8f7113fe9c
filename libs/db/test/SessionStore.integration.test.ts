import type { Conversation } from "@ctxd/contracts"
import { TestDatabase } from "@ctxd/testing"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, HashMap, Layer, Logger, Option } from "effect"
import { Database, Migrations, SessionStore } from "../src/index.ts"
import { commit, text } from "./Helpers.ts"

const Store = SessionStore.layer.pipe(Layer.provide(Migrations.layer), Layer.provideMerge(TestDatabase.layer))

let counter = 0
/** A session name no other test uses. */
const fresh = () => `s${++counter}`

const rowCounts = Effect.gen(function* () {
  const db = yield* Database.Database
  const { rows } = yield* db.query<{ sessions: string; messages: string; turns: string }>(
    `SELECT (SELECT count(*) FROM ctxd_sessions) AS sessions,
            (SELECT count(*) FROM ctxd_messages) AS messages,
            (SELECT count(*) FROM ctxd_turns) AS turns`,
  )
  return { sessions: Number(rows[0]!.sessions), messages: Number(rows[0]!.messages), turns: Number(rows[0]!.turns) }
})

describe("SessionStore", () => {
  layer(Store)("on a migrated throwaway schema", (it) => {
    it.effect("commits a turn and loads its messages back in order", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        const first = [text("user", "hi"), text("assistant", "hello"), text("user", "how are you?")]
        expect(yield* commit(session, "t1", 0, first)).toEqual({ firstSeq: 1, lastSeq: 3 })
        expect(yield* commit(session, "t2", 3, [text("assistant", "fine")])).toEqual({ firstSeq: 4, lastSeq: 4 })

        const all = yield* store.loadMessages("acme", session, 0)
        expect(all.map((m) => m.seq)).toEqual([1, 2, 3, 4])
        expect(all.map((m) => m.message)).toEqual([...first, text("assistant", "fine")])
        expect(all[1]).toMatchObject({ tokens: 11, encoding: "o200k_base" })
        expect((yield* store.loadMessages("acme", session, 2)).map((m) => m.seq)).toEqual([3, 4])
        expect(yield* store.loadMessages("acme", session, 4)).toEqual([])
        expect(yield* store.loadMessages("acme", "never-seen", 0)).toEqual([])

        const turn = yield* store.findTurn("acme", session, "t1")
        expect(Option.getOrThrow(turn)).toEqual({
          turnId: "t1",
          requestHash: "hash-t1",
          reply: { ok: true, turnId: "t1" },
          firstSeq: 1,
          lastSeq: 3,
        })
        expect(Option.isNone(yield* store.findTurn("acme", session, "t9"))).toBe(true)
      }),
    )

    it.effect("stores a reply given as UTF-8 JSON as it is (encoded once: the bytes sent are the bytes a retry gets)", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        const reply = { ok: true, turnId: "t1", note: "déjà vu 😀" }
        // the bytes win over the value: they are what was sent
        const utf8 = new TextEncoder().encode(JSON.stringify({ ...reply, sent: true }))
        yield* commit(session, "t1", 0, [text("user", "hi")], { reply, replyUtf8: utf8 })
        expect(Option.getOrThrow(yield* store.findTurn("acme", session, "t1")).reply).toEqual({ ...reply, sent: true })
      }),
    )

    it.effect("keeps a message's full structure (tool calls, results, images, opaque blocks)", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        const rich: ReadonlyArray<Conversation.Message> = [
          {
            role: "assistant",
            parts: [
              { type: "text", text: "let me check ✓ — «ünïcödé» 😀" },
              {
                type: "tool_call",
                id: "c1",
                name: "get",
                input: { q: [1, 2, { deep: null }] },
                arguments: '{"q":[1,2,{"deep":null}]}',
              },
              { type: "opaque", format: "anthropic", block: { type: "thinking", thinking: "hmm", signature: "sig" } },
            ],
          },
          {
            role: "tool",
            parts: [
              {
                type: "tool_result",
                callId: "c1",
                isError: false,
                content: [{ type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBORw0KGgo=" } }],
              },
            ],
          },
          { role: "system", developer: true, name: "ops", parts: [{ type: "text", text: "be brief" }] },
        ]
        yield* commit(session, "t1", 0, rich)
        expect((yield* store.loadMessages("acme", session, 0)).map((m) => m.message)).toEqual(rich)
      }),
    )

    it.effect("a turn with no new messages is recorded and appends nothing", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        yield* commit(session, "t1", 0, [text("user", "hi")])
        expect(yield* commit(session, "t2", 1, [])).toEqual({ firstSeq: 2, lastSeq: 1 })
        expect((yield* store.loadMessages("acme", session, 0)).length).toBe(1)
        expect(yield* commit(session, "t3", 1, [text("user", "again")])).toEqual({ firstSeq: 2, lastSeq: 2 })
      }),
    )

    it.effect("a repeated turn id fails with TurnExists carrying the stored turn, and writes nothing", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        yield* commit(session, "t1", 0, [text("user", "hi")])
        const before = yield* rowCounts
        // a retry (same expected seq) and a stale retry (seq moved on) both find the turn
        for (const expected of [0, 1]) {
          const error = yield* commit(session, "t1", expected, [text("user", "hi")], { requestHash: "other" }).pipe(Effect.flip)
          expect(error._tag).toBe("TurnExists")
          if (error._tag === "TurnExists") {
            expect(error.stored).toMatchObject({ turnId: "t1", requestHash: "hash-t1", reply: { ok: true, turnId: "t1" } })
          }
        }
        expect(yield* rowCounts).toEqual(before)
        expect((yield* store.loadMessages("acme", session, 0)).length).toBe(1)
      }),
    )

    it.effect("a stale expectedLastSeq fails with SeqConflict and writes nothing", () =>
      Effect.gen(function* () {
        const session = fresh()
        yield* commit(session, "t1", 0, [text("user", "hi"), text("assistant", "hello")])
        const before = yield* rowCounts
        const error = yield* commit(session, "t2", 0, [text("user", "late")]).pipe(Effect.flip)
        expect(error).toMatchObject({ _tag: "SeqConflict", expectedLastSeq: 0, actualLastSeq: 2 })
        const ahead = yield* commit(session, "t3", 5, [text("user", "early")]).pipe(Effect.flip)
        expect(ahead).toMatchObject({ _tag: "SeqConflict", actualLastSeq: 2 })
        expect(yield* rowCounts).toEqual(before)
      }),
    )

    it.effect("concurrent writers on one session: exactly one wins, the others get SeqConflict", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        const results = yield* Effect.all(
          Array.from({ length: 5 }, (_, i) => commit(session, `t${i}`, 0, [text("user", `writer ${i}`)]).pipe(Effect.either)),
          { concurrency: "unbounded" },
        )
        expect(results.filter((r) => r._tag === "Right").length).toBe(1)
        for (const r of results) {
          if (r._tag === "Left") expect(r.left).toMatchObject({ _tag: "SeqConflict", actualLastSeq: 1 })
        }
        expect((yield* store.loadMessages("acme", session, 0)).map((m) => m.seq)).toEqual([1])
      }),
    )

    it.effect("the same session name under two tenants is two sessions", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        yield* commit(session, "t1", 0, [text("user", "acme's secret")])
        yield* commit(session, "t1", 0, [text("user", "globex's"), text("assistant", "ok")], { tenant: "globex" })
        expect((yield* store.loadMessages("acme", session, 0)).map((m) => m.message)).toEqual([text("user", "acme's secret")])
        expect((yield* store.loadMessages("globex", session, 0)).length).toBe(2)
        expect(Option.isSome(yield* store.findTurn("globex", session, "t1"))).toBe(true)
        expect(Option.isNone(yield* store.findTurn("initech", session, "t1"))).toBe(true)
        expect(yield* store.loadMessages("initech", session, 0)).toEqual([])
      }),
    )

    it.effect("a commit that fails mid-transaction leaves nothing behind", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore
        const before = yield* rowCounts
        // Postgres jsonb rejects NUL: the failure comes after the session row was upserted and locked.
        const session = fresh()
        const error = yield* commit(session, "t1", 0, [text("user", "ok"), text("user", "bad \u0000 byte")]).pipe(Effect.flip)
        expect(error).toMatchObject({ _tag: "DatabaseError", code: "22P05" })
        const badReply = yield* commit(session, "t1", 0, [text("user", "ok")], { reply: { text: "\u0000" } }).pipe(Effect.flip)
        expect(badReply._tag).toBe("DatabaseError")
        // the same when the reply comes encoded already
        const badUtf8 = yield* commit(session, "t1", 0, [text("user", "ok")], {
          replyUtf8: new TextEncoder().encode(JSON.stringify({ text: "\u0000" })),
        }).pipe(Effect.flip)
        expect(badUtf8).toMatchObject({ _tag: "DatabaseError", code: "22P05" })
        expect(yield* rowCounts).toEqual(before)
        // and the session is still usable from seq 0
        expect(yield* commit(session, "t1", 0, [text("user", "ok")])).toEqual({ firstSeq: 1, lastSeq: 1 })
        expect((yield* store.loadMessages("acme", session, 0)).length).toBe(1)
      }),
    )

    it.effect("a failed statement is logged with its SQLSTATE and message, never the data", () =>
      Effect.gen(function* () {
        const lines: Array<{ level: string; message: string; annotations: Record<string, unknown> }> = []
        const capture = Logger.make(({ logLevel, message, annotations }) => {
          lines.push({ level: logLevel.label, message: String(message), annotations: Object.fromEntries(HashMap.toEntries(annotations)) })
        })
        const marker = "SECRET-PROMPT-MARKER"
        const error = yield* commit(fresh(), "t1", 0, [text("user", `${marker} a\ud800b`)]).pipe(
          Effect.flip,
          Effect.provide(Logger.replace(Logger.defaultLogger, capture)),
        )
        expect(error._tag).toBe("DatabaseError")
        const logged = lines.find((l) => l.message.includes("commitTurn failed"))
        expect(logged).toMatchObject({ level: "ERROR", annotations: { sqlstate: "22P02" } }) // invalid input syntax for type json
        expect(JSON.stringify(lines)).not.toContain(marker)
      }),
    )

    it.effect("bulk-appends a large turn in one statement", () =>
      Effect.gen(function* () {
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        const many = Array.from({ length: 500 }, (_, i) => text(i % 2 === 0 ? "user" : "assistant", `message ${i}`))
        expect(yield* commit(session, "big", 0, many)).toEqual({ firstSeq: 1, lastSeq: 500 })
        const loaded = yield* store.loadMessages("acme", session, 0)
        expect(loaded.length).toBe(500)
        expect(loaded[499]).toMatchObject({ seq: 500, message: text("assistant", "message 499") })
      }),
    )

    it.effect("a fenced commit is applied only while the writer's shard lease is current", () =>
      Effect.gen(function* () {
        const db = yield* Database.Database
        const store = yield* SessionStore.SessionStore
        const session = fresh()
        yield* db.query(
          `INSERT INTO ctxd_shard_leases (shard, owner, epoch, expires_at) VALUES
             (7, 'w1', 3, now() + interval '1 minute'),
             (8, 'w1', 1, now() - interval '1 second'),
             (9, NULL, 5, now())`,
        )
        const fenced = (turnId: string, expected: number, fence: SessionStore.Fence) =>
          commit(session, turnId, expected, [text("user", turnId)], { fence })

        expect(yield* fenced("t1", 0, { shard: 7, owner: "w1", epoch: 3 })).toEqual({ firstSeq: 1, lastSeq: 1 })
        expect(yield* fenced("t2", 1, { shard: 7, owner: "w1", epoch: 3n })).toEqual({ firstSeq: 2, lastSeq: 2 })
        const before = yield* rowCounts
        const rejected = [
          { shard: 7, owner: "w1", epoch: 2 }, // stale epoch
          { shard: 7, owner: "w2", epoch: 3 }, // someone else
          { shard: 8, owner: "w1", epoch: 1 }, // expired
          { shard: 9, owner: "w1", epoch: 5 }, // released
          { shard: 10, owner: "w1", epoch: 0 }, // no lease row
        ]
        for (const fence of rejected) {
          const error = yield* fenced("t3", 2, fence).pipe(Effect.flip)
          expect(error).toMatchObject({ _tag: "NotOwner", shard: fence.shard, owner: fence.owner, epoch: String(fence.epoch) })
        }
        expect(yield* rowCounts).toEqual(before)
        // the fence is checked before the turn id: a stale owner learns nothing about the session
        expect(yield* fenced("t1", 0, { shard: 7, owner: "w1", epoch: 2 }).pipe(Effect.flip)).toMatchObject({
          _tag: "NotOwner",
        })

        // a takeover (new owner, epoch + 1) fences the old owner out; the new owner writes
        yield* db.query(`UPDATE ctxd_shard_leases SET owner = 'w2', epoch = 4 WHERE shard = 7`)
        expect(yield* fenced("t3", 2, { shard: 7, owner: "w1", epoch: 3 }).pipe(Effect.flip)).toMatchObject({
          _tag: "NotOwner",
        })
        expect(yield* fenced("t3", 2, { shard: 7, owner: "w2", epoch: 4 })).toEqual({ firstSeq: 3, lastSeq: 3 })
        expect((yield* store.loadMessages("acme", session, 0)).map((m) => m.message)).toEqual(
          ["t1", "t2", "t3"].map((t) => text("user", t)),
        )
      }),
    )
  })
})
