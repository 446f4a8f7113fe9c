/**
 * `ctxd gateway` as a user runs it: with no NATS it runs the turns in its
 * own process, prints the base URLs to set, and serves; the official SDK
 * pointed at it reaches the fake provider upstream with ctxd's body
 * (active); an edit of ctxd.yaml's gateway section applies to the next
 * request without a restart (shadow: the client's body goes, a record is
 * appended that `ctxd inspect --shadow` sums); SIGTERM stops it with 0. A
 * bad config file stops the start with 1, naming the key and line.
 */
import Anthropic from "@anthropic-ai/sdk"
import { FakeProvider } from "@ctxd/testing"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createServer } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const BIN = join(import.meta.dirname, "..", "bin", "ctxd.ts")
const dir = mkdtempSync(join(tmpdir(), "gwrun-cli-"))
const configFile = join(dir, "ctxd.yaml")
const shadowFile = join(dir, "shadow.jsonl")
let fake: FakeProvider.FakeProviderServer
let child: ChildProcess | undefined

beforeAll(async () => {
  fake = await FakeProvider.start()
})
afterAll(async () => {
  child?.kill("SIGKILL")
  await fake.close()
  rmSync(dir, { recursive: true, force: true })
})

const env = () => ({
  ...process.env,
  NATS_URL: "nats://127.0.0.1:1",
  CTXD_CONFIG_FILE: configFile,
  CTXD_CONFIG_POLL_MS: "200",
  CTXD_GATEWAY_UPSTREAM_ANTHROPIC: fake.url,
  CTXD_GATEWAY_SHADOW_FILE: shadowFile,
  LOG_LEVEL: "warn",
})

/** Starts the gateway; resolves with its output so far once it printed its URL. */
const start = (): Promise<{ url: string; output: () => string }> =>
  new Promise((resolve, reject) => {
    let output = ""
    child = spawn(process.execPath, [BIN, "gateway", "--port", "0"], { env: env(), stdio: ["ignore", "pipe", "pipe"] })
    const timer = setTimeout(() => reject(new Error(`no URL printed:\n${output}`)), 60_000)
    const read = (chunk: Buffer) => {
      output += chunk.toString()
      const url = /export ANTHROPIC_BASE_URL=(\S+)/.exec(output)?.[1]
      if (url !== undefined && output.includes("Ctrl-C")) {
        clearTimeout(timer)
        resolve({ url, output: () => output })
      }
    }
    child.stdout!.on("data", read)
    child.stderr!.on("data", read)
    child.once("exit", (code) => reject(new Error(`exited ${code}:\n${output}`)))
  })

const ctxd = (...args: Array<string>) => ctxdWith({}, ...args)
const ctxdWith = (extra: Record<string, string>, ...args: Array<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { encoding: "utf8", timeout: 60_000, env: { ...env(), ...extra } },
      (error, stdout, stderr) => resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr }),
    )
  })

const SYSTEM = "You are a careful assistant. ".repeat(50)

