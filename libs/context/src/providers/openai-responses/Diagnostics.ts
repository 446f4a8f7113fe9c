/**
 * OpenAI Responses `prompt_cache_diagnostics` (asked for with
 * `prompt_cache_options.comparison_response_id`, GPT-5.6+; the SDK's
 * `Response.CacheMiss | CacheHit | ComparisonResponseNotFound | Unavailable`,
 * https://developers.openai.com/api/docs/guides/prompt-caching): a
 * `cache_miss` names its `reason` (`model_changed`, `prompt_cache_key_changed`,
 * `tools_changed`, `input_changed`, `context_compacted`, ... ) and
 * `cache_missed_tokens`.
 */
import type * as CacheDiagnostics from "../Diagnosis.ts"

const AT: Readonly<Record<string, CacheDiagnostics.Divergence>> = {
  model_changed: "model",
  tools_changed: "tools",
  input_changed: "messages",
  context_compacted: "messages",
}

const KINDS: Readonly<Record<string, CacheDiagnostics.Diagnosis>> = {
  cache_hit: { kind: "unchanged" },
  comparison_response_not_found: { kind: "not_found" },
  unavailable: { kind: "unavailable" },
}

export const reader: CacheDiagnostics.Reader = {
  matches: (value) => typeof value["type"] === "string" && !("cache_miss_reason" in value),
  read: (value) => {
    const type = String(value["type"])
    if (type !== "cache_miss") return KINDS[type]
    const detail = String(value["reason"])
    const missed = value["cache_missed_tokens"]
    return {
      kind: "diverged",
      // the cache key, text format, reasoning effort, verbosity or service tier: request settings, not the prompt
      at: AT[detail] ?? "other",
      detail,
      missedTokens: typeof missed === "number" && Number.isInteger(missed) && missed >= 0 ? missed : undefined,
    }
  },
}
