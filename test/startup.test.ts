// A worker started before its NATS server (as in a container stack, where
// everything starts at once) keeps trying with backoff and serves once NATS
// is up, instead of exiting at the first refused connection.
import { NatsServer, TestDatabase, WorkerProcess } from "@ctxd/testing"
import { connect } from "@nats-io/transport-node"
import { Effect, Exit, Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { randomBytes } from "node:crypto"
import { expect, it } from "vitest"

const NATS_SERVER = NatsServer.BINARY

const freePort = NatsServer.freePort

it.skipIf(!existsSync(NATS_SERVER))(
  "waits for NATS to come up at start",
  async () => {
    const scope = Effect.runSync(Scope.make())
    const db = await Effect.runPromise(Scope.extend(TestDatabase.make, scope))
    const port = await freePort()
    const root = `t_${randomBytes(5).toString("hex")}`
    const storeDir = mkdtempSync(join(tmpdir(), "ctxd-nats-"))
    let nats: ChildProcess | undefined
    let worker: WorkerProcess.WorkerProcess | undefined
    try {
      worker = await WorkerProcess.start(
        { NATS_URL: `nats://127.0.0.1:${port}`, DATABASE_URL: db.url, CTXD_DB_SCHEMA: db.schema, CTXD_SUBJECT_ROOT: root },
        { ready: false },
      )
      // NATS comes up only once the worker has found it missing (however long the worker takes to boot)
      await worker.waitFor("NATS is not reachable yet; starting again", 60_000)
      nats = spawn(NATS_SERVER, ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir], { stdio: "ignore" })
      await worker.waitFor("worker ready", 60_000)
      const nc = await connect({ servers: `nats://127.0.0.1:${port}` })
      const health = (await nc.request(`${root}.v1.health`, "", { timeout: 5_000 })).json<{ ok: boolean }>()
      expect(health.ok).toBe(true)
      await nc.close()
    } finally {
      await worker?.stop()
      nats?.kill("SIGTERM")
      rmSync(storeDir, { recursive: true, force: true })
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  },
  90_000,
)

it("sets its V8 flags at start, unless node's command line names them", async () => {
  const scope = Effect.runSync(Scope.make())
  const db = await Effect.runPromise(Scope.extend(TestDatabase.make, scope))
  const env = { DATABASE_URL: db.url, CTXD_DB_SCHEMA: db.schema, CTXD_SUBJECT_ROOT: `t_${randomBytes(5).toString("hex")}` }
  try {
    const worker = await WorkerProcess.start(env)
    await worker.stop()
    expect(worker.output()).toContain("V8 flags set: --external-memory-accounted-in-global-limit")
    const off = await WorkerProcess.start(env, { nodeArgs: ["--no-external-memory-accounted-in-global-limit"] })
    await off.stop()
    expect(off.output()).toContain("worker ready")
    expect(off.output()).not.toContain("V8 flags set")
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}, 90_000)
