// The store contract, run against both layers: Postgres (a migrated throwaway
// schema) and memory (`layerMemory`), so replay and unit tests on the memory
// layer see what the worker sees on Postgres.
import { TestDatabase } from "@ctxd/testing"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { KnowledgeStore, Migrations, SessionStore, UsageStore } from "../src/index.ts"
import { commit, text } from "./Helpers.ts"

const postgres = Layer.mergeAll(SessionStore.layer, KnowledgeStore.layer, UsageStore.layer).pipe(
  Layer.provide(Migrations.layer),
  Layer.provide(TestDatabase.layer),
)
const memory = Layer.mergeAll(SessionStore.layerMemory(), KnowledgeStore.layerMemory, UsageStore.layerMemory)

let n = 0
const fresh = () => `contract-${++n}`

for (const [name, stores] of [
  ["postgres", postgres],
  ["memory", memory],
] as const) {
  describe(`store contract: ${name}`, () => {
    layer(stores)((it) => {
      it.effect("SessionStore: appends in order, finds and lists turns, answers nothing for other tenants", () =>
        Effect.gen(function* () {
          const store = yield* SessionStore.SessionStore
          const session = fresh()
          expect(yield* commit(session, "t1", 0, [text("user", "hi"), text("assistant", "hello")])).toEqual({ firstSeq: 1, lastSeq: 2 })
          expect(yield* commit(session, "t2", 2, [text("user", "more")])).toEqual({ firstSeq: 3, lastSeq: 3 })
          expect(yield* commit(session, "t3", 3, [])).toEqual({ firstSeq: 4, lastSeq: 3 })
          const all = yield* store.loadMessages("acme", session, 0)
          expect(all.map((m) => [m.seq, m.message, m.tokens, m.encoding])).toEqual([
            [1, text("user", "hi"), 10, "o200k_base"],
            [2, text("assistant", "hello"), 11, "o200k_base"],
            [3, text("user", "more"), 10, "o200k_base"],
          ])
          expect((yield* store.loadMessages("acme", session, 2)).map((m) => m.seq)).toEqual([3])
          const t2 = yield* store.findTurn("acme", session, "t2")
          expect(Option.getOrThrow(t2)).toEqual({
            turnId: "t2",
            requestHash: "hash-t2",
            reply: { ok: true, turnId: "t2" },
            firstSeq: 3,
            lastSeq: 3,
          })
          expect((yield* store.listTurns("acme", session, 2)).map((t) => [t.turnId, t.firstSeq, t.lastSeq])).toEqual([
            ["t3", 4, 3],
            ["t2", 3, 3],
          ])
          expect(Option.isNone(yield* store.findTurn("other", session, "t1"))).toBe(true)
          expect(yield* store.loadMessages("other", session, 0)).toEqual([])
          expect(yield* store.listTurns("other", session, 10)).toEqual([])
        }),
      )

      it.effect("SessionStore: a known turn id, a stale last seq and a NUL in the reply write nothing", () =>
        Effect.gen(function* () {
          const store = yield* SessionStore.SessionStore
          const session = fresh()
          yield* commit(session, "t1", 0, [text("user", "hi")])
          const again = yield* Effect.flip(commit(session, "t1", 1, [text("user", "again")]))
          expect(again._tag).toBe("TurnExists")
          if (again._tag === "TurnExists")
            expect(again.stored).toMatchObject({ turnId: "t1", requestHash: "hash-t1", firstSeq: 1, lastSeq: 1 })
          const stale = yield* Effect.flip(commit(session, "t2", 0, [text("user", "late")]))
          expect(stale).toMatchObject({ _tag: "SeqConflict", expectedLastSeq: 0, actualLastSeq: 1 })
          const nul = yield* Effect.flip(commit(session, "t3", 1, [text("user", "x")], { reply: { text: "a\u0000b" } }))
          expect(nul).toMatchObject({ _tag: "DatabaseError", code: "22P05" })
          expect((yield* store.loadMessages("acme", session, 0)).map((m) => m.message)).toEqual([text("user", "hi")])
          expect((yield* store.listTurns("acme", session, 10)).map((t) => t.turnId)).toEqual(["t1"])
        }),
      )

      it.effect("KnowledgeStore: documents by id, pages, replace and remove", () =>
        Effect.gen(function* () {
          const kb = yield* KnowledgeStore.KnowledgeStore
          const agent = fresh()
          for (const id of ["c", "a", "b"]) yield* kb.add("acme", agent, { id, title: `T${id}`, text: `body ${id}` })
          yield* kb.add("acme", agent, { id: "b", title: "Tb2", text: "body b2" })
          expect((yield* kb.docs("acme", agent)).map((d) => [d.id, d.title, d.text])).toEqual([
            ["a", "Ta", "body a"],
            ["b", "Tb2", "body b2"],
            ["c", "Tc", "body c"],
          ])
          expect(yield* kb.page("acme", agent, undefined, 2)).toEqual({
            docs: [
              { id: "a", title: "Ta" },
              { id: "b", title: "Tb2" },
            ],
            more: true,
          })
          expect(yield* kb.page("acme", agent, "b", 2)).toEqual({ docs: [{ id: "c", title: "Tc" }], more: false })
          expect(yield* kb.remove("acme", agent, "a")).toBe(true)
          expect(yield* kb.remove("acme", agent, "a")).toBe(false)
          expect(yield* kb.docs("other", agent)).toEqual([])
        }),
      )

      it.effect("UsageStore: the first report of a turn claims it", () =>
        Effect.gen(function* () {
          const usage = yield* UsageStore.UsageStore
          const session = fresh()
          expect(yield* usage.claim("acme", session, "t1", 100)).toBe(true)
          expect(yield* usage.claim("acme", session, "t1", 100)).toBe(false)
          expect(yield* usage.claim("other", session, "t1", 100)).toBe(true)
        }),
      )
    })
  })
}
