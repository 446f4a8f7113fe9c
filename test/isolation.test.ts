// Tenant isolation by NATS permissions: a private nats-server runs
// deploy/nats/secure.conf with its permissions as shipped (see
// privateConfig for what changes), a real worker serves it as user `ctxd` with
// CTXD_LEGACY_SUBJECTS=false, and tenants `acme` and `globex` log in with
// their own users. acme can run its own turns and endpoints; everything
// outside its scope is refused by the server itself and never reaches the
// worker.
import { ContextClient } from "@ctxd/client"
import { NatsClient } from "@ctxd/nats"
import { NatsServer, TestDatabase, WorkerProcess } from "@ctxd/testing"
import { connect, type NatsConnection, PermissionViolationError } from "@nats-io/transport-node"
import { Effect, Exit, Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const NATS_SERVER = NatsServer.BINARY
const CONFIG = join(WorkerProcess.repoRoot, "deploy/nats/secure.conf")

const freePort = NatsServer.freePort

/**
 * secure.conf with this run's port and store directory, and no monitoring
 * port. Every user and permission is the shipped file's: the worker logs in
 * as `ctxd` with NATS_USER/NATS_PASSWORD.
 */
const privateConfig = (port: number, storeDir: string): string => {
  const shipped = readFileSync(CONFIG, "utf8")
  const config = shipped
    .replace(/^port: 4222$/m, `port: ${port}`)
    .replace(/^http_port: 8222$/m, "")
    .replace(/store_dir: \/data/, `store_dir: ${JSON.stringify(storeDir)}`)
  expect(config).toContain(`port: ${port}\n`)
  expect(config).not.toMatch(/^http_port|\/data/m)
  return config
}

const encoder = new TextEncoder()
const json = (value: unknown) => encoder.encode(JSON.stringify(value))

const turn = (turnId: string) => ({
  turnId,
  format: "openai",
  model: { provider: "openai", name: "gpt-4o" },
  messages: [{ role: "user", content: `hello ${turnId}` }],
})

/** A tenant's runtime: its own user, replies under its own inbox prefix. */
const tenant = (port: number, name: string, pass = name) =>
  connect({ servers: `nats://127.0.0.1:${port}`, user: name, pass, inboxPrefix: `_INBOX_${name}`, name: `tenant-${name}` })

/**
 * Why `request` was rejected: nats.js rejects a request the server refused
 * to publish with a `RequestError` caused by the `PermissionViolationError`
 * (returned here); any other error is returned as it is.
 */
const refusal = async (nc: NatsConnection, subject: string, body: unknown = {}): Promise<unknown> => {
  try {
    await nc.request(subject, json(body), { timeout: 5_000 })
  } catch (error) {
    for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
      if (cause instanceof PermissionViolationError) return cause
    }
    return error
  }
  throw new Error(`request on ${subject} was answered`)
}

/** The error a subscription was closed with (the server refused it), within 5 s. */
const subscribeRefusal = async (nc: NatsConnection, subject: string): Promise<unknown> => {
  const sub = nc.subscribe(subject)
  await nc.flush()
  const closed = await Promise.race([sub.closed, new Promise((resolve) => setTimeout(() => resolve("still open"), 5_000))])
  if (!sub.isClosed()) sub.unsubscribe()
  return closed
}

