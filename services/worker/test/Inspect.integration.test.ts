// `ctxd inspect`: a committed turn read back from Postgres (a throwaway schema) by the spawned bin.
import { Database, Migrations, SessionStore } from "@ctxd/db"
import { TestDatabase } from "@ctxd/testing"
import { Context, Effect, Layer } from "effect"
import { execFile } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "vitest"

const BIN = join(import.meta.dirname, "..", "bin", "ctxd.ts")
const ctxd = (env: Record<string, string>, ...args: Array<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { encoding: "utf8", timeout: 60_000, env: { ...process.env, ...env } },
      (error, stdout, stderr) => resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr }),
    )
  })

const reply = (turnId: string) => ({
  ok: true,
  turnId,
  request: { model: "gpt-4o", messages: [{ role: "user", content: turnId }] },
  report: {
    tokens: { total: 7 },
    ...(turnId === "t2" ? { cache: { miss: { cause: "client_change", tokens: 6000, reason: "system" } } } : {}),
  },
})

describe("ctxd inspect", () => {
  it(
    "shows what was stored and sent for a turn (default the newest); exit 1 for an unknown session or turn",
    () =>
      Effect.gen(function* () {
        const { url, schema } = yield* TestDatabase.make
        const built = yield* Layer.build(
          SessionStore.layer.pipe(Layer.provide(Migrations.layer), Layer.provide(Database.layer({ url, schema }))),
        )
        const store = Context.get(built, SessionStore.SessionStore)
        const message = (text: string) => ({
          message: { role: "user" as const, parts: [{ type: "text" as const, text }] },
          tokens: 3,
          encoding: "o200k_base",
        })
        yield* store.commitTurn({
          tenant: "acme",
          session: "s1",
          turnId: "t1",
          requestHash: "h1",
          expectedLastSeq: 0,
          messages: [message("a"), message("b")],
          reply: reply("t1"),
        })
        yield* store.commitTurn({
          tenant: "acme",
          session: "s1",
          turnId: "t2",
          requestHash: "h2",
          expectedLastSeq: 2,
          messages: [message("c")],
          reply: reply("t2"),
        })
        const env = { DATABASE_URL: url, CTXD_DB_SCHEMA: schema }
        const run = (...args: Array<string>) => Effect.promise(() => ctxd(env, "inspect", ...args))

        const first = yield* run("acme", "s1", "--turn", "t1", "--json")
        expect(first.code, first.stderr).toBe(0)
        const json = JSON.parse(first.stdout) as {
          turnId: string
          stored: Array<{ seq: number }>
          request: unknown
          report: unknown
          latestTurns: Array<{ turnId: string }>
        }
        expect(json.turnId).toBe("t1")
        expect(json.stored.map((m) => m.seq)).toEqual([1, 2])
        expect(json.request).toEqual(reply("t1").request)
        expect(json.report).toEqual(reply("t1").report)
        expect(json.latestTurns.map((t) => t.turnId)).toEqual(["t2", "t1"])

        const newest = yield* run("acme", "s1")
        expect(newest.code, newest.stderr).toBe(0)
        expect(newest.stdout).toContain("turn t2: stored 1 message(s)")
        expect(newest.stdout).toContain("cache miss: 6,000 tokens of the previous prompt not read: client_change (system)")
        expect(newest.stdout).toContain("request body sent:")

        const unknownTurn = yield* run("acme", "s1", "--turn", "nope")
        expect(unknownTurn.code).toBe(1)
        expect(unknownTurn.stderr).toContain("has no turn")
        const otherTenant = yield* run("other", "s1")
        expect(otherTenant.code).toBe(1)
        expect(otherTenant.stderr).toContain("no session other/s1")
      }).pipe(Effect.scoped, Effect.runPromise),
    120_000,
  )
})
