// Provider keys per tenant: a worker whose tenants file names acme's Anthropic
// key by environment variable and globex's by file, and whose own key only
// initech may use (CTXD_WORKER_KEY_TENANTS). The fake provider logs the last 4
// characters of the key each call carried: summaries, exact counts of a
// request body and of a turn are paid by the tenant's own key; umbrella (no
// key, not on the list) gets a coded refusal for a summary, a local count
// for a count, and the provider never sees a call for it.
import { FakeProvider } from "@ctxd/testing"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

const KEYS = { worker: "sk-ant-worker-key-WRK1", acme: "sk-ant-acme-key-ACM1", globex: "sk-ant-globex-key-GLX1" }
const hint = (key: string) => key.slice(-4)

let h: Harness.Harness
let provider: FakeProvider.FakeProviderServer
const dir = mkdtempSync(join(tmpdir(), "ctxd-keys-"))
const keyFile = join(dir, "globex-anthropic")

beforeAll(async () => {
  provider = await FakeProvider.start()
  writeFileSync(keyFile, `${KEYS.globex}\n`)
  const tenants = join(dir, "tenants.json")
  writeFileSync(
    tenants,
    JSON.stringify({
      acme: { providers: { anthropic: { apiKeyEnv: "ACME_ANTHROPIC_KEY" } } },
      globex: { toolCompression: "minify", providers: { anthropic: { apiKeyFile: keyFile } } },
      hooli: { providers: { anthropic: { apiKeyEnv: "HOOLI_KEY_NOT_SET" } } },
    }),
  )
  h = await Harness.start({
    CTXD_TENANTS_FILE: tenants,
    CTXD_WORKER_KEY_TENANTS: "initech",
    ANTHROPIC_BASE_URL: provider.url,
    ANTHROPIC_API_KEY: KEYS.worker,
    ACME_ANTHROPIC_KEY: KEYS.acme,
    CTXD_SUMMARIZER_RETRIES: "0",
  })
})
afterAll(async () => {
  await h?.close()
  await provider?.close()
})
beforeEach(() => provider.reset())

const keysSeen = () => provider.requests().map((r) => r.keyHint)

const summarize = (tenant: string) =>
  h.request(
    `${h.root}.v1.summarize.${tenant}`,
    {
      format: "anthropic",
      model: { provider: "anthropic", name: "claude-sonnet-4-5" },
      messages: [
        { role: "user", content: "Book a flight from SFO to JFK on Friday." },
        { role: "assistant", content: "Booked UA 415, seat 12C." },
      ],
    },
    20_000,
  )

const count = (tenant: string) =>
  h.request(`${h.root}.v1.tokens.count.${tenant}`, {
    model: { provider: "anthropic", name: "claude-sonnet-4-5" },
    backend: "anthropic_api",
    body: { model: "claude-sonnet-4-5", max_tokens: 10, messages: [{ role: "user", content: "How many tokens is this?" }] },
  })

describe("summaries", () => {
  it.each([
    ["acme", KEYS.acme],
    ["globex", KEYS.globex],
    ["initech", KEYS.worker],
  ])("%s's summary is paid by its own key (or the worker's, where allowed)", async (tenant, key) => {
    const reply = await summarize(tenant)
    expect(reply.ok, JSON.stringify(reply)).toBe(true)
    expect(keysSeen().length).toBeGreaterThan(0)
    expect(new Set(keysSeen())).toEqual(new Set([hint(key)]))
  })

  it("a tenant with no key and not allowed the worker's is refused, and no call is made", async () => {
    const reply = await summarize("umbrella")
    expect(reply.ok).toBe(false)
    expect(reply.error.code).toBe("BadRequest")
    expect(reply.error.message).toMatch(/umbrella has no anthropic key/)
    expect(reply.error.hint).toMatch(/CTXD_WORKER_KEY_TENANTS/)
    expect(provider.requests()).toHaveLength(0)
  })

  it("a named key that is not set is refused, never replaced by the worker's", async () => {
    const reply = await summarize("hooli")
    expect(reply.ok).toBe(false)
    expect(reply.error.message).toMatch(/HOOLI_KEY_NOT_SET\) is not set/)
    expect(JSON.stringify(reply)).not.toContain(KEYS.worker)
    expect(provider.requests()).toHaveLength(0)
  })

  it("the tenant-less legacy subject may not use the worker's key when only listed tenants may", async () => {
    const reply = await h.request(`${h.root}.v1.summarize`, {
      format: "anthropic",
      model: { provider: "anthropic", name: "claude-sonnet-4-5" },
      messages: [{ role: "user", content: "hello" }],
    })
    expect(reply.ok).toBe(false)
    expect(reply.error.code).toBe("BadRequest")
    expect(provider.requests()).toHaveLength(0)
  })
})

describe("exact counts", () => {
  it("a count for acme is made with acme's key", async () => {
    const reply = await count("acme")
    expect(reply.ok, JSON.stringify(reply)).toBe(true)
    expect(reply.exact).toBe(true)
    expect(new Set(keysSeen())).toEqual(new Set([hint(KEYS.acme)]))
  })

  it("a count for a tenant without a key is local, saying why, and the provider sees nothing", async () => {
    const reply = await count("umbrella")
    expect(reply.ok).toBe(true)
    expect(reply.exact).toBe(false)
    expect(reply.fallback).toBe("key_not_allowed")
    expect(provider.requests()).toHaveLength(0)
  })

  it("a turn's exact count uses its tenant's key, and the tenant's options still apply", async () => {
    const turn = {
      turnId: "t1",
      format: "anthropic",
      model: { provider: "anthropic", name: "claude-sonnet-4-5" },
      options: { tokenBackend: "anthropic_api" },
      tools: [
        {
          name: "f",
          description: "Does f.",
          input_schema: { type: "object", properties: { x: { type: "string", description: "the x" } } },
        },
      ],
      messages: [{ role: "user", content: "What is on my calendar today?" }],
    }
    const reply = await h.request(h.turnSubject("globex", "s1"), turn)
    expect(reply.ok, JSON.stringify(reply)).toBe(true)
    expect(reply.report.counter.exact).toBe(true)
    expect(reply.report.tools.compression).toBe("minify")
    expect(keysSeen().length).toBeGreaterThan(0)
    expect(new Set(keysSeen())).toEqual(new Set([hint(KEYS.globex)]))
  })
})
