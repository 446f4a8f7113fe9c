import { Redacted } from "effect"
import { describe, expect, it } from "vitest"
import * as ProviderKeys from "../src/ProviderKeys.ts"

const sections = {
  acme: { providers: { anthropic: { apiKeyEnv: "ACME_KEY" } } },
  globex: { providers: { openai: { apiKeyFile: "/secrets/globex" } } },
  initech: {},
}

const setup = (workerKeyTenants: "*" | ReadonlySet<string>, env: Record<string, string> = { ACME_KEY: "sk-acme-1" }) => {
  const files: Record<string, string> = { "/secrets/globex": "sk-globex-1\n" }
  let now = 0
  let reads = 0
  const keys = ProviderKeys.make({
    sections: () => sections,
    workerKeyTenants,
    fileTtlMs: 1_000,
    readers: {
      env: (name) => env[name],
      file: (path) => {
        reads++
        const text = files[path]
        if (text === undefined) throw Object.assign(new Error(`ENOENT ${path}`), { code: "ENOENT" })
        return text
      },
      now: () => now,
    },
  })
  return { keys, files, tick: (ms: number) => void (now += ms), reads: () => reads }
}

const keyOf = (choice: ProviderKeys.Choice) => (choice._tag === "Tenant" ? Redacted.value(choice.key) : choice._tag)

describe("ProviderKeys", () => {
  it("a tenant's named key wins for that provider; other providers follow the worker-key list", () => {
    const { keys } = setup("*")
    expect(keyOf(keys.choose("acme", "anthropic"))).toBe("sk-acme-1")
    expect(keyOf(keys.choose("acme", "openai"))).toBe("Worker")
    expect(keyOf(keys.choose("globex", "openai"))).toBe("sk-globex-1")
    expect(keyOf(keys.choose("nobody", "google"))).toBe("Worker")
    expect(keyOf(keys.choose(undefined, "anthropic"))).toBe("Worker")
  })

  it("the worker's key only for listed tenants; tenant-less calls only when all are", () => {
    const { keys } = setup(ProviderKeys.parseWorkerKeyTenants("initech, acme"))
    expect(keyOf(keys.choose("initech", "anthropic"))).toBe("Worker")
    expect(keyOf(keys.choose("acme", "openai"))).toBe("Worker")
    expect(keyOf(keys.choose("globex", "anthropic"))).toBe("Denied")
    expect(keyOf(keys.choose(undefined, "anthropic"))).toBe("Denied")
    const none = setup(ProviderKeys.parseWorkerKeyTenants(""))
    expect(keyOf(none.keys.choose("initech", "anthropic"))).toBe("Denied")
    expect(keyOf(none.keys.choose("acme", "anthropic"))).toBe("sk-acme-1")
  })

  it("a named key that cannot be read is refused, never replaced by the worker's, and the message holds no key", () => {
    const { keys, files } = setup("*", {})
    const unset = keys.choose("acme", "anthropic")
    expect(unset).toMatchObject({ _tag: "Denied", message: expect.stringMatching(/ACME_KEY\) is not set/) })
    delete files["/secrets/globex"]
    const missing = keys.choose("globex", "openai")
    expect(missing).toMatchObject({ _tag: "Denied", message: expect.stringMatching(/cannot be read \(ENOENT\)/) })
    files["/secrets/globex"] = "  \n"
    expect(keys.choose("globex", "openai")).toMatchObject({ _tag: "Denied", message: expect.stringMatching(/empty/) })
  })

  it("a key file is read again after its TTL: a rotated secret applies without a restart, with a new ref", () => {
    const { keys, files, tick, reads } = setup("*")
    const first = keys.choose("globex", "openai")
    keys.choose("globex", "openai")
    expect(reads()).toBe(1)
    files["/secrets/globex"] = "sk-globex-2"
    expect(keyOf(keys.choose("globex", "openai"))).toBe("sk-globex-1")
    tick(1_000)
    const rotated = keys.choose("globex", "openai")
    expect(keyOf(rotated)).toBe("sk-globex-2")
    expect(reads()).toBe(2)
    expect(rotated._tag === "Tenant" && first._tag === "Tenant" && rotated.ref !== first.ref).toBe(true)
    expect(rotated._tag === "Tenant" && rotated.ref).not.toContain("sk-globex")
  })

  it("parses CTXD_WORKER_KEY_TENANTS", () => {
    expect(ProviderKeys.parseWorkerKeyTenants(undefined)).toBe("*")
    expect(ProviderKeys.parseWorkerKeyTenants(" * ")).toBe("*")
    expect(ProviderKeys.parseWorkerKeyTenants("")).toEqual(new Set())
    expect(ProviderKeys.parseWorkerKeyTenants("a,,b ")).toEqual(new Set(["a", "b"]))
  })
})
