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
import Anthropic, {
  APIConnectionError as AnthropicConnectionError,
  APIConnectionTimeoutError as AnthropicTimeoutError,
  APIError as AnthropicApiError,
} from "@anthropic-ai/sdk"
import { ApiError as GoogleApiError, FinishReason, GoogleGenAI } from "@google/genai"
import { Context, Data, Duration, Effect, Layer, Option, Redacted, type ConfigError } from "effect"
import { ProviderKeys } from "@ctxd/context"
import OpenAI, {
  APIConnectionError as OpenAIConnectionError,
  APIConnectionTimeoutError as OpenAITimeoutError,
  APIError as OpenAIApiError,
} from "openai"
import { Spans } from "@ctxd/observe"
import * as SummarizerConfig from "./SummarizerConfig.ts"

/** One completion to make. */
export interface CompletionRequest {
  readonly model: string
  readonly system: string
  /** The one user message. */
  readonly prompt: string
  readonly maxTokens: number
  /** Ask for a JSON object (OpenAI `response_format`; Anthropic relies on the prompt). */
  readonly json?: boolean | undefined
}

/** The model's answer and what it cost. */
export interface Completion {
  readonly text: string
  /** Input tokens billed (Anthropic: uncached + cache read + cache write). */
  readonly inputTokens: number
  readonly outputTokens: number
  /** `end_turn`/`stop`, or `max_tokens`/`length` when the answer was cut. */
  readonly stopReason: string
}

/**
 * Why a call failed. `rate_limited`, `server`, `timeout` and `connection` are
 * worth retrying; `denied`: no key this tenant may use (`ProviderKeys`), no
 * call was made.
 */
export type FailureReason = "timeout" | "rate_limited" | "server" | "connection" | "auth" | "rejected" | "denied" | "unknown"

/** A provider call failed. */
export class ProviderFailed extends Data.TaggedError("ProviderFailed")<{
  readonly provider: SummarizerConfig.ProviderKind
  readonly reason: FailureReason
  readonly message: string
  readonly status?: number | undefined
}> {}

/** True for failures a retry may fix. */
export const isRetryable = (error: ProviderFailed): boolean =>
  error.reason === "rate_limited" || error.reason === "server" || error.reason === "timeout" || error.reason === "connection"

/** One provider's client. */
export interface LlmClient {
  readonly provider: SummarizerConfig.ProviderKind
  readonly complete: (request: CompletionRequest) => Effect.Effect<Completion, ProviderFailed>
}

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

const reasonOf = (status: number): FailureReason =>
  status === 429
    ? "rate_limited"
    : status >= 500
      ? "server"
      : status === 401 || status === 403
        ? "auth"
        : status === 408
          ? "timeout"
          : status >= 400
            ? "rejected"
            : "unknown"

/**
 * `message` with every occurrence of `secret` (the API key of the call)
 * replaced: a provider's error may echo the key it was sent, and these
 * messages reach logs and replies (the loop judge's `reason`).
 */
export const scrub = (message: string, secret: string | null | undefined): string =>
  secret === undefined || secret === null || secret.length < 4 ? message : message.replaceAll(secret, "[redacted]")

const classify =
  (provider: SummarizerConfig.ProviderKind, secret: string | null | undefined) =>
  (error: unknown): ProviderFailed => {
    const message = scrub(error instanceof Error ? error.message : String(error), secret)
    if (error instanceof AnthropicTimeoutError || error instanceof OpenAITimeoutError) {
      return new ProviderFailed({ provider, reason: "timeout", message })
    }
    if (error instanceof AnthropicConnectionError || error instanceof OpenAIConnectionError) {
      return new ProviderFailed({ provider, reason: "connection", message })
    }
    if (
      (error instanceof AnthropicApiError || error instanceof OpenAIApiError || error instanceof GoogleApiError) &&
      typeof error.status === "number"
    ) {
      return new ProviderFailed({ provider, reason: reasonOf(error.status), message, status: error.status })
    }
    return new ProviderFailed({ provider, reason: "unknown", message })
  }

