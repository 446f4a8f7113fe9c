import { ConfigFile, RuntimeConfig } from "@ctxd/config"
import { Either } from "effect"
import { createHash } from "node:crypto"
import { describe, expect, it } from "vitest"
import * as GatewayConfig from "../src/GatewayConfig.ts"

const sha = (text: string) => createHash("sha256").update(text).digest("hex")
const config = RuntimeConfig.memory()
const env: Record<string, string> = {
  ACME_ANTHROPIC: "sk-ant-acme",
  ANTHROPIC_API_KEY: "sk-ant-gateway",
  CI_KEY: "ctxd-ci-key",
  GEMINI_API_KEY: "gm-gateway",
}
const gateway = GatewayConfig.make({
  current: config.current,
  env: (n) => env[n],
  file: () => "ctxd-file-key\n",
  workerKeyTenants: new Set(["beta"]),
})
const headers = (h: Record<string, string>) => ({ provider: "anthropic" as const, headers: h })

describe("GatewayConfig", () => {
  it("modes and failure: section < tenant < agent < the tenant's agent, and a reload applies to the next request", () => {
    expect(gateway.mode("acme", "coder")).toBe("active")
    expect(gateway.failure("acme", "coder")).toBe("failOpen")
    config.set({
      gateway: {
        mode: "shadow",
        tenants: { acme: { mode: "off", failure: "failClosed", agents: { coder: { mode: "active" } } } },
        agents: { coder: { mode: "shadow" }, titles: { mode: "off" } },
      },
    })
    expect(gateway.mode("other", "default")).toBe("shadow")
    expect(gateway.mode("acme", "default")).toBe("off")
    expect(gateway.mode("other", "coder")).toBe("shadow")
    expect(gateway.mode("acme", "coder")).toBe("active")
    expect(gateway.mode("other", "titles")).toBe("off")
    expect(gateway.failure("acme", "x")).toBe("failClosed")
    expect(gateway.failure("other", "x")).toBe("failOpen")
    config.set({})
    expect(gateway.mode("acme", "coder")).toBe("active")
  })

  it("a default mode from the command line applies where the section sets none", () => {
    const g = GatewayConfig.make({ current: RuntimeConfig.memory().current, defaultMode: "shadow" })
    expect(g.mode("t", "a")).toBe("shadow")
  })

  it("a gateway key names its tenant and goes upstream as the tenant's own provider key", () => {
    config.set({
      tenants: { acme: { providers: { anthropic: { apiKeyEnv: "ACME_ANTHROPIC" } } } },
      gateway: {
        keys: {
          acme: { tenant: "acme", sha256: sha("ctxd-acme-key") },
          ci: { tenant: "beta", keyEnv: "CI_KEY" },
          f: { tenant: "gamma", keyFile: "/k" },
        },
      },
    })
    expect(gateway.authenticate(headers({ "x-api-key": "ctxd-acme-key" }))).toEqual({
      ok: true,
      tenant: "acme",
      upstreamHeaders: { "x-api-key": "sk-ant-acme", authorization: null },
    })
    // a tenant without a key of its own, allowed the gateway's: the gateway's key
    expect(gateway.authenticate(headers({ authorization: "Bearer ctxd-ci-key" }))).toMatchObject({
      tenant: "beta",
      upstreamHeaders: { "x-api-key": "sk-ant-gateway" },
    })
    // not allowed the gateway's key: refused, naming no key
    const refused = gateway.authenticate(headers({ "x-api-key": "ctxd-file-key" }))
    expect(refused).toMatchObject({ ok: false, status: 403 })
    expect(JSON.stringify(refused)).not.toContain("ctxd-file-key")
    // Gemini gets the key where its API reads it; with no key at all: refused
    expect(gateway.authenticate({ provider: "openai", headers: { authorization: "Bearer ctxd-ci-key" } })).toMatchObject({
      ok: false,
      status: 403,
    })
    expect(gateway.authenticate({ provider: "google", headers: { "x-goog-api-key": "ctxd-ci-key" } })).toMatchObject({
      upstreamHeaders: { "x-goog-api-key": "gm-gateway", authorization: null },
    })
  })

  it("any other key is the caller's own: passed through untouched, no tenant named (the session naming reads x-ctxd-tenant); refused under requireKey", () => {
    config.set({ gateway: { keys: { acme: { tenant: "acme", sha256: sha("ctxd-acme-key") } } } })
    expect(gateway.authenticate(headers({ "x-api-key": "sk-ant-mine", "x-ctxd-tenant": "t1" }))).toEqual({ ok: true, tenant: undefined })
    config.set({ gateway: { requireKey: true } })
    expect(gateway.authenticate(headers({ "x-api-key": "sk-ant-mine" }))).toMatchObject({ ok: false, status: 401 })
  })

  it("the file's section is validated like the rest: each problem by key path and line, no value quoted", () => {
    const bad = ConfigFile.decode(
      ["gateway:", "  mode: loud", "  keys:", "    k: { tenant: acme, sha256: sk-secret-value }", "  upstreams: { openai: ftp://x }"].join(
        "\n",
      ),
      "ctxd.yaml",
    )
    expect(Either.isLeft(bad)).toBe(true)
    const message = Either.isLeft(bad) ? bad.left.message : ""
    expect(message).toContain("ctxd.yaml:2:3: gateway.mode")
    expect(message).toContain("gateway.upstreams.openai")
    expect(message).not.toContain("sk-secret-value")
    const good = ConfigFile.decode("gateway:\n  mode: shadow\n  promptTimeoutMs: 2000\n", "ctxd.yaml")
    expect(Either.isRight(good) && good.right.gateway).toEqual({ mode: "shadow", promptTimeoutMs: 2000 })
    // a file without the section hashes as it did before the section existed
    const plain = ConfigFile.decode("defaults:\n  maskKeep: 3\n", "ctxd.yaml")
    expect(Either.isRight(plain) && "gateway" in plain.right).toBe(false)
  })

  it("reads the timeout and the upstreams of the section", () => {
    config.set({ gateway: { promptTimeoutMs: 1500, upstreams: { openai: "http://127.0.0.1:9/v1" } } })
    expect(gateway.promptTimeoutMs()).toBe(1500)
    expect(gateway.upstreams()).toEqual({ openai: "http://127.0.0.1:9/v1" })
  })
})
