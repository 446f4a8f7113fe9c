/**
 * The interface every provider format implements. One adapter per request
 * format (`anthropic`, `openai` Chat Completions, `openai-responses`,
 * `gemini`), each in a folder of its own under `providers/`, holds what is
 * specific to that API: reading its input into the neutral conversation and
 * rendering the neutral view back into its request body, laid out for its
 * cache. The pipeline and its stages see only the neutral conversation and
 * reach a format through {@link Providers.of}.
 *
 * What a folder holds (pure: no I/O, no SDK): `index.ts` (this adapter),
 * `Normalize`, `Render`, `Usage` (its usage reader), `Validate` (the fake
 * provider's validator), `CountBody` (the body its count endpoint reads,
 * where it has one), `Opaque` (its opaque blocks: reasoning, compaction,
 * how they read elsewhere; a leaf the renderers read through
 * `providers/Opaque`). The folder of a model provider's own format
 * (`anthropic/`, `openai-chat/` for OpenAI, `gemini/` for Google) also holds
 * the provider's descriptor, `Provider` (`ModelProvider`: tokenizer
 * family, exact count capability, local body layout; reached through
 * `Providers.ofProvider`) and `Api` (its error envelope and paths, which the
 * fake provider answers in). Prices live in `CostModel`'s price rows, named
 * by {@link Adapter.prices}.
 *
 * A provider's I/O parts are SDK-bound and live in their services, one
 * module per provider, picked by the descriptor's provider name in a table
 * typed over every provider (no branch on a name):
 *
 * - exact token counts: `services/token-counter/src/{Anthropic,OpenAI,
 *   Gemini}Counter.ts`, picked in `services/token-counter/src/internal/
 *   exactPool.ts` for a descriptor with an `exactCount`;
 * - summarizing calls: `services/summarizer/src/llm/{Anthropic,OpenAIChat,
 *   Gemini}.ts` (shared retries and errors in `llm/Calls.ts`), picked in
 *   `services/summarizer/src/Llm.ts`.
 */
import type { Anthropic, Conversation, Gemini, OpenAI, OpenAIResponses, Turn } from "@ctxd/contracts"
import type * as CostModel from "../CostModel.ts"
import type * as RenderAnthropic from "./anthropic/Render.ts"
import type * as Common from "./Common.ts"
import type * as UsageFields from "./UsageFields.ts"

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
  /**
   * The previous response's id (`null`: opt in without one): formats with
   * cache diagnostics ask for them against it; the others ignore it.
   */
  readonly previousResponseId?: string | null | undefined
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

/** How a format's prompt cache is steered from the request body. */
export interface CacheRules {
  /**
   * The provider caches only at explicit breakpoints placed in the body
   * (without any, nothing is cached); otherwise it caches prefixes itself.
   */
  readonly breakpoints: boolean
  /** The cache TTLs a body can ask for per breakpoint (none: the model's default only). */
  readonly ttls: ReadonlyArray<string>
  /** A longer retention tier the body can ask for where the model has it (absent: none). */
  readonly retention: string | undefined
  /**
   * On models whose row takes explicit breakpoints in a format that is
   * otherwise automatic (OpenAI GPT-5.6+): the TTLs the body can ask for,
   * instead of `ttls` and `retention` (absent: the format has no such mode).
   */
  readonly explicitTtls?: ReadonlyArray<string> | undefined
}

/** One provider format's adapter. */
export interface Adapter<F extends Turn.Format = Turn.Format> {
  readonly format: F
  /** The model provider whose API speaks this format. */
  readonly provider: Turn.Provider
  /** The provider as price rows name it. */
  readonly prices: CostModel.Provider
  /** The request field that carries the history (`messages`, `input`, `contents`): errors name it. */
  readonly historyField: "messages" | "input" | "contents"
  readonly cacheRules: CacheRules
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
  /** Reads the usage report of this API's responses. */
  readonly usage: UsageFields.UsageReader
  /** The neutral view → this format's request body, laid out for its cache. */
  readonly render: (input: RenderInput) => Rendered
  /**
   * The provider's tool search tool, as `ToolSearch.select` adds it, where
   * this format can defer tools (`defer_loading`); used on models whose row
   * has `toolSearch`. Absent: on-demand toolsets go through `load_toolset`.
   */
  readonly toolSearch?: Conversation.Tool | undefined
  /** This format sends `role: "system"` messages where they stand (`MidSystem`), on models whose row has `midConversationSystem`. */
  readonly midConversationSystem?: boolean | undefined
}
