// ctxd.yaml hot reload, end to end: a real worker process on real NATS and
// Postgres. Editing the file changes the next turn's prompt and report without
// a restart; an invalid edit keeps the previous config (the health reply and
// /readyz still show its hash) and the log says why; a process-level key's
// change is logged as needing a restart.
import { FakeProvider, NatsServer, WorkerProcess } from "@ctxd/testing"
import { mkdtempSync, renameSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

const dir = mkdtempSync(join(tmpdir(), "ctxd-config-reload-"))
const file = join(dir, "ctxd.yaml")
/** Replaces the file as an editor does (write aside, rename over). */
const edit = (text: string) => {
  writeFileSync(`${file}.tmp`, text)
  renameSync(`${file}.tmp`, file)
}
const yaml = (compression: string, maxConcurrent = 4, acmeKey = false) => `CTXD_MAX_CONCURRENT: ${maxConcurrent}
defaults:
  toolCompression: ${compression}
tenants:
  acme:
    loop: { policy: escalate }${acmeKey ? "\n    providers: { anthropic: { apiKeyEnv: ACME_ANTHROPIC_KEY } }" : ""}
agents:
  coder:
    toolCompression: aggressive
`
writeFileSync(file, yaml("minify"))

let h: Harness.Harness
let port: number
let provider: FakeProvider.FakeProviderServer
const ACME_KEY = "sk-ant-acme-reload-AC42"
beforeAll(async () => {
  port = await NatsServer.freePort()
  provider = await FakeProvider.start()
  h = await Harness.start({
    CTXD_CONFIG_FILE: file,
    CTXD_CONFIG_DEBOUNCE_MS: "50",
    CTXD_HTTP_PORT: String(port),
    CTXD_HTTP_HOST: "127.0.0.1",
    // no tenant may use the worker's key: a tenant's count is exact only with its own
    CTXD_WORKER_KEY_TENANTS: "",
    ANTHROPIC_BASE_URL: provider.url,
    ANTHROPIC_API_KEY: "sk-ant-worker-reload-WK42",
    ACME_ANTHROPIC_KEY: ACME_KEY,
  })
})
afterAll(async () => {
  await h?.close()
  await provider?.close()
})

let n = 0
const turn = async (tenant: string, options?: Record<string, unknown>) => {
  const reply = await h.request(h.turnSubject(tenant, `s${n}`), {
    turnId: `t${n++}`,
    format: "openai",
    model: { provider: "openai", name: "gpt-4o" },
    tools: [
      {
        type: "function",
        function: {
          name: "f",
          description: "Does f.",
          parameters: { type: "object", properties: { x: { type: "string", description: "the x" } } },
        },
      },
    ],
    messages: [{ role: "user", content: "hi" }],
    ...(options === undefined ? {} : { options }),
  })
  expect(reply.ok).toBe(true)
  return reply
}
const health = async () => (await h.request(`${h.root}.v1.health`, {})).config as { hash: string; reloads: number; rejected: number }
const readyz = async () =>
  ((await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as { config: unknown }).config as { hash: string; reloads: number }
/** Polls the health reply until `done` (the reload is asynchronous: a file event, then the debounce). */
const until = async (done: (c: Awaited<ReturnType<typeof health>>) => boolean) => {
  for (let i = 0; i < 200; i++) {
    const config = await health()
    if (done(config)) return config
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`config never reached the expected state:\n${h.worker.output()}`)
}

it("applies the file's defaults, tenant and agent sections; an edit applies from the next turn; an invalid edit keeps the last good config", async () => {
  const first = await health()
  expect(first).toEqual({ hash: expect.stringMatching(/^[0-9a-f]{12}$/), reloads: 0, rejected: 0 })
  expect(await readyz()).toMatchObject({ hash: first.hash, reloads: 0 })

  expect((await turn("other")).report.tools.compression).toBe("minify")
  const acme = await turn("acme")
  expect(acme.report.tools.compression).toBe("minify")
  expect(acme.report.loop.policy).toBe("escalate")
  expect((await turn("acme", { agent: "coder" })).report.tools.compression).toBe("aggressive")
  expect((await turn("acme", { agent: "coder", toolCompression: "none" })).report.tools.compression).toBe("none")
  const minified = (await turn("other")).request.tools[0]

  // a valid edit: the next turn's prompt changes, no restart
  edit(yaml("truncate"))
  const second = await until((c) => c.reloads === 1)
  expect(second.hash).not.toBe(first.hash)
  const truncated = await turn("other")
  expect(truncated.report.tools.compression).toBe("truncate")
  expect(truncated.request.tools[0]).not.toEqual(minified)
  expect(JSON.stringify(minified)).toContain("the x")
  expect(JSON.stringify(truncated.request.tools[0])).not.toContain("the x")
  expect(h.worker.output()).toContain(`config ${second.hash} applied (reload 1)`)

  // an invalid edit: the previous config stays, the log says where
  edit(yaml("bogus-level"))
  const kept = await until((c) => c.rejected === 1)
  expect(kept).toEqual({ hash: second.hash, reloads: 1, rejected: 1 })
  expect(await readyz()).toMatchObject({ hash: second.hash, reloads: 1, rejected: 1 })
  expect((await turn("other")).report.tools.compression).toBe("truncate")
  await h.worker.waitFor(`${file}:3:3: defaults.toolCompression: Expected`)
  expect(h.worker.output()).toContain(`keeping ${second.hash}`)
  expect(h.worker.output()).not.toContain("bogus-level")

  // fixed, with a process-level key changed: the sections apply, the key needs a restart
  edit(yaml("none", 8))
  await until((c) => c.reloads === 2)
  expect((await turn("other")).report.tools.compression).toBe("none")
  await h.worker.waitFor("config: CTXD_MAX_CONCURRENT changed; read at start, needs a restart")
})

it("the per-request readers of the tenant sections (provider keys) follow a reload too", async () => {
  const count = () =>
    h.request(`${h.root}.v1.tokens.count.acme`, {
      model: { provider: "anthropic", name: "claude-sonnet-4-5" },
      backend: "anthropic_api",
      body: { model: "claude-sonnet-4-5", max_tokens: 10, messages: [{ role: "user", content: "How many tokens is this?" }] },
    })
  provider.reset()
  const before = await count()
  expect(before).toMatchObject({ ok: true, exact: false, fallback: "key_not_allowed" })
  expect(provider.requests()).toHaveLength(0)
  const { reloads } = await health()
  edit(yaml("none", 8, true))
  await until((c) => c.reloads === reloads + 1)
  const after = await count()
  expect(after.ok, JSON.stringify(after)).toBe(true)
  expect(after.exact).toBe(true)
  expect(new Set(provider.requests().map((r) => r.keyHint))).toEqual(new Set([ACME_KEY.slice(-4)]))
})

it("an unresolved alias, an alias bomb and an oversized file are rejected and counted; the next valid edit still applies", async () => {
  const before = await health()
  edit("defaults:\n  windowMessages: *w\n")
  await until((c) => c.rejected === before.rejected + 1)
  await h.worker.waitFor(`${file}:2:19: (file): YAML: the alias *w names no anchor defined before it`)
  let bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x]\n"
  for (let i = 1; i < 9; i++) bomb += `l${i}: &l${i} [${Array.from({ length: 9 }, () => `*l${i - 1}`).join(", ")}]\n`
  edit(bomb)
  await until((c) => c.rejected === before.rejected + 2)
  await h.worker.waitFor("YAML: aliases expand the file to more than")
  edit(`defaults:\n  agent: ${"s3cr3t".repeat(200_000)}\n`)
  await until((c) => c.rejected === before.rejected + 3)
  await h.worker.waitFor("a configuration file may have")
  expect(h.worker.output()).not.toContain("s3cr3t")
  expect(await health()).toMatchObject({ hash: before.hash, reloads: before.reloads })
  edit(yaml("minify"))
  const after = await until((c) => c.reloads === before.reloads + 1)
  expect(after.rejected).toBe(before.rejected + 3)
  expect((await turn("other")).report.tools.compression).toBe("minify")
})

it("an unresolved alias stops the start with its file:line:col, not a stack trace", async () => {
  const bad = join(dir, "alias.yaml")
  writeFileSync(bad, "defaults:\n  windowMessages: *w\n")
  const worker = await WorkerProcess.start({ CTXD_SUBJECT_ROOT: "t_never", CTXD_CONFIG_FILE: bad, CTXD_HTTP_PORT: "0" }, { ready: false })
  const code = await new Promise<number | string>((resolve) => worker.child.once("exit", (c, s) => resolve(c ?? s ?? "")))
  expect(code).not.toBe(0)
  expect(worker.output()).toContain(`CTXD_CONFIG_FILE ${bad} is not valid:\n${bad}:2:19: (file): YAML: the alias *w names no anchor`)
  expect(worker.output()).not.toContain("ReferenceError")
})

it("an invalid file stops the start, saying where (key path and line)", async () => {
  const bad = join(dir, "bad.yaml")
  writeFileSync(bad, "NATS_URL: nats://127.0.0.1:4222\ndefaults:\n  maskKeep: many\n")
  const worker = await WorkerProcess.start({ CTXD_SUBJECT_ROOT: "t_never", CTXD_CONFIG_FILE: bad, CTXD_HTTP_PORT: "0" }, { ready: false })
  const code = await new Promise<number | string>((resolve) => worker.child.once("exit", (c, s) => resolve(c ?? s ?? "")))
  expect(code).not.toBe(0)
  expect(worker.output()).toContain(`CTXD_CONFIG_FILE ${bad} is not valid:\n${bad}:3:3: defaults.maskKeep: Expected number`)
})
