/**
 * The model port of the summarizer: one completion (a system prompt and one
 * user prompt in, text and billed tokens out), served through the official
 * SDKs: `@anthropic-ai/sdk` (Messages), `openai` (Chat Completions),
 * `@google/genai` (`models.generateContent`, Gemini Developer API) and the
 * same `openai` SDK pointed at any OpenAI-compatible base URL for
 * self-hosted models. The SDKs' own retries are off (`maxRetries: 0`): the
 * summarizer owns retries and backoff. A timeout aborts the HTTP request.
 *
 * A `Context.Tag` with {@link make} / {@link layer} / {@link layerConfig};
 * tests point the real SDKs at the fake provider through the config.
 */
import { Context, Effect, Layer, Option, type ConfigError } from "effect"
import { ProviderKeys } from "@ctxd/context"
import * as Anthropic from "./llm/Anthropic.ts"
import * as Calls from "./llm/Calls.ts"
import * as Gemini from "./llm/Gemini.ts"
import * as OpenAIChat from "./llm/OpenAIChat.ts"
import * as SummarizerConfig from "./SummarizerConfig.ts"

export { isRetryable, ProviderFailed, scrub } from "./llm/Calls.ts"
export type { CompactionRequest, Completion, CompletionRequest, FailureReason, LlmClient, ProviderSummary } from "./llm/Calls.ts"

type LlmClient = Calls.LlmClient

/**
 * The clients of this process: one per provider kind with the worker's key,
 * one per (provider, key) for tenants with their own keys (`ProviderKeys`).
 */
export interface LlmService {
  /**
   * The client for calls on behalf of `tenant` (undefined: the tenant-less
   * legacy subjects): with the tenant's own key, the worker's, or one that
   * fails every call with `denied`.
   */
  readonly client: (provider: SummarizerConfig.ProviderKind, tenant?: string | undefined) => LlmClient
}

/** The model port. */
export class Llm extends Context.Tag("@ctxd/summarizer/Llm")<Llm, LlmService>() {}

/** What {@link make} needs: the endpoints and the per-call timeout (defaults in `SummarizerConfig`). */
export type ClientConfig = Pick<SummarizerConfig.Config, "anthropic" | "openai" | "compatible" | "timeoutMs"> &
  Partial<Pick<SummarizerConfig.Config, "google">>

/**
 * Each provider kind's endpoint and client, one client module per adapter
 * (Anthropic Messages, Chat Completions for OpenAI and compatible servers,
 * Gemini).
 */