const key = (endpoint: SummarizerConfig.Endpoint): string | undefined =>
  endpoint.apiKey === undefined ? undefined : Redacted.value(endpoint.apiKey)

/**
 * Bounds a promise-returning call: the SDK's timeout, and ours as a backstop
 * that aborts the request. Inside a trace it is a client span
 * `ctxd.llm.complete` (provider and model; never the prompt).
 */
const bounded = <A>(
  provider: SummarizerConfig.ProviderKind,
  timeoutMs: number,
  model: string,
  secret: string | null | undefined,
  call: (signal: AbortSignal) => Promise<A>,
): Effect.Effect<A, ProviderFailed> =>
  Effect.tryPromise({ try: call, catch: classify(provider, secret) }).pipe(
    Effect.timeoutFail({
      duration: Duration.millis(timeoutMs + 1_000),
      onTimeout: () => new ProviderFailed({ provider, reason: "timeout", message: `no answer within ${timeoutMs} ms` }),
    }),
    Spans.child("ctxd.llm.complete", { kind: "client", attributes: { "gen_ai.system": provider, "gen_ai.request.model": model } }),
  )

const anthropicClient = (endpoint: SummarizerConfig.Endpoint, timeoutMs: number): LlmClient => {
  const apiKey = key(endpoint)
  const sdk = new Anthropic({
    ...(endpoint.baseURL === undefined ? {} : { baseURL: endpoint.baseURL }),
    ...(apiKey === undefined ? {} : { apiKey }),
    maxRetries: 0,
    timeout: timeoutMs,
  })
  return {
    provider: "anthropic",
    complete: (request) =>
      bounded("anthropic", timeoutMs, request.model, sdk.apiKey, (signal) =>
        sdk.messages.create(
          {
            model: request.model,
            max_tokens: request.maxTokens,
            system: request.system,
            messages: [{ role: "user", content: request.prompt }],
          },
          { signal, timeout: timeoutMs, maxRetries: 0 },
        ),
      ).pipe(
        Effect.map((message) => ({
          text: message.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join(""),
          inputTokens:
            message.usage.input_tokens +
            (message.usage.cache_read_input_tokens ?? 0) +
            (message.usage.cache_creation_input_tokens ?? 0),
          outputTokens: message.usage.output_tokens,
          stopReason: message.stop_reason ?? "end_turn",
        })),
      ),
  }
}

const openaiClient = (
  provider: "openai" | "openai_compatible",
  endpoint: SummarizerConfig.Endpoint,
  timeoutMs: number,
): LlmClient => {
  // A self-hosted server often has no key; the SDK insists on one.
  const apiKey = key(endpoint) ?? (provider === "openai_compatible" ? "none" : undefined)
  const sdk = new OpenAI({
    ...(endpoint.baseURL === undefined ? {} : { baseURL: endpoint.baseURL }),
    ...(apiKey === undefined ? {} : { apiKey }),
    maxRetries: 0,
    timeout: timeoutMs,
  })
  return {
    provider,
    complete: (request) =>
      bounded(provider, timeoutMs, request.model, sdk.apiKey, (signal) =>
        sdk.chat.completions.create(
          {
            model: request.model,
            messages: [
              { role: "system", content: request.system },
              { role: "user", content: request.prompt },
            ],
            // OpenAI's own API wants max_completion_tokens; compatible servers mostly know only max_tokens.
            ...(provider === "openai" ? { max_completion_tokens: request.maxTokens } : { max_tokens: request.maxTokens }),
            ...(request.json === true && provider === "openai" ? { response_format: { type: "json_object" as const } } : {}),
          },
          { signal, timeout: timeoutMs, maxRetries: 0 },
        ),
      ).pipe(
        Effect.map((completion) => {
          const choice = completion.choices[0]
          return {
            text: choice?.message.content ?? "",
            inputTokens: completion.usage?.prompt_tokens ?? 0,
            outputTokens: completion.usage?.completion_tokens ?? 0,
            stopReason: choice?.finish_reason ?? "stop",
          }
        }),
      ),
  }
}

