/**
 * The shape of one row of the model table: what a provider adapter knows of
 * a model family — prices, cache rules, limits and capabilities. The rows
 * themselves live with their provider (`providers/<format>/Models.ts`,
 * gathered by `providers/ModelRows.ts`); `CostModel` prices calls with them
 * and `Models` sizes windows with them. Types and small constructors only,
 * no imports, so both sides can use it without a cycle.
 */

/** Which provider bills the call. */
export type Provider = "anthropic" | "openai" | "gemini" | "unknown"

/** How the provider decides what is cached. */
export type Mechanism =
  /** Anthropic: prefixes up to `cache_control` breakpoints, written at a premium. */
  | "explicit"
  /** OpenAI, Gemini: the longest previously seen prefix (OpenAI GPT-5.6+ also takes breakpoints). */
  | "automatic"

/** One cache lifetime: its name as the API spells it, its TTL and its write premium. */
export interface CacheTier {
  /** `"5m"`, `"1h"` (Anthropic), `"in_memory"`, `"24h"` (OpenAI), `"implicit"` (Gemini). */
  readonly name: string
  /** Seconds without a read after which the entry is gone. */
  readonly ttlSeconds: number
  /** Written tokens cost this multiple of the base input price (1 = no premium). */
  readonly writeMultiplier: number
  /** Entries are gone this long after they were written, reads or not (OpenAI in-memory: 1 h). */
  readonly maxLifetimeSeconds?: number | undefined
}

/** What a model family can do that changes how a prompt is built or edited. */
export interface Capabilities {
  /**
   * A thinking block sent back is checked against the prefix before it
   * (`system`, `tools`, earlier messages): an edit there invalidates it
   * (Anthropic's "prefix check" of preserved thinking).
   */
  readonly bindsReasoningToPrefix: boolean
  /** Tools can be deferred and found on demand (Anthropic `defer_loading` + tool search). */
  readonly toolSearch: boolean
  /** A `role: "system"` message may appear mid-conversation instead of an edit of the top-level `system`. */
  readonly midConversationSystem: boolean
  /** The request can mark where cached prefixes end (Anthropic `cache_control`, OpenAI `prompt_cache_breakpoint`). */
  readonly explicitCacheBreakpoints: boolean
  /**
   * The API writes a summary on demand and returns it as a signed block the
   * later requests send in place of the span (Anthropic `compaction: {type:
   * "summarize"}`); absent: false.
   */
  readonly providerCompaction?: boolean | undefined
}

/** No capability assumed: the flags of an unknown model. */
export const noCapabilities: Capabilities = {
  bindsReasoningToPrefix: false,
  toolSearch: false,
  midConversationSystem: false,
  explicitCacheBreakpoints: false,
}

/** Prices, cache rules, limits and capabilities of one model family. */
export interface ModelPrices {
  readonly provider: Provider
  /** The family the table row stands for, e.g. `claude-sonnet-4`. */
  readonly family: string
  /**
   * A row of the table matched the name (a catch-all row of a provider, such
   * as any other `claude-*`, or no row at all: false; such a turn is
   * reported as of an unknown model and priced conservatively).
   */
  readonly known: boolean
  /** USD per million uncached input tokens. */
  readonly inputPerMtok: number
  /** USD per million output tokens. */
  readonly outputPerMtok: number
  /** Cache reads cost this multiple of the input price. */
  readonly cacheReadMultiplier: number
  /** The cache lifetimes on offer; the first is the default. */
  readonly tiers: ReadonlyArray<CacheTier>
  /** Prefixes shorter than this are never cached. */
  readonly minCacheableTokens: number
  readonly mechanism: Mechanism
  /** Automatic caching: cached tokens beyond the minimum come in steps of this many (OpenAI 128). */
  readonly incrementTokens: number
  /** Explicit breakpoints: at most this many per request (Anthropic 4, OpenAI GPT-5.6+ 4; 0: none). */
  readonly maxBreakpoints: number
  /** Explicit caching: block boundaries checked for a hit before each breakpoint (Anthropic ~20). */
  readonly lookbackBlocks: number
  /** The context window, in tokens. */
  readonly contextWindow: number
  /** Tokens reserved for the answer by default (at most the model's output limit). */
  readonly maxOutputTokens: number
  readonly capabilities: Capabilities
}

/** One row of a provider's table: names it matches (lower case, no `provider/` prefix) and its family. */
export type Row = readonly [RegExp, ModelPrices]

/** Window and output reserve of a row. */
export interface Limits {
  readonly contextWindow: number
  readonly maxOutputTokens: number
}

export const MINUTE = 60
export const HOUR = 3600
