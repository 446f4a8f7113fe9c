/**
 * The memory store port: the in-memory implementation (and, below, the
 * Postgres one) keep scopes apart, rank the matching documents first, keep
 * an edit history, page, forget, and refuse oversized input writing nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import { TestDatabase } from "@ctxd/testing"
import { Effect, Layer, type Scope } from "effect"
import { MemoryStore, Migrations } from "../src/index.ts"

const contract = (name: string, make: () => Effect.Effect<MemoryStore.MemoryStoreService, unknown, Scope.Scope>) =>
  describe(name, () => {
    it.scoped("search ranks the document that matches the query first, per tenant and agent", () =>
      Effect.gen(function* () {
        const store = yield* make()
        const acme = { tenant: "acme", agent: "coder" }
        yield* store.remember(acme, { text: "The user prefers PostgreSQL over MySQL for new services", tags: ["db"] })
        yield* store.remember(acme, { text: "Deployments happen on Tuesdays after the standup" })
        yield* store.remember({ tenant: "other", agent: "coder" }, { text: "The user prefers PostgreSQL too" })
        yield* store.remember({ tenant: "acme" }, { text: "PostgreSQL for the default agent" })
        const hits = yield* store.search(acme, "which database does the user prefer? postgresql")
        expect(hits.map((h) => h.text)).toEqual(["The user prefers PostgreSQL over MySQL for new services"])
        expect(hits[0]!.score).toBeGreaterThan(0)
        expect(hits[0]!.score).toBeLessThan(1)
        expect(hits[0]!.tags).toEqual(["db"])
        expect(yield* store.search(acme, "tuesday deployments")).toHaveLength(1)
        expect(yield* store.search(acme, "unrelated zebra")).toEqual([])
      }),
    )

    it.scoped("a typo still finds the document", () =>
      Effect.gen(function* () {
        const store = yield* make()
        const s = { tenant: "typo" }
        yield* store.remember(s, { text: "Kubernetes clusters run in Frankfurt" })
        yield* store.remember(s, { text: "Lunch is at noon" })
        const hits = yield* store.search(s, "kubernetse")
        expect(hits.map((h) => h.text)).toEqual(["Kubernetes clusters run in Frankfurt"])
      }),
    )

    it.scoped("a user sees their own and the agent's shared documents, not another user's", () =>
      Effect.gen(function* () {
        const store = yield* make()
        const shared = yield* store.remember({ tenant: "u" }, { text: "shared fact about billing" })
        const alice = yield* store.remember({ tenant: "u", user: "alice" }, { text: "alice billing preference" })
        yield* store.remember({ tenant: "u", user: "bob" }, { text: "bob billing preference" })
        const seen = (yield* store.search({ tenant: "u", user: "alice" }, "billing")).map((h) => h.id).sort()
        expect(seen).toEqual([shared.id, alice.id].sort())
        expect((yield* store.search({ tenant: "u" }, "billing")).map((h) => h.id)).toEqual([shared.id])
        expect(yield* store.read({ tenant: "u", user: "bob" }, alice.id)).toBeUndefined()
        expect(yield* store.forget({ tenant: "u", user: "bob" }, alice.id)).toBe(false)
        expect(yield* store.any({ tenant: "u", user: "alice" }, "learning")).toBe(false)
        expect(yield* store.any({ tenant: "u", user: "alice" })).toBe(true)
        expect(yield* store.any({ tenant: "nobody" })).toBe(false)
      }),
    )

    it.scoped("forgetUser removes the user's documents of every agent, not the shared ones nor another tenant's", () =>
      Effect.gen(function* () {
        const store = yield* make()
        const shared = yield* store.remember({ tenant: "f" }, { text: "shared fact about refunds" })
        yield* store.remember({ tenant: "f", user: "alice" }, { text: "alice prefers refunds to credit" })
        yield* store.remember({ tenant: "f", agent: "other", user: "alice" }, { text: "alice flies on Fridays" })
        const bob = yield* store.remember({ tenant: "f", user: "bob" }, { text: "bob prefers credit" })
        const elsewhere = yield* store.remember({ tenant: "g", user: "alice" }, { text: "alice in another tenant" })
        expect(yield* store.forgetUser("f", "alice")).toBe(2)
        expect(yield* store.any({ tenant: "f", agent: "other", user: "alice" })).toBe(false)
        expect((yield* store.list({ tenant: "f", user: "alice" })).documents.map((d) => d.id)).toEqual([shared.id])
        expect(yield* store.read({ tenant: "f", user: "bob" }, bob.id)).toBeDefined()
        expect(yield* store.read({ tenant: "g", user: "alice" }, elsewhere.id)).toBeDefined()
        expect(yield* store.forgetUser("f", "alice")).toBe(0)
      }),
    )

    it.scoped("an edit keeps the previous version in the history; forget removes document and history", () =>
      Effect.gen(function* () {
        const store = yield* make()
        const s = { tenant: "h", agent: "a" }
        const first = yield* store.remember(s, { text: "version one", tags: ["x"], source: "chat" })
        expect(first).toMatchObject({ version: 1, created: true })
        const second = yield* store.remember(s, { id: first.id, text: "version two", kind: "learning" })
        expect(second).toEqual({ id: first.id, version: 2, created: false })
        const doc = yield* store.read(s, first.id)
        expect(doc).toMatchObject({ id: first.id, text: "version two", kind: "learning", version: 2, tags: [] })
        // the same edit again (a retried call) stores no new version
        expect(yield* store.remember(s, { id: first.id, text: "version two", kind: "learning" })).toEqual({
          id: first.id,
          version: 2,
          created: false,
        })
        const history = yield* store.history(s, first.id)
        expect(history?.map((v) => [v.version, v.text])).toEqual([
          [2, "version two"],
          [1, "version one"],
        ])
        expect(history?.[1]).toMatchObject({ tags: ["x"], source: "chat" })
        expect(yield* store.forget(s, first.id)).toBe(true)
        expect(yield* store.read(s, first.id)).toBeUndefined()
        expect(yield* store.history(s, first.id)).toBeUndefined()
        expect(yield* store.forget(s, first.id)).toBe(false)
      }),
    )

    it.scoped("a document keeps its newest maxVersions earlier versions", () =>
      Effect.gen(function* () {
        const store = yield* make()
        const s = { tenant: "v" }
        const { id } = yield* store.remember(s, { text: "edit 0" })
        for (let i = 1; i <= MemoryStore.defaults.maxVersions + 3; i++) yield* store.remember(s, { id, text: `edit ${i}` })
        const history = (yield* store.history(s, id))!
        expect(history).toHaveLength(MemoryStore.defaults.maxVersions + 1)
        expect(history[0]!.text).toBe(`edit ${MemoryStore.defaults.maxVersions + 3}`)
        expect(history[history.length - 1]!.text).toBe("edit 3")
      }),
    )

    it.scoped("list pages newest first with a cursor, by kind", () =>
      Effect.gen(function* () {
        const store = yield* make()
        const s = { tenant: "p" }
        const ids: Array<string> = []
        for (let i = 0; i < 5; i++) ids.push((yield* store.remember(s, { text: `note ${i}`, kind: i === 2 ? "learning" : "memory" })).id)
        const one = yield* store.list(s, { limit: 2 })
        expect(one.documents.map((d) => d.id)).toEqual([ids[4], ids[3]])
        const two = yield* store.list(s, { limit: 2, cursor: one.nextCursor })
        expect(two.documents.map((d) => d.id)).toEqual([ids[2], ids[1]])
        const three = yield* store.list(s, { limit: 2, cursor: two.nextCursor })
        expect(three.documents.map((d) => d.id)).toEqual([ids[0]])
        expect(three.nextCursor).toBeUndefined()
        expect((yield* store.list(s, { kind: "learning" })).documents.map((d) => d.id)).toEqual([ids[2]])
      }),
    )

    it.scoped("oversized or malformed input is refused with its path and writes nothing", () =>
      Effect.gen(function* () {
        const store = yield* make()
        const s = { tenant: "bad" }
        const refused = (input: MemoryStore.Remember) =>
          Effect.map(Effect.flip(store.remember(s, input)), (e) => (e._tag === "MemoryInvalid" ? e : { path: `unexpected ${e._tag}` }))
        expect((yield* refused({ text: "x".repeat(MemoryStore.defaults.maxTextChars + 1) })).path).toBe("text")
        expect((yield* refused({ text: "ok", tags: Array.from({ length: 17 }, (_, i) => `t${i}`) })).path).toBe("tags")
        expect((yield* refused({ text: "ok", tags: ["fine", ""] })).path).toBe("tags.1")
        expect((yield* refused({ text: "nul \u0000 here" })).path).toBe("text")
        expect((yield* refused({ text: "ok", id: "no spaces" })).path).toBe("id")
        expect(yield* store.any(s)).toBe(false)
      }),
    )
  })

contract("MemoryStore (in memory)", () => Effect.sync(() => MemoryStore.makeMemory()))

// a migrated throwaway schema per test, dropped with the test's scope
const Live = Migrations.layer.pipe(Layer.provideMerge(TestDatabase.layer))
contract("MemoryStore (Postgres)", () => Effect.flatMap(Layer.build(Live), (context) => Effect.provide(MemoryStore.make(), context)))

describe("MemoryStore.makeMemory bounds", () => {
  it.effect("keeps at most maxDocuments, dropping the least recently updated", () =>
    Effect.gen(function* () {
      const store = MemoryStore.makeMemory({ maxDocuments: 2 })
      const s = { tenant: "b" }
      const a = yield* store.remember(s, { text: "alpha" })
      const b = yield* store.remember(s, { text: "beta" })
      yield* store.remember(s, { id: a.id, text: "alpha again" })
      yield* store.remember(s, { text: "gamma" })
      expect(yield* store.read(s, b.id)).toBeUndefined()
      expect(yield* store.read(s, a.id)).toBeDefined()
    }),
  )
})

describe("MemoryStore (Postgres) without fuzzy matching", () => {
  it.scoped("fuzzy: false finds no typo, the same words still", () =>
    Effect.gen(function* () {
      const store = yield* Effect.flatMap(Layer.build(Live), (context) => Effect.provide(MemoryStore.make({ fuzzy: false }), context))
      const s = { tenant: "nofuzzy" }
      yield* store.remember(s, { text: "Kubernetes clusters run in Frankfurt" })
      expect(yield* store.search(s, "kubernetse")).toEqual([])
      expect(yield* store.search(s, "kubernetes")).toHaveLength(1)
    }),
  )
})
