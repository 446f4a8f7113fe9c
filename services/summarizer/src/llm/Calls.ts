/**
 * What every model-call client shares: the completion asked for and
 * answered, the failure and its classification, and the bound (timeout,
 * span) around one SDK call. One client per provider API sits next to it
 * (`Anthropic.ts`, `OpenAIChat.ts`, `Gemini.ts`, named after the adapters).
 */
import {
  APIConnectionError as AnthropicConnectionError,
  APIConnectionTimeoutError as AnthropicTimeoutError,
  APIError as AnthropicApiError,
} from "@anthropic-ai/sdk"
import { ApiError as GoogleApiError } from "@google/genai"
import { Data, Duration, Effect, Redacted } from "effect"
import {
  APIConnectionError as OpenAIConnectionError,
  APIConnectionTimeoutError as OpenAITimeoutError,
  APIError as OpenAIApiError,
} from "openai"
import { ProviderErrors, Spans } from "@ctxd/observe"
import type * as SummarizerConfig from "../SummarizerConfig.ts"

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
 * An on-demand summary to ask a provider for: the span as the session's
 * prompts send it, in the provider's wire format (Anthropic Messages).
 */
export interface CompactionRequest {
  readonly model: string
  /** The wire `messages` of the span (a previous provider summary first, when there is one). */
  readonly messages: ReadonlyArray<unknown>
  /** The session's wire `system` and `tools` as its prompts send them, when known. */
  readonly system?: unknown
  readonly tools?: ReadonlyArray<unknown> | undefined
  readonly maxTokens: number
}

/** The provider's summary: its signed block, verbatim, and the readable copy. */
export interface ProviderSummary {
  /** The block to send back in place of the span, byte for byte. */
  readonly block: Readonly<Record<string, unknown>>
  /** Its readable summary (the audit copy). */
  readonly content: string
  readonly inputTokens: number
  readonly outputTokens: number
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
  /** An on-demand summary written by the provider; absent: the provider has none. */
  readonly compact?: ((request: CompactionRequest) => Effect.Effect<ProviderSummary, ProviderFailed>) | undefined
}

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

/**
 * An SDK error as a {@link ProviderFailed}. An API error's message is its
 * status, the provider's error type and code, the request id and the body's
 * size, never the body (`ProviderErrors.safeMessage`): a provider may echo
 * the prompt in it, and these messages reach logs, the compaction audit and
 * replies.
 */
const classify =
  (provider: SummarizerConfig.ProviderKind, secret: string | null | undefined) =>
  (error: unknown): ProviderFailed => {
    const message = scrub(ProviderErrors.safeMessage(error), secret)
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

/** The endpoint's API key in clear (absent: the SDK's own default). */
export const key = (endpoint: SummarizerConfig.Endpoint): string | undefined =>
  endpoint.apiKey === undefined ? undefined : Redacted.value(endpoint.apiKey)

/**
 * Bounds a promise-returning call: the SDK's timeout, and ours as a backstop
 * that aborts the request. Inside a trace it is a client span
 * `ctxd.llm.complete` (provider and model; never the prompt).
 */
export const bounded = <A>(
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
