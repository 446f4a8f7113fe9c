/**
 * The interface every provider format implements. One adapter per request
 * format (`anthropic`, `openai` Chat Completions, `openai-responses`,
 * `gemini`), each in a folder of its own under `providers/`, holds what is
 * specific to that API: reading its input into the neutral conversation and
 * rendering the neutral view back into its request body, laid out for its
 * cache. The pipeline and its stages see only the neutral conversation and
 * reach a format through {@link Providers.of}.
 */
import type { Anthropic, Conversation, Gemini, OpenAI, OpenAIResponses, Turn } from "@ctxd/contracts"
import type * as RenderAnthropic from "./anthropic/Render.ts"
import type * as Common from "./Common.ts"

/** A history in any request format (the loop check's and the summarizer's requests carry one). */
export type History =
  | { readonly format: "anthropic"; readonly messages: ReadonlyArray<Anthropic.Message> }
  | { readonly format: "openai"; readonly messages: ReadonlyArray<OpenAI.Message> }
  | { readonly format: "openai-responses"; readonly input: ReadonlyArray<OpenAIResponses.Item> }
  | { readonly format: "gemini"; readonly contents: ReadonlyArray<Gemini.Content> }

/** Tool definitions as each format spells them. */
export interface ToolsByFormat {
  readonly anthropic: ReadonlyArray<Anthropic.Tool>
  readonly openai: ReadonlyArray<OpenAI.Tool>
  readonly "openai-responses": ReadonlyArray<OpenAIResponses.Tool>
  readonly gemini: ReadonlyArray<Gemini.Tool>
}

/**
 * What every renderer reads: the neutral view, plus the session (for a
 * prompt cache key) and the cache planner's plan (for the cache tier; absent:
 * no plan, each format's default).
 */
export interface RenderInput extends Omit<RenderAnthropic.RenderInput, "ttl"> {
  readonly tenant: string
  readonly session: string
  readonly cachePlan?: { readonly tier?: string | undefined } | undefined
}

/** A rendered request body and how it is laid out for the provider's prompt cache. */
export interface Rendered {
  readonly request: Record<string, unknown>
  readonly cache: {
    /** Explicit cache breakpoints placed (formats with automatic caching: 0). */
    readonly breakpoints: number
    /** The prompt cache key sent with the body (formats without one: `null`). */
    readonly promptCacheKey: string | null
  }
}

/** One provider format's adapter. */
export interface Adapter<F extends Turn.Format = Turn.Format> {
  readonly format: F
  /**
   * A whole decoded turn request → messages (with source indices), system
   * sections and tools. `openCalls`: the session's open calls, read by
   * formats whose tool results may carry no call id.
   */
  readonly request: (
    req: Extract<Turn.TurnRequest, { readonly format: F }>,
    openCalls?: () => ReadonlyArray<Common.OpenCall>,
    workspace?: ReadonlyArray<Conversation.SystemSection>,
  ) => Common.NormalizedRequest
  /** A history of this format in the neutral model. */
  readonly history: (history: Extract<History, { readonly format: F }>) => Array<Conversation.Message>
  /** Tool definitions of this format → neutral tools (absent: none). */
  readonly tools: (defs: ToolsByFormat[F] | undefined) => Array<Conversation.Tool>
  /** The neutral view → this format's request body, laid out for its cache. */
  readonly render: (input: RenderInput) => Rendered
}
