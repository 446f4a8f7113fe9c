/**
 * Whose provider key a call on behalf of a tenant uses.
 *
 * A tenant's section may name its own key per provider (`Tenants.Tenant`
 * `providers`: an environment variable or a file, never the key itself): its
 * summaries, loop-judge calls and exact counts are then made — and billed —
 * with that key. A provider the tenant names no key for uses the worker's own
 * key only when the tenant is on the worker-key list (`workerKeyTenants`,
 * `CTXD_WORKER_KEY_TENANTS`: `*` = every tenant, the default; empty = none);
 * otherwise the call is refused (`Denied`) and the caller does without it
 * (a summary fails with a coded error, a count falls back to the local one).
 * A named key that cannot be read is refused too: it never falls back to the
 * worker's key, which would bill the wrong party.
 *
 * Calls with no tenant (the tenant-less legacy subjects) use the worker's key
 * only when every tenant may (`*`).
 *
 * The reading of variables and files is injected ({@link Readers}): this
 * module does no I/O of its own. A key file is read again after
 * `fileTtlMs` (default 30 s), so a rotated secret is picked up without a
 * restart; the tenant sections are read through a getter on every call, so a
 * reloaded configuration applies to the next call.
 */
import { Context, Layer, Redacted } from "effect"
import { createHash } from "node:crypto"
import type { Tenants } from "@ctxd/contracts"

/** The providers a key can be named for. */
export type Provider = keyof Tenants.ProviderKeys

/** The key a call uses. */
export type Choice =
  /** The tenant's own key. `ref` names where it came from and a short digest of it (for client caches and logs; never the key). */
  | { readonly _tag: "Tenant"; readonly key: Redacted.Redacted<string>; readonly ref: string }
  /** The worker's own key (the SDK's environment variable or the configured one). */
  | { readonly _tag: "Worker" }
  /** No key this tenant may use; `message` says why (no key text). */
  | { readonly _tag: "Denied"; readonly message: string }

/** The port. */
export interface ProviderKeysService {
  readonly choose: (tenant: string | undefined, provider: Provider) => Choice
}

export class ProviderKeys extends Context.Tag("@ctxd/context/ProviderKeys")<ProviderKeys, ProviderKeysService>() {}

/** How variables and files are read (the worker passes `process.env` and `fs.readFileSync`). */
export interface Readers {
  readonly env: (name: string) => string | undefined
  readonly file: (path: string) => string
  /** Milliseconds since some epoch (default `Date.now`). */
  readonly now?: () => number
}

export interface Options {
  /** The current tenant sections (read on every call). */
  readonly sections: () => Readonly<Record<string, Pick<Tenants.Tenant, "providers">>>
  /** Tenants that may use the worker's key: `"*"` (all) or a set of ids. */
  readonly workerKeyTenants: "*" | ReadonlySet<string>
  readonly readers: Readers
  /** How long a key file's content is reused; default 30,000 ms. */
  readonly fileTtlMs?: number
}

export const defaults = {
  workerKeyTenants: "*" as const,
  fileTtlMs: 30_000,
}

/** Parses `CTXD_WORKER_KEY_TENANTS`: `*` (or unset) = all tenants, empty = none, else comma-separated ids. */
export const parseWorkerKeyTenants = (value: string | undefined): "*" | ReadonlySet<string> =>
  value === undefined || value.trim() === "*"
    ? "*"
    : new Set(
        value
          .split(",")
          .map((s) => s.trim())
          .filter((s) => s !== ""),
      )

const digest = (key: string): string => createHash("sha256").update(key).digest("hex").slice(0, 12)

export const make = (options: Options): ProviderKeysService => {
  const ttl = options.fileTtlMs ?? defaults.fileTtlMs
  const now = options.readers.now ?? Date.now
  // path → [content, read at]; bounded by the number of distinct key files in the configuration
  const files = new Map<string, { readonly text: string; readonly at: number }>()
  const readFile = (path: string): string => {
    const cached = files.get(path)
    if (cached !== undefined && now() - cached.at < ttl) return cached.text
    const text = options.readers.file(path).trim()
    files.set(path, { text, at: now() })
    if (files.size > 1_024) files.delete(files.keys().next().value!)
    return text
  }
  const workerAllowed = (tenant: string | undefined): boolean =>
    options.workerKeyTenants === "*" || (tenant !== undefined && options.workerKeyTenants.has(tenant))
  return {
    choose: (tenant, provider) => {
      const named = tenant === undefined ? undefined : options.sections()[tenant]?.providers?.[provider]
      if (named === undefined) {
        return workerAllowed(tenant)
          ? { _tag: "Worker" }
          : {
              _tag: "Denied",
              message:
                tenant === undefined
                  ? `the worker's ${provider} key serves only listed tenants (CTXD_WORKER_KEY_TENANTS); use the tenant's subject`
                  : `tenant ${tenant} has no ${provider} key of its own and may not use the worker's (CTXD_WORKER_KEY_TENANTS)`,
            }
      }
      if ("apiKeyEnv" in named) {
        const key = options.readers.env(named.apiKeyEnv)
        if (key === undefined || key.trim() === "") {
          return { _tag: "Denied", message: `tenant ${tenant}'s ${provider} key (environment variable ${named.apiKeyEnv}) is not set` }
        }
        return { _tag: "Tenant", key: Redacted.make(key.trim()), ref: `env:${named.apiKeyEnv}#${digest(key.trim())}` }
      }
      let key: string
      try {
        key = readFile(named.apiKeyFile)
      } catch (e) {
        const code = (e as { readonly code?: string }).code ?? "unreadable"
        return { _tag: "Denied", message: `tenant ${tenant}'s ${provider} key file cannot be read (${code})` }
      }
      if (key === "") return { _tag: "Denied", message: `tenant ${tenant}'s ${provider} key file is empty` }
      return { _tag: "Tenant", key: Redacted.make(key), ref: `file:${named.apiKeyFile}#${digest(key)}` }
    },
  }
}

/** Every call uses the worker's key (no tenant keys, every tenant allowed): what a process without the port does. */
export const workerOnly: ProviderKeysService = { choose: () => ({ _tag: "Worker" }) }

export const layer = (options: Options): Layer.Layer<ProviderKeys> => Layer.sync(ProviderKeys, () => make(options))