describe("ctxd gateway", { timeout: 120_000 }, () => {
  it("serves in-process, follows a config edit live, records shadow requests, stops on SIGTERM", async () => {
    writeFileSync(configFile, "gateway:\n  mode: active\n")
    const { url, output } = await start()
    expect(output()).toContain("in-process: no NATS")
    expect(output()).toContain(`export OPENAI_BASE_URL=${url}/v1`)
    expect(output()).toContain(`export GOOGLE_GEMINI_BASE_URL=${url}`)
    const sdk = new Anthropic({ baseURL: url, apiKey: "sk-ant-caller", maxRetries: 0, defaultHeaders: { "x-ctxd-tenant": "gwrun" } })
    const body = { model: "claude-sonnet-4-6", max_tokens: 64, system: SYSTEM, messages: [{ role: "user" as const, content: "hi" }] }
    const first = await sdk.messages.create(body)
    expect(first.type).toBe("message")
    // active: what went upstream is ctxd's body (its cache breakpoint on the system), the caller's key untouched
    const sent = fake.requests().at(-1)!
    expect(JSON.stringify(sent.body)).toContain("cache_control")
    expect(sent.keyHint).toBe("ller")

    writeFileSync(configFile, "gateway:\n  mode: active\n  tenants:\n    gwrun: { mode: shadow }\n")
    const deadline = Date.now() + 20_000
    let records = ""
    while (Date.now() < deadline && records === "") {
      await sdk.messages.create({ ...body, messages: [{ role: "user", content: `hi ${Date.now()}` }] })
      await new Promise((r) => setTimeout(r, 300))
      try {
        records = readFileSync(shadowFile, "utf8")
      } catch {
        records = ""
      }
    }
    expect(records).not.toBe("")
    // shadow: the client's own body went (no breakpoint of ctxd's), and no prompt text is in the record
    expect(JSON.stringify(fake.requests().at(-1)!.body)).not.toContain("cache_control")
    expect(records).not.toContain("careful assistant")
    const record = JSON.parse(records.split("\n")[0]!) as { tenant: string; client: { usd: number }; ctxd: { usd: number } }
    expect(record.tenant).toBe("gwrun")
    expect(record.client.usd).toBeGreaterThan(0)

    const metrics = await (await fetch(`${url}/metrics`)).text()
    expect(metrics).toMatch(/ctxd_gateway_shadow_requests_total\{[^}]*tenant="gwrun"/)
    expect(metrics).toMatch(/ctxd_gateway_shadow_input_usd_total\{[^}]*body="ctxd"/)

    const summary = await ctxd("inspect", "--shadow", shadowFile, "gwrun")
    expect(summary.code).toBe(0)
    expect(summary.stdout).toContain("tenant gwrun")
    const json = JSON.parse((await ctxd("inspect", "--shadow", shadowFile, "--json")).stdout) as {
      tenants: Record<string, { requests: number }>
    }
    expect(json.tenants.gwrun!.requests).toBeGreaterThanOrEqual(1)

    // the turn option sections apply to in-process turns as a worker's: promptCache off for the tenant, no breakpoints
    writeFileSync(configFile, "gateway:\n  mode: active\ntenants:\n  gwrun: { promptCache: false }\n")
    let marked = true
    for (let i = 0; i < 60 && marked; i++) {
      await new Promise((r) => setTimeout(r, 300))
      await sdk.messages.create({ ...body, messages: [{ role: "user", content: `again ${i}` }] })
      marked = JSON.stringify(fake.requests().at(-1)!.body).includes("cache_control")
    }
    expect(marked).toBe(false)

    const exited = new Promise<number | null>((resolve) => child!.once("exit", resolve))
    child!.kill("SIGTERM")
    expect(await exited).toBe(0)
    child = undefined
  })

  it("a bad config file stops the start with 1, naming the key and line; bad options are usage errors", async () => {
    writeFileSync(configFile, "gateway:\n  mode: loud\n")
    const bad = await ctxd("gateway", "--port", "0")
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/ctxd\.yaml:2:3: gateway\.mode/)
    const usage = await ctxd("gateway", "--mode", "loud")
    expect(usage.code).toBe(2)
    expect((await ctxd("gateway", "--help")).stdout).toContain("usage: ctxd gateway")
    expect((await ctxd("inspect", "--shadow", join(dir, "none.jsonl"))).code).toBe(1)
  })

  it("refuses an upstream that is the gateway itself", async () => {
    writeFileSync(configFile, "gateway:\n  mode: active\n")
    const free = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as { port: number }
        probe.close(() => resolve(port))
      })
    })
    const looped = await ctxdWith({ CTXD_GATEWAY_UPSTREAM_OPENAI: `http://localhost:${free}/v1` }, "gateway", "--port", String(free))
    expect(looped.code).toBe(1)
    expect(looped.stderr).toContain("is this gateway itself")
  })
})