const kinds: {
  readonly [K in SummarizerConfig.ProviderKind]: {
    readonly endpoint: (config: ClientConfig) => SummarizerConfig.Endpoint
    readonly client: (endpoint: SummarizerConfig.Endpoint, timeoutMs: number) => LlmClient
    /** The variables the SDK reads a key from when the endpoint has none, the first named in refusals; empty: no key needed. */
    readonly keyVariables: ReadonlyArray<string>
  }
} = {
  anthropic: { endpoint: (c) => c.anthropic, client: Anthropic.client, keyVariables: ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"] },
  openai: { endpoint: (c) => c.openai, client: (e, t) => OpenAIChat.client("openai", e, t), keyVariables: ["OPENAI_API_KEY"] },
  openai_compatible: {
    endpoint: (c) => (c.compatible.baseURL === undefined ? c.openai : c.compatible),
    client: (e, t) => OpenAIChat.client("openai_compatible", e, t),
    keyVariables: [],
  },
  google: { endpoint: (c) => c.google ?? {}, client: Gemini.client, keyVariables: ["GEMINI_API_KEY", "GOOGLE_API_KEY"] },
}

const present = (value: string | undefined): boolean => value !== undefined && value.trim() !== ""

/**
 * The refusal for a provider without a key (undefined: it has one, or needs
 * none): names the variable to set, never a value.
 */
const missingKey = (provider: SummarizerConfig.ProviderKind, endpoint: SummarizerConfig.Endpoint): string | undefined => {
  const variables = kinds[provider].keyVariables
  if (variables.length === 0 || present(Calls.key(endpoint))) return undefined
  if (variables.some((name) => present(process.env[name]))) return undefined
  return `no ${provider} API key is configured: set ${variables[0]!} (or give the tenant a key of its own in its section's providers)`
}

/** Clients with tenants' own keys kept at once (least recently created dropped first; a dropped one is rebuilt on its next call). */
const MAX_TENANT_CLIENTS = 256

/**
 * The SDK-backed clients. Each is created on first use, so a process that
 * never summarizes with a provider never needs its key. Asking for
 * `openai_compatible` without `CTXD_SUMMARIZER_BASE_URL` uses the OpenAI
 * endpoint config. `keys` chooses whose key a tenant's call uses (default:
 * the worker's for every call).
 */
export const make = (config: ClientConfig, keys: ProviderKeys.ProviderKeysService = ProviderKeys.workerOnly): LlmService => {
  const endpointOf = (provider: SummarizerConfig.ProviderKind): SummarizerConfig.Endpoint => kinds[provider].endpoint(config)
  /** The SDK client; any constructor exception fails the calls instead of reaching a handler. */
  const construct = (provider: SummarizerConfig.ProviderKind, endpoint: SummarizerConfig.Endpoint): LlmClient => {
    try {
      return kinds[provider].client(endpoint, config.timeoutMs)
    } catch (error) {
      const message = Calls.scrub(error instanceof Error ? error.message : String(error), Calls.key(endpoint))
      return failingClient(provider, "rejected", `the ${provider} client could not be created: ${message}`)
    }
  }
  // a missing key is refused before the SDK is built (the openai SDK throws in its constructor)
  const refusedOrBuilt = (provider: SummarizerConfig.ProviderKind, endpoint: SummarizerConfig.Endpoint) => {
    const missing = missingKey(provider, endpoint)
    return missing === undefined
      ? { refused: false, client: construct(provider, endpoint) }
      : { refused: true, client: failingClient(provider, "denied", missing) }
  }
  const workers = new Map<SummarizerConfig.ProviderKind, LlmClient>()
  // insertion order: the first is the least recently created
  const tenants = new Map<string, LlmClient>()
  return {
    client: (provider, tenant) => {
      const choice = keys.choose(tenant, provider)
      if (choice._tag === "Denied") return failingClient(provider, "denied", choice.message)
      if (choice._tag === "Worker") {
        const cached = workers.get(provider)
        if (cached !== undefined) return cached
        const { refused, client } = refusedOrBuilt(provider, endpointOf(provider))
        // a refusal is not kept: a key set later is used by the next call
        if (!refused) workers.set(provider, client)
        return client
      }
      const id = `${provider} ${choice.ref}`
      let client = tenants.get(id)
      if (client === undefined) {
        if (tenants.size >= MAX_TENANT_CLIENTS) tenants.delete(tenants.keys().next().value!)
        tenants.set(id, (client = refusedOrBuilt(provider, { ...endpointOf(provider), apiKey: choice.key }).client))
      }
      return client
    },
  }
}

/** A client that makes no call: every completion fails with `reason` and `message`. */
const failingClient = (provider: SummarizerConfig.ProviderKind, reason: Calls.FailureReason, message: string): LlmClient => ({
  provider,
  complete: () => Effect.fail(new Calls.ProviderFailed({ provider, reason, message })),
})

/** The clients for explicit config (the worker's key for every call unless `keys` says otherwise). */
export const layer = (config: ClientConfig, keys?: ProviderKeys.ProviderKeysService): Layer.Layer<Llm> =>
  Layer.sync(Llm, () => make(config, keys))

/**
 * The clients configured from the environment (`SummarizerConfig.config`),
 * choosing keys with the `ProviderKeys` in the context when there is one.
 */
export const layerConfig: Layer.Layer<Llm, ConfigError.ConfigError> = Layer.effect(
  Llm,
  Effect.gen(function* () {
    const config = yield* SummarizerConfig.config
    const keys = yield* Effect.serviceOption(ProviderKeys.ProviderKeys)
    return make(config, Option.getOrUndefined(keys))
  }),
)
