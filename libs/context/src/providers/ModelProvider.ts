/**
 * What ctxd knows of a model provider (Anthropic, OpenAI, Google) as
 * opposed to one of its request formats: its tokenizer, its exact count
 * endpoint, how a body sent to it is counted locally, and how its API words
 * an error. One descriptor per provider, in the adapter folder of the
 * provider's own format (`anthropic/`, `openai-chat/` for OpenAI, whose
 * Responses adapter shares it, `gemini/`), reached through
 * `Providers.ofProvider(provider)`. Pure data and functions: the SDK-bound
 * parts (exact counters, summarizing clients) live in their services and are
 * picked by {@link ModelProvider.provider} (see `Adapter`'s module doc).
 */
import type { Turn } from "@ctxd/contracts"
import type * as ApiErrors from "./ApiErrors.ts"

/** A family of tokenizers alike enough that one model's calibration factor is a good start for another's. */
export type TokenizerFamily = "claude" | "gpt" | "gemini"

/** A provider's exact count endpoint: its backend name and what it can count. */
export interface ExactCount {
  /** The backend name (`CTXD_TOKEN_BACKEND`, turn reports' `counter.backend`). */
  readonly backend: string
  /** Why a turn in `format` cannot be counted by the endpoint (`undefined`: it can). */
  readonly formatProblem: (format: Turn.Format) => string | undefined
  /** Why a rendered request `body` cannot be counted by the endpoint (`undefined`: it can). */
  readonly bodyProblem: (body: Readonly<Record<string, unknown>>) => string | undefined
}

/** How a request body rendered for the provider is counted locally. */
export interface LocalBody {
  /** Its bodies carry the history in Gemini's `contents` (else `messages` / `input`). */
  readonly contents: boolean
  /** Its `messages` carry Chat Completions' `tool_calls`, `tool` roles and `refusal`s, each with its framing. */
  readonly chatFields: boolean
}

/** One model provider's descriptor. */
export interface ModelProvider<P extends Turn.Provider = Turn.Provider> {
  readonly provider: P
  /**
   * The tokenizer of its models: the calibration family a model starts in
   * when its name does not tell, and the name stored token counts are kept
   * under when all its models share one tokenizer of the provider's own
   * (`undefined`: counts are kept per local vocabulary of the model name).
   */
  readonly tokenizer: { readonly family: TokenizerFamily; readonly stored: string | undefined }
  /** Its model names, to tell the provider from a configured name alone (`undefined`: the default provider). */
  readonly modelNames: RegExp | undefined
  /** Its exact count endpoint (`undefined`: none). */
  readonly exactCount: ExactCount | undefined
  readonly localBody: LocalBody
  /** How its API words an error, and the paths it serves. */
  readonly api: ApiErrors.Api
}
