/**
 * The `gateway` section of `ctxd.yaml`: what `ctxd gateway` does with each
 * request (its mode per tenant and agent, its failure policy), how long it
 * waits for ctxd's prompt, where the providers are, and the gateway keys
 * that name a tenant (whose own provider key is then used upstream).
 *
 * ```yaml
 * gateway:
 *   mode: shadow                      # active | shadow | off
 *   failure: failOpen                 # failOpen | failClosed
 *   tenants:
 *     acme: { mode: active, agents: { titles: { mode: off } } }
 *   agents:
 *     coder: { mode: active }
 *   keys:
 *     acme-ci: { tenant: acme, sha256: 9f86d0…, }   # or keyEnv / keyFile
 * ```
 *
 * A gateway key is never written in the file: its SHA-256 (hex), or the
 * environment variable or file that holds it.
 */
import { Schema } from "effect"

/** What the gateway does with a request. */
export const Mode = Schema.Literal("active", "shadow", "off")
export type Mode = typeof Mode.Type

/** When ctxd cannot answer in time. */
export const Failure = Schema.Literal("failOpen", "failClosed")
export type Failure = typeof Failure.Type

const Id = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,128}$/))

const HttpUrl = Schema.String.pipe(
  Schema.filter((s) => URL.canParse(s) && ["http:", "https:"].includes(new URL(s).protocol), { message: () => "an http(s) URL" }),
)

/** One agent's policy (under a tenant or for every tenant). */
export const AgentPolicy = Schema.Struct({
  /** The mode of this agent's requests. */
  mode: Schema.optional(Mode),
  /** The failure policy of this agent's requests. */
  failure: Schema.optional(Failure),
})
export type AgentPolicy = typeof AgentPolicy.Type

/** One tenant's policy. */
export const TenantPolicy = Schema.Struct({
  /** The mode of this tenant's requests. */
  mode: Schema.optional(Mode),
  /** The failure policy of this tenant's requests. */
  failure: Schema.optional(Failure),
  /** Per agent of this tenant (the `x-ctxd-agent` header): over the tenant's and the global agents' policy. */
  agents: Schema.optional(Schema.Record({ key: Id, value: AgentPolicy })),
})
export type TenantPolicy = typeof TenantPolicy.Type

const Sha256 = Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/, { message: () => "64 lower-case hex digits" }))
const EnvName = Schema.String.pipe(Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, { message: () => "an environment variable name" }))

/** A gateway key and the tenant it names. */
export const GatewayKey = Schema.Union(
  Schema.Struct({
    /** The tenant this key's requests belong to. */
    tenant: Id,
    /** The SHA-256 of the key, hex (`printf %s "$KEY" | sha256sum`). */
    sha256: Sha256,
  }),
  Schema.Struct({
    /** The tenant this key's requests belong to. */
    tenant: Id,
    /** The gateway's environment variable that holds the key. */
    keyEnv: EnvName,
  }),
  Schema.Struct({
    /** The tenant this key's requests belong to. */
    tenant: Id,
    /** A file holding the key (surrounding whitespace ignored), e.g. a mounted secret. */
    keyFile: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(4_096)),
  }),
).annotations({ identifier: "GatewayKey" })
export type GatewayKey = typeof GatewayKey.Type

/** The providers' base URLs. */
export const Upstreams = Schema.Struct({
  /** Anthropic's API (`/v1/messages` is appended). */
  anthropic: Schema.optional(HttpUrl),
  /** OpenAI's API (`/v1/chat/completions`, `/v1/responses` are appended). */
  openai: Schema.optional(HttpUrl),
  /** The Gemini API (`/v1beta/models/...` is appended). */
  google: Schema.optional(HttpUrl),
})

export const Section = Schema.Struct({
  /** The mode of every request no tenant or agent policy names. */
  mode: Schema.optional(Mode),
  /** The failure policy of every request no tenant or agent policy names. */
  failure: Schema.optional(Failure),
  /** How long the gateway waits for ctxd's prompt before the failure policy applies, in ms. */
  promptTimeoutMs: Schema.optional(Schema.Int.pipe(Schema.between(1, 600_000))),
  /** The providers' base URLs (read at start). */
  upstreams: Schema.optional(Upstreams),
  /** Whether a request must carry a gateway key (401 otherwise); false: the caller's own provider key passes through. */
  requireKey: Schema.optional(Schema.Boolean),
  /** Per tenant: its mode and failure policy, and its agents'. */
  tenants: Schema.optional(Schema.Record({ key: Id, value: TenantPolicy })),
  /** Per agent (the `x-ctxd-agent` header), in every tenant: over the tenant's own policy. */
  agents: Schema.optional(Schema.Record({ key: Id, value: AgentPolicy })),
  /** Gateway keys by a name of your choosing (the name shows in logs; the key never). */
  keys: Schema.optional(Schema.Record({ key: Id, value: GatewayKey })),
}).annotations({ identifier: "GatewaySection" })
export type Section = typeof Section.Type

/** What applies when the section (or a key of it) is absent. */
export const defaults = {
  mode: "active" as Mode,
  failure: "failOpen" as Failure,
  promptTimeoutMs: 10_000,
  requireKey: false,
} as const

/**
 * The policy of `tenant`'s `agent`, lowest first, key by key: the section's
 * own < `tenants.<tenant>` < `agents.<agent>` < `tenants.<tenant>.agents.<agent>`.
 */
export const policyOf = (
  section: Section | undefined,
  tenant: string,
  agent: string,
): { readonly mode: Mode; readonly failure: Failure } => {
  const layers = [section, section?.tenants?.[tenant], section?.agents?.[agent], section?.tenants?.[tenant]?.agents?.[agent]]
  let mode: Mode = defaults.mode
  let failure: Failure = defaults.failure
  for (const layer of layers) {
    if (layer?.mode !== undefined) mode = layer.mode
    if (layer?.failure !== undefined) failure = layer.failure
  }
  return { mode, failure }
}
