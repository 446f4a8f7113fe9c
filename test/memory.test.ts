/**
 * `ctx.v1.memory.<tenant>` end to end: a real worker on real NATS and
 * Postgres, called from a raw nats.js client with the documented JSON.
 * Remember, search (ranked, typo-tolerant, scoped by tenant, agent and
 * user), read, list (paged), history, forget; bad input is a coded
 * `BadRequest` with the field's path and writes nothing; a reply is cut to
 * the byte cap and says so.
 */
import { Memory } from "@ctxd/contracts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start()
}, 60_000)
afterAll(async () => {
  await h?.close()
})

const memory = (tenant: string, body: unknown) => h.request(`${h.root}.v1.memory.${tenant}`, body, 15_000)

describe("ctx.v1.memory.<tenant>", () => {
  it("remembers, searches by relevance, reads, edits with history, lists in pages and forgets", async () => {
    const db = await memory("acme", {
      op: "remember",
      agent: "coder",
      text: "The team deploys with Argo CD to the staging cluster every Tuesday",
      tags: ["deploy"],
      source: "s1",
    })
    expect(db).toMatchObject({ ok: true, version: 1, created: true })
    await memory("acme", { op: "remember", agent: "coder", text: "The user prefers short answers without emojis" })
    await memory("acme", { op: "remember", agent: "coder", user: "alice", text: "Alice's laptop runs Fedora and deploys by hand" })
    await memory("globex", { op: "remember", agent: "coder", text: "Globex deploys with Argo CD too" })

    const found = await memory("acme", { op: "search", agent: "coder", query: "how do we deploy to staging?" })
    expect(found.ok).toBe(true)
    expect(found.results.map((r: Memory.Hit) => r.id)).toEqual([db.id])
    expect(found.results[0]).toMatchObject({ kind: "memory", tags: ["deploy"] })
    expect(found.results[0].score).toBeGreaterThan(0)
    // alice sees her own memory and the agent's shared ones; the shared scope does not see hers
    const alice = await memory("acme", { op: "search", agent: "coder", user: "alice", query: "deploys" })
    expect(alice.results).toHaveLength(2)
    expect((await memory("acme", { op: "search", agent: "coder", query: "fedora laptop" })).results).toEqual([])
    // a typo still finds it (pg_trgm)
    expect((await memory("acme", { op: "search", agent: "coder", query: "emojsi" })).results.map((r: Memory.Hit) => r.text)).toEqual([
      "The user prefers short answers without emojis",
    ])
    // another agent of the same tenant sees nothing
    expect((await memory("acme", { op: "search", query: "deploy staging" })).results).toEqual([])

    const edited = await memory("acme", {
      op: "remember",
      agent: "coder",
      id: db.id,
      text: "The team deploys with Flux to staging every Wednesday",
    })
    expect(edited).toEqual({ ok: true, id: db.id, version: 2, created: false })
    const read = await memory("acme", { op: "read", agent: "coder", id: db.id })
    expect(read.document).toMatchObject({ id: db.id, text: "The team deploys with Flux to staging every Wednesday", version: 2 })
    const history = await memory("acme", { op: "history", agent: "coder", id: db.id })
    expect(history.versions.map((v: Memory.Version) => v.version)).toEqual([2, 1])
    expect(history.versions[1]).toMatchObject({
      text: "The team deploys with Argo CD to the staging cluster every Tuesday",
      tags: ["deploy"],
      source: "s1",
    })

    const first = await memory("acme", { op: "list", agent: "coder", limit: 1 })
    expect(first.documents).toHaveLength(1)
    expect(first.nextCursor).toBeDefined()
    const second = await memory("acme", { op: "list", agent: "coder", limit: 1, cursor: first.nextCursor })
    expect(second.documents).toHaveLength(1)
    expect(second.nextCursor).toBeUndefined()
    expect([first.documents[0].id, second.documents[0].id]).toContain(db.id)

    expect(await memory("acme", { op: "forget", agent: "coder", id: db.id })).toEqual({ ok: true, forgotten: true })
    expect(await memory("acme", { op: "read", agent: "coder", id: db.id })).toEqual({ ok: true })
    expect(await memory("acme", { op: "history", agent: "coder", id: db.id })).toEqual({ ok: true })
    expect(await memory("acme", { op: "forget", agent: "coder", id: db.id })).toEqual({ ok: true, forgotten: false })
    // globex's copy is untouched
    expect((await memory("globex", { op: "search", agent: "coder", query: "argo" })).results).toHaveLength(1)
  }, 60_000)

  it("bad input is a BadRequest naming the field, and nothing is written", async () => {
    const cases: Array<[unknown, string]> = [
      [{ op: "remember", text: "x".repeat(Memory.limits.textChars + 1) }, "text"],
      [{ op: "remember", text: "ok", tags: Array.from({ length: Memory.limits.tags + 1 }, (_, i) => `t${i}`) }, "tags"],
      [{ op: "remember", text: "ok", kind: "secret" }, "kind"],
      [{ op: "remember", text: "ok", user: "no spaces allowed" }, "user"],
      [{ op: "search", query: "" }, "query"],
      [{ op: "search", query: "x", limit: Memory.limits.maxSearchLimit + 1 }, "limit"],
      [{ op: "list", cursor: "not-a-cursor" }, "cursor"],
    ]
    for (const [body, path] of cases) {
      const reply = await memory("bad", body)
      expect(reply, JSON.stringify(body).slice(0, 80)).toMatchObject({ ok: false, error: { code: "BadRequest" } })
      expect(reply.error.path, JSON.stringify(body).slice(0, 80)).toContain(path)
    }
    expect(await memory("bad", { op: "remember", text: "a\u0000b" })).toMatchObject({
      ok: false,
      error: { code: "BadRequest", path: "text" },
    })
    const lone = await memory("bad", new TextEncoder().encode('{"op":"remember","text":"a\\udc00b"}'))
    expect(lone).toMatchObject({ ok: false, error: { code: "BadRequest", path: "text" } })
    expect(await memory("bad", { op: "vacuum" })).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    expect(await memory("bad", { op: "list" })).toEqual({ ok: true, documents: [] })
  }, 60_000)

  it("a search reply stops at the byte cap and says so", async () => {
    const text = `quarterly revenue report ${"lorem ipsum dolor sit amet ".repeat(Math.floor((Memory.limits.textChars - 40) / 27))}`
    for (let i = 0; i < 40; i++) await memory("big", { op: "remember", text: `${i} ${text}`.slice(0, Memory.limits.textChars) })
    const reply = await memory("big", { op: "search", query: "quarterly revenue", limit: 40 })
    expect(reply.truncated).toBe(true)
    expect(reply.results.length).toBeGreaterThan(0)
    expect(reply.results.length).toBeLessThan(40)
    expect(Buffer.byteLength(JSON.stringify(reply.results))).toBeLessThanOrEqual(Memory.limits.replyBytes)
    const page = await memory("big", { op: "list", limit: 40 })
    expect(page.truncated).toBe(true)
    const rest = await memory("big", { op: "list", limit: 40, cursor: page.nextCursor })
    expect(page.documents.length + rest.documents.length).toBe(40)
  }, 120_000)
})