/**
 * Gemini through `@google/genai`: the system prompt as `systemInstruction`,
 * the output cap as `maxOutputTokens`, JSON asked for with
 * `responseMimeType: "application/json"`. The SDK's retries are off
 * (`retryOptions.attempts: 1`). Input tokens: `promptTokenCount` (cached
 * tokens included).
 */
const googleClient = (endpoint: SummarizerConfig.Endpoint, timeoutMs: number): LlmClient => {
  const apiKey = key(endpoint)
  const sdk = new GoogleGenAI({
    ...(apiKey === undefined ? {} : { apiKey }),
    httpOptions: {
      ...(endpoint.baseURL === undefined ? {} : { baseUrl: endpoint.baseURL }),
      timeout: timeoutMs,
      retryOptions: { attempts: 1 },
    },
  })
  return {
    provider: "google",
    complete: (request) =>
      bounded("google", timeoutMs, request.model, apiKey ?? process.env["GEMINI_API_KEY"] ?? process.env["GOOGLE_API_KEY"], (signal) =>
        sdk.models.generateContent({
          model: request.model,
          contents: [{ role: "user", parts: [{ text: request.prompt }] }],
          config: {
            systemInstruction: request.system,
            maxOutputTokens: request.maxTokens,
            ...(request.json === true ? { responseMimeType: "application/json" } : {}),
            abortSignal: signal,
          },
        }),
      ).pipe(
        Effect.map((response) => {
          const candidate = response.candidates?.[0]
          const text = (candidate?.content?.parts ?? []).flatMap((p) => (typeof p.text === "string" && p.thought !== true ? [p.text] : [])).join("")
          return {
            text,
            inputTokens: response.usageMetadata?.promptTokenCount ?? 0,
            outputTokens: response.usageMetadata?.candidatesTokenCount ?? 0,
            stopReason: candidate?.finishReason === FinishReason.MAX_TOKENS ? "max_tokens" : "stop",
          }
        }),
      ),
  }
}

/** What {@link make} needs: the endpoints and the per-call timeout (defaults in `SummarizerConfig`). */
export type ClientConfig = Pick<SummarizerConfig.Config, "anthropic" | "openai" | "compatible" | "timeoutMs"> &
  Partial<Pick<SummarizerConfig.Config, "google">>

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
  const endpointOf = (provider: SummarizerConfig.ProviderKind): SummarizerConfig.Endpoint =>
    provider === "anthropic"
      ? config.anthropic
      : provider === "google"
        ? (config.google ?? {})
        : provider === "openai" || config.compatible.baseURL === undefined
          ? config.openai
          : config.compatible
  const build = (provider: SummarizerConfig.ProviderKind, endpoint: SummarizerConfig.Endpoint): LlmClient =>
    provider === "anthropic"
      ? anthropicClient(endpoint, config.timeoutMs)
      : provider === "google"
        ? googleClient(endpoint, config.timeoutMs)
        : openaiClient(provider, endpoint, config.timeoutMs)
  const workers = new Map<SummarizerConfig.ProviderKind, LlmClient>()
  // insertion order: the first is the least recently created
  const tenants = new Map<string, LlmClient>()
  return {
    client: (provider, tenant) => {
      const choice = keys.choose(tenant, provider)
      if (choice._tag === "Denied") return deniedClient(provider, choice.message)
      if (choice._tag === "Worker") {
        let client = workers.get(provider)
        if (client === undefined) workers.set(provider, (client = build(provider, endpointOf(provider))))
        return client
      }
      const id = `${provider} ${choice.ref}`
      let client = tenants.get(id)
      if (client === undefined) {
        if (tenants.size >= MAX_TENANT_CLIENTS) tenants.delete(tenants.keys().next().value!)
        tenants.set(id, (client = build(provider, { ...endpointOf(provider), apiKey: choice.key })))
      }
      return client
    },
  }
}

/** A client that makes no call: every completion fails with `denied` and `message`. */
const deniedClient = (provider: SummarizerConfig.ProviderKind, message: string): LlmClient => ({
  provider,
  complete: () => Effect.fail(new ProviderFailed({ provider, reason: "denied", message })),
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
