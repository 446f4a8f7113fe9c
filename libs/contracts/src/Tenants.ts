/**
 * One tenant's section of the worker's tenant configuration (the file named by
 * `CTXD_TENANTS_FILE`, `{"<tenant>": <section>}`): the tenant's turn option
 * defaults (the same names as a request's `options`, so a file written for the
 * older options-only shape still reads the same) plus what only an operator
 * may set for a tenant: its own provider keys and its fair share of a worker.
 */
import { Schema } from "effect"
import * as Turn from "./Turn.ts"

/** An environment variable's name. */
const EnvName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, { message: () => "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)" }),
)

/**
 * Where a tenant's provider key is: the name of an environment variable of the
 * worker, or a file (a mounted secret; surrounding whitespace ignored). Never
 * the key itself: the configuration is logged, hashed and shown, the key never.
 */
export const ProviderKey = Schema.Union(
  Schema.Struct({
    /** The worker's environment variable that holds the tenant's key (the variable's name, never the key). */
    apiKeyEnv: EnvName,
  }),
  Schema.Struct({
    /** A file holding the tenant's key, e.g. a mounted secret (surrounding whitespace ignored). */
    apiKeyFile: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(4_096)),
  }),
).annotations({ identifier: "TenantProviderKey" })
export type ProviderKey = typeof ProviderKey.Type

/** The providers a tenant may name its own key for (the summarizer's, the loop judge's and the exact counters' calls). */
export const ProviderKeys = Schema.Struct({
  anthropic: Schema.optional(ProviderKey),
  openai: Schema.optional(ProviderKey),
  google: Schema.optional(ProviderKey),
  openai_compatible: Schema.optional(ProviderKey),
}).annotations({ identifier: "TenantProviderKeys" })
export type ProviderKeys = typeof ProviderKeys.Type

const Percent = Schema.Int.pipe(Schema.between(1, 100))

/** A tenant's share of one worker, over the worker's default (`CTXD_TENANT_TURNS_PERCENT`, `CTXD_TENANT_BYTES_PERCENT`). */
export const Share = Schema.Struct({
  /** Percent of the worker's turn slots this tenant's turns may hold at once. */
  turnsPercent: Schema.optional(Percent),
  /** Percent of the worker's in-flight request bytes this tenant may hold at once. */
  bytesPercent: Schema.optional(Percent),
}).annotations({ identifier: "TenantShare" })
export type Share = typeof Share.Type

/** One tenant's section: its option defaults, its provider keys, its share. */
export const Tenant = Schema.Struct({
  ...Turn.Options.fields,
  /**
   * The tenant's own provider keys: its summaries, loop-judge calls and exact
   * counts are made (and billed) with them. A provider without one uses the
   * worker's key only when the tenant may (`CTXD_WORKER_KEY_TENANTS`).
   */
  providers: Schema.optional(ProviderKeys),
  /** Overrides of the worker's default per-tenant share. */
  share: Schema.optional(Share),
  /**
   * Days a session of this tenant may stay idle (no turn committed) before the
   * worker's pruner deletes it with everything stored for it (messages,
   * turns, summaries, compaction audit, session length, usage reports).
   * Default none: kept until deleted on request.
   */
  retentionDays: Schema.optional(Schema.Int.pipe(Schema.between(1, 36_500))),
}).annotations({ identifier: "TenantConfig" })
export type Tenant = typeof Tenant.Type

/** The options part of a tenant section (what is merged under a request's `options`). */
export const optionsOf = (tenant: Tenant): Turn.Options => {
  const { providers: _providers, share: _share, retentionDays: _retentionDays, ...options } = tenant
  return options
}
