// A worker and ContextClient on a NATS server that requires TLS (a CA and a
// client certificate made here) and a user and password, and redaction: a
// worker started with secrets everywhere (provider API keys, the NATS password,
// a password in DATABASE_URL), whose provider answers every call with 401 and
// echoes the key it was sent, logs at debug level, answers turns, errors,
// health and metrics (NATS and HTTP), and none of it holds a secret. A worker
// given a wrong NATS password stops at once with a clear error, without it.
import { ContextClient } from "@ctxd/client"
import { NatsServer, TestDatabase, TestNats, WorkerProcess } from "@ctxd/testing"
import { connect } from "@nats-io/transport-node"
import { Effect, Exit, Scope } from "effect"
import { randomBytes } from "node:crypto"
import { mkdtempSync } from "node:fs"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const secret = (prefix: string) => `${prefix}-${randomBytes(12).toString("hex")}`
const SECRETS = {
  anthropic: secret("sk-ant"),
  openai: secret("sk-proj"),
  gemini: secret("AIza"),
  nats: secret("nats-pw"),
  postgres: secret("pg-pw"),
}

/** A provider that refuses every key, echoing it in its error message (in each provider's error shape). */
const hostileProvider = async (): Promise<{ url: string; calls: () => number; close: () => Promise<void> }> => {
  let calls = 0
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    calls++
    req.resume()
    const echoed =
      `x-api-key=${String(req.headers["x-api-key"])} authorization=${String(req.headers.authorization)} ` +
      `x-goog-api-key=${String(req.headers["x-goog-api-key"])}`
    const path = req.url ?? ""
    const body = path.startsWith("/v1beta")
      ? { error: { code: 401, message: `API key not valid (${echoed})`, status: "UNAUTHENTICATED" } }
      : path.startsWith("/v1/messages")
        ? { type: "error", error: { type: "authentication_error", message: `invalid x-api-key (${echoed})` } }
        : { error: { message: `Incorrect API key provided (${echoed})`, type: "invalid_request_error", code: "invalid_api_key" } }
    res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify(body))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { url, calls: () => calls, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

describe.skipIf(!NatsServer.available())("NATS with TLS and a password; secrets redacted", () => {
  const scope = Effect.runSync(Scope.make())
  const root = TestNats.uniqueRoot()
  let pki: NatsServer.Pki
  let nats: NatsServer.NatsServer
  let provider: Awaited<ReturnType<typeof hostileProvider>>
  let worker: WorkerProcess.WorkerProcess
  let client: ContextClient.PromiseClient
  let natsUrl = ""
  let httpBase = ""
  let env: Record<string, string> = {}
  /** Every reply and HTTP body the test saw, checked for secrets at the end. */
  const seen: string[] = []

  beforeAll(async () => {
    const db = await Effect.runPromise(Scope.extend(TestDatabase.make, scope))
    const dir = mkdtempSync(join(tmpdir(), "ctxd-pki-"))
    pki = NatsServer.makePki(dir)
    nats = await NatsServer.start(`${NatsServer.tlsBlock(pki)}\nauthorization { user: ctxd, password: ${JSON.stringify(SECRETS.nats)} }`, {
      dir,
    })
    natsUrl = `tls://127.0.0.1:${nats.port}`
    provider = await hostileProvider()
    const dbUrl = new URL(db.url)
    dbUrl.password = SECRETS.postgres
    const httpPort = await NatsServer.freePort()
    httpBase = `http://127.0.0.1:${httpPort}`
    env = {
      NATS_URL: natsUrl,
      NATS_USER: "ctxd",
      NATS_PASSWORD: SECRETS.nats,
      NATS_TLS_CA: pki.ca,
      NATS_TLS_CERT: pki.clientCert,
      NATS_TLS_KEY: pki.clientKey,
      DATABASE_URL: dbUrl.toString(),
      CTXD_DB_SCHEMA: db.schema,
      CTXD_SUBJECT_ROOT: root,
      ANTHROPIC_BASE_URL: provider.url,
      ANTHROPIC_API_KEY: SECRETS.anthropic,
      OPENAI_BASE_URL: `${provider.url}/v1`,
      OPENAI_API_KEY: SECRETS.openai,
      GOOGLE_GEMINI_BASE_URL: provider.url,
      GEMINI_API_KEY: SECRETS.gemini,
      CTXD_HTTP_PORT: String(httpPort),
      CTXD_HTTP_HOST: "127.0.0.1",
      LOG_LEVEL: "debug",
    }
    worker = await WorkerProcess.start(env, { readyTimeoutMs: 60_000 })
    client = await ContextClient.connect({
      servers: natsUrl,
      root,
      auth: { user: "ctxd", password: SECRETS.nats, tlsCa: pki.ca, tlsCert: pki.clientCert, tlsKey: pki.clientKey },
    })
  }, 90_000)

  afterAll(async () => {
    await client?.close()
    await worker?.stop()
    await provider?.close()
    await nats?.stop()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  const base = { format: "openai" as const, model: { provider: "openai" as const, name: "gpt-4o" } }

  it("a ContextClient with options and one from the environment both get turns and health through", async () => {
    const reply = await client.turn("acme", "tls-1", { ...base, messages: [{ role: "user", content: "hello" }] })
    expect(reply.ok).toBe(true)
    seen.push(JSON.stringify(reply))
    const saved = { ...process.env }
    Object.assign(process.env, {
      NATS_USER: "ctxd",
      NATS_PASSWORD: SECRETS.nats,
      NATS_TLS_CA: pki.ca,
      NATS_TLS_CERT: pki.clientCert,
      NATS_TLS_KEY: pki.clientKey,
    })
    let fromEnv: ContextClient.PromiseClient | undefined
    try {
      fromEnv = await ContextClient.connect({ servers: natsUrl, root, auth: "env" })
    } finally {
      for (const name of ["NATS_USER", "NATS_PASSWORD", "NATS_TLS_CA", "NATS_TLS_CERT", "NATS_TLS_KEY"]) {
        if (saved[name] === undefined) delete process.env[name]
        else process.env[name] = saved[name]
      }
    }
    try {
      const health = await fromEnv.health()
      expect(health.ok).toBe(true)
      seen.push(JSON.stringify(health))
      const again = await fromEnv.turn("acme", "tls-1", {
        ...base,
        messages: [
          { role: "assistant", content: "hi" },
          { role: "user", content: "again" },
        ],
      })
      expect(again.ok).toBe(true)
    } finally {
      await fromEnv.close()
    }
  })

  it("a client with the wrong password is refused with a clear error that does not hold it", async () => {
    const wrong = secret("wrong")
    const error = await ContextClient.connect({
      servers: natsUrl,
      root,
      auth: { user: "ctxd", password: wrong, tlsCa: pki.ca, tlsCert: pki.clientCert, tlsKey: pki.clientKey },
    }).catch((e: unknown) => e)
    expect(error).toMatchObject({ _tag: "NatsAuthError", code: "Rejected" })
    expect(String((error as Error).message)).toContain("Authorization Violation")
    expect(JSON.stringify(error)).not.toContain(wrong)
    expect(String(error)).not.toContain(wrong)
  })

  it("failed provider calls (counting, the loop judge), errors, health and metrics hold no secret", async () => {
    // exact counting with each provider: every count call is refused (401), counted locally
    const anthropic = await client.turn("acme", "anth", {
      format: "anthropic",
      model: { provider: "anthropic", name: "claude-sonnet-4-5" },
      messages: [{ role: "user", content: "count me" }],
    })
    expect(anthropic.report.counter).toMatchObject({ exact: false })
    seen.push(JSON.stringify(anthropic))
    const gemini = await client.turn("acme", "gem", {
      format: "gemini",
      model: { provider: "google", name: "gemini-2.5-flash" },
      contents: [{ role: "user", parts: [{ text: "count me" }] }],
    } as never)
    seen.push(JSON.stringify(gemini))
    // the loop judge is asked at the borderline; its provider refuses and echoes the key
    const judged = (turnId: string, messages: unknown[]) =>
      client.turn("acme", "judged", { ...base, turnId, messages, options: { loop: { judge: { enabled: true } } } } as never)
    const sameCall = (i: number) => [
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: `c${i}`, type: "function", function: { name: "search", arguments: '{"q":"x"}' } }],
      },
      { role: "tool", tool_call_id: `c${i}`, content: "no results" },
    ]
    seen.push(JSON.stringify(await judged("j0", [{ role: "user", content: "find x" }])))
    seen.push(JSON.stringify(await judged("j1", sameCall(1))))
    const third = await judged("j2", sameCall(2))
    seen.push(JSON.stringify(third))
    expect(third.report.loop?.judge).toMatchObject({ answered: false })
    expect(third.report.loop?.judge?.reason).toContain("judge failed")
    // the provider's error body (which echoed the key) is withheld: its status and type are kept
    expect(third.report.loop?.judge?.reason).toContain("openai auth: 401 invalid_request_error (code invalid_api_key")
    expect(third.report.loop?.judge?.reason).toContain("body withheld")
    expect(provider.calls()).toBeGreaterThanOrEqual(3)
    // an error reply
    const bad = await client
      .turn("acme", "bad", { ...base, messages: [{ role: "tool", tool_call_id: "ghost", content: "x" }] })
      .catch((e: unknown) => e)
    expect(bad).toMatchObject({ code: "BadRequest" })
    seen.push(JSON.stringify(bad), String(bad))
    // health and metrics over NATS (a plain nats.js client with the same credentials) and HTTP
    const nc = await connect({
      servers: natsUrl,
      user: "ctxd",
      pass: SECRETS.nats,
      tls: { caFile: pki.ca, certFile: pki.clientCert, keyFile: pki.clientKey },
    })
    try {
      for (const subject of [`${root}.v1.health`, `${root}.v1.metrics`]) {
        seen.push((await nc.request(subject, "{}", { timeout: 5_000 })).string())
      }
    } finally {
      await nc.close()
    }
    for (const path of ["/metrics", "/healthz", "/readyz"]) {
      const res = await fetch(`${httpBase}${path}`)
      expect(res.status).toBe(200)
      seen.push(await res.text())
    }
    const lines = [...seen, worker.output()].join("\n").split("\n")
    expect(worker.output()).toContain("exact count unavailable") // the debug lines were written
    for (const [name, value] of Object.entries(SECRETS)) {
      expect(
        lines.filter((line) => line.includes(value)),
        `${name} leaked`,
      ).toEqual([])
    }
  }, 60_000)

  it("a worker with a wrong NATS password (in NATS_URL) stops at once with a clear error, without it", async () => {
    const wrong = secret("wrong")
    const { NATS_USER: _u, NATS_PASSWORD: _p, ...rest } = env
    const bad = await WorkerProcess.start(
      { ...rest, NATS_URL: `tls://ctxd:${wrong}@127.0.0.1:${nats.port}`, CTXD_HTTP_PORT: "0" },
      { ready: false },
    )
    const code = await new Promise<number | string>((resolve) => bad.child.once("exit", (c, s) => resolve(c ?? s ?? "")))
    expect(code).not.toBe(0)
    const output = bad.output()
    expect(output).toContain("refused the connection's credentials")
    expect(output).toContain(`tls://127.0.0.1:${nats.port}`)
    expect(output).not.toContain(wrong)
    expect(output).not.toContain("is not reachable yet") // not retried as if NATS were down
  }, 60_000)
})
