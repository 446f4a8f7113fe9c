/**
 * The gateway's policy functions over the configuration's current snapshot
 * (`RuntimeConfig`: `ctxd.yaml`'s `gateway` and `tenants` sections,
 * hot-reloaded): each request's mode and failure policy by tenant and agent
 * (`GatewaySection.policyOf`), and who is calling.
 *
 * Keys. A request whose key (`x-api-key`, `authorization: Bearer`,
 * `x-goog-api-key`) is a gateway key of `gateway.keys` belongs to that
 * key's tenant, and goes upstream with the tenant's own provider key
 * (`tenants.<tenant>.providers.<provider>`), or the gateway's (the
 * provider's usual variable, `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`,
 * `GEMINI_API_KEY`) where `CTXD_WORKER_KEY_TENANTS` lets the tenant use it;
 * a tenant that may use neither is refused (403). Any other key is the
 * caller's own provider key: it passes through untouched (never stored,
 * logged or hashed anywhere but here, in memory, to look it up), and the
 * tenant is left to the session naming (`x-ctxd-tenant`, else `default`) —
 * unless `gateway.requireKey` is true, when it is refused (401).
 */
import type { RuntimeConfig } from "@ctxd/config"
import { GatewaySection } from "@ctxd/config"
import { ProviderKeys } from "@ctxd/context"
import { Redacted } from "effect"
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"

/** The upstream providers, by their `Turn.Provider` names (what the server's routes name). */
export type Provider = "anthropic" | "openai" | "google"

/** What {@link make}'s `authenticate` is asked about (the server's `RequestInfo` has it). */
export interface Caller {
  readonly provider: Provider
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
}

/** The server's `Identity`. */
export type Identity =
  | {
      readonly ok: true
      readonly tenant: string | undefined
      readonly upstreamHeaders?: Readonly<Record<string, string | null>> | undefined
    }
  | { readonly ok: false; readonly status: 401 | 403; readonly message: string }

export interface Options {
  /** The configuration now (read per request). */
  readonly current: () => RuntimeConfig.Snapshot
  /** `CTXD_WORKER_KEY_TENANTS`: who may use the gateway's own provider keys. Default all. */
  readonly workerKeyTenants?: "*" | ReadonlySet<string> | undefined
  /** Environment and files (tests). Default `process.env` and `readFileSync`. */
  readonly env?: ((name: string) => string | undefined) | undefined
  readonly file?: ((path: string) => string) | undefined
  /** Now in ms (tests). Default `Date.now`. */
  readonly now?: (() => number) | undefined
  /** The section's `mode` when it sets none (`ctxd gateway --mode`). Default `active`. */
  readonly defaultMode?: GatewaySection.Mode | undefined
}

/** The provider's own key variable(s), first found wins: the gateway's key for a tenant allowed it. */
const ownKeyVariables: Readonly<Record<Provider, ReadonlyArray<string>>> = {
  anthropic: ["ANTHROPIC_API_KEY"],
  openai: ["OPENAI_API_KEY"],
  google: ["GEMINI_API_KEY", "GOOGLE_API_KEY"],
}

/** The headers a provider key goes in upstream (the others that could carry a key removed). */
const keyHeaders = (provider: Provider, key: string): Record<string, string | null> =>
  provider === "anthropic"
    ? { "x-api-key": key, authorization: null }
    : provider === "openai"
      ? { authorization: `Bearer ${key}`, "x-api-key": null }
      : { "x-goog-api-key": key, authorization: null, "x-api-key": null }

const first = (value: string | ReadonlyArray<string> | undefined): string | undefined =>
  (typeof value === "string" ? value : value?.[0])?.trim() || undefined

/** The key a request presents, wherever its SDK puts it. */
export const presentedKey = (headers: Caller["headers"]): string | undefined => {
  const bearer = first(headers.authorization)
  const fromBearer = bearer !== undefined && /^bearer\s+/i.test(bearer) ? bearer.replace(/^bearer\s+/i, "").trim() : undefined
  return first(headers["x-api-key"]) ?? fromBearer ?? first(headers["x-goog-api-key"])
}