describe.skipIf(!existsSync(NATS_SERVER))("tenant isolation (deploy/nats/secure.conf)", () => {
  const scope = Effect.runSync(Scope.make())
  const storeDir = mkdtempSync(join(tmpdir(), "ctxd-secure-nats-"))
  let port = 0
  let nats: ChildProcess | undefined
  let worker: WorkerProcess.WorkerProcess | undefined
  let acme: NatsConnection
  let globex: NatsConnection
  let spy: NatsConnection
  const seen: string[] = []

  beforeAll(async () => {
    const db = await Effect.runPromise(Scope.extend(TestDatabase.make, scope))
    port = await freePort()
    const config = join(storeDir, "secure.conf")
    writeFileSync(config, privateConfig(port, storeDir))
    nats = spawn(NATS_SERVER, ["-c", config, "-a", "127.0.0.1"], { stdio: "ignore" })
    // the workers' user sees every message the server lets through: a refused publish never shows up here
    for (let i = 0; ; i++) {
      try {
        spy = await connect({ servers: `nats://127.0.0.1:${port}`, user: "ctxd", pass: "ctxd", name: "spy" })
        break
      } catch (error) {
        if (i > 100) throw error
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
    spy.subscribe("ctx.>", { callback: (_, msg) => void seen.push(msg.subject) })
    await spy.flush()
    worker = await WorkerProcess.start(
      {
        NATS_URL: `nats://127.0.0.1:${port}`,
        NATS_USER: "ctxd",
        NATS_PASSWORD: "ctxd",
        DATABASE_URL: db.url,
        CTXD_DB_SCHEMA: db.schema,
        CTXD_SUBJECT_ROOT: "ctx",
        CTXD_LEGACY_SUBJECTS: "false",
      },
      { readyTimeoutMs: 60_000 },
    )
    acme = await tenant(port, "acme")
    globex = await tenant(port, "globex")
  }, 90_000)

  afterAll(async () => {
    await Promise.allSettled([acme?.close(), globex?.close(), spy?.close()])
    await worker?.stop()
    nats?.kill("SIGTERM")
    rmSync(storeDir, { recursive: true, force: true })
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  it("refuses a tenant's user with another password", async () => {
    await expect(tenant(port, "acme", "globex")).rejects.toThrow(/Authorization/i)
  })

  it("acme runs its own turns, knowledge, memory, learn requests, summaries, counts, usage and loop checks", async () => {
    const reply = (await acme.request("ctx.v1.turn.acme.s1", json(turn("t1")), { timeout: 15_000 })).json<{ ok: boolean; turnId: string }>()
    expect(reply).toMatchObject({ ok: true, turnId: "t1" })
    const added = await acme.request("ctx.v1.knowledge.acme", json({ op: "add", doc: { id: "d1", title: "Acme", text: "acme only" } }), {
      timeout: 10_000,
    })
    expect(added.json()).toMatchObject({ ok: true, docs: [{ id: "d1", title: "Acme" }] })
    const remembered = await acme.request("ctx.v1.memory.acme", json({ op: "remember", text: "acme prefers tabs" }), { timeout: 10_000 })
    expect(remembered.json()).toMatchObject({ ok: true, created: true })
    const count = await acme.request(
      "ctx.v1.tokens.count.acme",
      json({ model: { provider: "openai", name: "gpt-4o" }, backend: "tiktoken", segments: ["hello world"] }),
      { timeout: 10_000 },
    )
    expect(count.json()).toMatchObject({ ok: true, tokens: 2, countedBy: "tiktoken" })
    // reaches the summarizer (a malformed request is answered by it, no provider call)
    expect((await acme.request("ctx.v1.summarize.acme", json({}), { timeout: 10_000 })).json()).toMatchObject({
      ok: false,
      error: { code: "BadRequest" },
    })
    const usage = await acme.request("ctx.v1.usage.acme.s1", json({ turnId: "t1", usage: { prompt_tokens: 20 } }), { timeout: 10_000 })
    expect(usage.json()).toMatchObject({ ok: true, turnId: "t1" })
    // reaches the learn endpoint (a malformed request is answered by it, no provider call)
    expect((await acme.request("ctx.v1.learn.acme.s1", json({}), { timeout: 10_000 })).json()).toMatchObject({
      ok: false,
      error: { code: "BadRequest" },
    })
    const exported = await acme.request("ctx.v1.session.acme.s1", json({ op: "export" }), { timeout: 10_000 })
    expect(exported.json()).toMatchObject({ ok: true })
    expect(exported.json<{ lines: string }>().lines).toContain('"kind":"message"')
    const deletedUser = await acme.request("ctx.v1.user.acme", json({ op: "deleteUser", user: "nobody" }), { timeout: 10_000 })
    expect(deletedUser.json()).toMatchObject({ ok: true, removed: { sessions: 0 } })
    const loop = await acme.request("ctx.v1.loop.check", json({ format: "openai", messages: [{ role: "user", content: "hi" }] }), {
      timeout: 10_000,
    })
    expect(loop.json()).toMatchObject({ ok: true, verdict: { looping: false } })
  }, 60_000)

  it("the server refuses acme's requests outside its scope, and the worker never sees them", async () => {
    const forbidden = [
      "ctx.v1.turn.globex.x",
      "ctx.v1.knowledge.globex",
      "ctx.v1.memory.globex",
      "ctx.v1.summarize.globex",
      "ctx.v1.tokens.count.globex",
      "ctx.v1.usage.globex.x",
      "ctx.v1.compact.globex.x",
      "ctx.v1.learn.globex.x",
      // another tenant's sessions and users: no delete, no export
      "ctx.v1.session.globex.s1",
      "ctx.v1.user.globex",
      // the tenant-less legacy subjects (not served: CTXD_LEGACY_SUBJECTS=false, and not allowed)
      "ctx.v1.summarize",
      "ctx.v1.tokens.count",
      // a worker's direct subject, even for acme's own session
      "ctx.v1.worker.w1.turn.acme.s1",
      "ctx.v1.health",
      "ctx.v1.metrics",
      // JetStream's API (the work queue, the object store)
      "$JS.API.INFO",
      "$JS.API.STREAM.NAMES",
    ]
    const bodies: Record<string, unknown> = {
      "ctx.v1.turn.globex.x": turn("t-evil"),
      "ctx.v1.knowledge.globex": { op: "add", doc: { id: "evil", title: "Evil", text: "planted by acme" } },
      "ctx.v1.memory.globex": { op: "remember", text: "planted by acme" },
      "ctx.v1.session.globex.s1": { op: "delete" },
      "ctx.v1.user.globex": { op: "deleteUser", user: "u1" },
    }
    for (const subject of forbidden) {
      const error = await refusal(acme, subject, bodies[subject] ?? {})
      expect(error, subject).toBeInstanceOf(PermissionViolationError)
      expect(error, subject).toMatchObject({ operation: "publish", subject })
    }
    // the worker's own view: globex's knowledge is untouched and it has no session x
    await spy.flush()
    expect(seen.filter((s) => forbidden.includes(s))).toEqual([])
    const list = await globex.request("ctx.v1.knowledge.globex", json({ op: "list" }), { timeout: 10_000 })
    expect(list.json()).toMatchObject({ ok: true, docs: [] })
    const memories = await globex.request("ctx.v1.memory.globex", json({ op: "list" }), { timeout: 10_000 })
    expect(memories.json()).toEqual({ ok: true, documents: [] })
    // acme's connection survives the refusals
    expect((await acme.request("ctx.v1.turn.acme.s1", json(turn("t2")), { timeout: 15_000 })).json()).toMatchObject({
      ok: true,
      turnId: "t2",
    })
    // and globex cannot read acme's knowledge either
    expect(await refusal(globex, "ctx.v1.knowledge.acme", { op: "list" })).toBeInstanceOf(PermissionViolationError)
    expect(await refusal(globex, "ctx.v1.memory.acme", { op: "search", query: "tabs" })).toBeInstanceOf(PermissionViolationError)
  }, 60_000)

  it("acme cannot listen to turns, worker-direct subjects, health, JetStream or anyone else's replies", async () => {
    for (const subject of [
      "ctx.v1.turn.>",
      "ctx.v1.turn.globex.*",
      "ctx.v1.worker.>",
      "ctx.>",
      ">",
      "_INBOX.>",
      "_INBOX_globex.>",
      "$JS.>",
      "ctx.v1.compactjob.>",
    ]) {
      const closed = await subscribeRefusal(acme, subject)
      expect(closed, subject).toBeInstanceOf(PermissionViolationError)
      expect(closed, subject).toMatchObject({ operation: "subscription", subject })
    }
    // a reply to globex's request goes to globex's inbox, which acme cannot watch; globex still gets it
    const reply = await globex.request("ctx.v1.turn.globex.s1", json(turn("g1")), { timeout: 15_000 })
    expect(reply.json()).toMatchObject({ ok: true, turnId: "g1" })
  }, 60_000)

  it("acme can neither delete nor export globex's session; globex can", async () => {
    expect((await globex.request("ctx.v1.turn.globex.s2", json(turn("g2")), { timeout: 15_000 })).json()).toMatchObject({ ok: true })
    for (const body of [{ op: "delete" }, { op: "export" }]) {
      expect(await refusal(acme, "ctx.v1.session.globex.s2", body)).toBeInstanceOf(PermissionViolationError)
    }
    expect(await refusal(acme, "ctx.v1.user.globex", { op: "deleteUser", user: "u1" })).toBeInstanceOf(PermissionViolationError)
    await spy.flush()
    expect(seen.filter((s) => s.startsWith("ctx.v1.session.globex") || s === "ctx.v1.user.globex")).toEqual([])
    // globex's session is whole: its own export shows its turn, and its own delete works
    const exported = (await globex.request("ctx.v1.session.globex.s2", json({ op: "export" }), { timeout: 10_000 })).json<{
      lines: string
    }>()
    expect(exported.lines).toContain("hello g2")
    const deleted = await globex.request("ctx.v1.session.globex.s2", json({ op: "delete" }), { timeout: 10_000 })
    expect(deleted.json()).toMatchObject({ ok: true, deleted: true, removed: { sessions: 1, turns: 1 } })
  }, 60_000)

  it("a ContextClient logged in as acme sends its turns on the shared subject once the direct one is refused", async () => {
    const client = await Effect.runPromise(
      ContextClient.make({ timeoutMs: 15_000 }).pipe(Effect.provideService(NatsClient.NatsClient, { connection: acme })),
    )
    for (const turnId of ["c1", "c2", "c3"]) {
      const reply = await Effect.runPromise(client.turn("acme", "s-client", turn(turnId) as ContextClient.TurnInput))
      expect(reply.turnId).toBe(turnId)
    }
    // after the first reply named the worker's direct subject, the second turn tried it once and was refused
    await spy.flush()
    expect(seen.filter((s) => s.includes(".turn.acme.s-client"))).toEqual([
      "ctx.v1.turn.acme.s-client",
      "ctx.v1.turn.acme.s-client",
      "ctx.v1.turn.acme.s-client",
    ])
  }, 60_000)
})