/** How long a key read from a variable or file is trusted before it is read again: 30 s. */
export const KEY_TTL_MS = 30_000

const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex")

export interface GatewayConfig {
  readonly mode: (tenant: string, agent: string) => GatewaySection.Mode
  readonly failure: (tenant: string, agent: string) => GatewaySection.Failure
  readonly authenticate: (caller: Caller) => Identity
  /** The section's prompt timeout now (the server reads it per request). */
  readonly promptTimeoutMs: () => number
  /** The section's upstreams now (read at start by the server). */
  readonly upstreams: () => Partial<Record<Provider, string>>
}

export const make = (options: Options): GatewayConfig => {
  const env = options.env ?? ((name: string) => process.env[name])
  const file = options.file ?? ((path: string) => readFileSync(path, "utf8"))
  const section = () => options.current().gateway
  const providerKeys = ProviderKeys.make({
    sections: () => options.current().tenants,
    workerKeyTenants: options.workerKeyTenants ?? "*",
    readers: { env, file },
  })
  // the key index of the snapshot it was built for: rebuilt when the configuration changes, and
  // every KEY_TTL_MS so a rotated key variable's or file's new key applies without a reload
  let index: { readonly hash: string; readonly at: number; readonly byDigest: ReadonlyMap<string, string> } | undefined
  const now = options.now ?? Date.now
  const keys = (): ReadonlyMap<string, string> => {
    const snapshot = options.current()
    if (index?.hash === snapshot.hash && now() - index.at < KEY_TTL_MS) return index.byDigest
    const byDigest = new Map<string, string>()
    for (const key of Object.values(snapshot.gateway?.keys ?? {})) {
      let digest: string | undefined
      if ("sha256" in key) digest = key.sha256
      else {
        const text = "keyEnv" in key ? env(key.keyEnv) : readable(() => file(key.keyFile))
        digest = text === undefined || text.trim() === "" ? undefined : sha256(text.trim())
      }
      if (digest !== undefined) byDigest.set(digest, key.tenant)
    }
    index = { hash: snapshot.hash, at: now(), byDigest }
    return byDigest
  }

  const policy = (tenant: string, agent: string) => {
    const s = section()
    return GatewaySection.policyOf(
      s?.mode === undefined && options.defaultMode !== undefined ? { ...s, mode: options.defaultMode } : s,
      tenant,
      agent,
    )
  }

  const authenticate = (caller: Caller): Identity => {
    const presented = presentedKey(caller.headers)
    const tenant = presented === undefined ? undefined : keys().get(sha256(presented))
    if (tenant === undefined) {
      if (section()?.requireKey ?? GatewaySection.defaults.requireKey)
        return { ok: false, status: 401, message: "this gateway takes only gateway keys (gateway.requireKey)" }
      // the caller's own key: the session naming reads x-ctxd-tenant (a gateway key's tenant is the only one it checks)
      return { ok: true, tenant: undefined }
    }
    const choice = providerKeys.choose(tenant, caller.provider)
    if (choice._tag === "Denied") return { ok: false, status: 403, message: choice.message }
    const key =
      choice._tag === "Tenant"
        ? Redacted.value(choice.key)
        : ownKeyVariables[caller.provider].map(env).find((k) => k !== undefined && k !== "")
    if (key === undefined)
      return { ok: false, status: 403, message: `tenant ${tenant} has no ${caller.provider} key and the gateway has none of its own` }
    return { ok: true, tenant, upstreamHeaders: keyHeaders(caller.provider, key) }
  }

  return {
    mode: (tenant, agent) => policy(tenant, agent).mode,
    failure: (tenant, agent) => policy(tenant, agent).failure,
    authenticate,
    promptTimeoutMs: () => section()?.promptTimeoutMs ?? GatewaySection.defaults.promptTimeoutMs,
    upstreams: () => ({ ...section()?.upstreams }),
  }
}

/** A file's text, or undefined when it cannot be read (the key is then not a gateway key). */
const readable = (read: () => string): string | undefined => {
  try {
    return read()
  } catch {
    return undefined
  }
}
