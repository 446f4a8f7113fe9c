/**
 * Model limits: the context window and the output reserve of a model, from
 * the request when given, else from a small table keyed by name prefix.
 */
import type { Turn } from "@ctxd/contracts"

/** A model with its limits settled. */
export interface ResolvedModel {
  readonly provider: Turn.Provider
  readonly name: string
  readonly contextWindow: number
  /** Tokens reserved for the answer; always < `contextWindow`. */
  readonly maxOutputTokens: number
  /** `contextWindow − maxOutputTokens`: what the prompt may use. */
  readonly effectiveWindow: number
}

/** One row of the default table. */
export interface Limits {
  readonly contextWindow: number
  readonly maxOutputTokens: number
}

/**
 * Default limits by model name prefix, first match wins:
 * `claude-*` 200,000 / 8,192; `gpt-4o*` (incl. `gpt-4o-mini`) 128,000 / 16,384;
 * `gpt-4.1*` 1,047,576 / 32,768; `gpt-5*` 400,000 / 128,000;
 * `o1*`, `o3*`, `o4*` 200,000 / 100,000; `gpt-4-turbo*` 128,000 / 4,096;
 * `gemini-2.5*` and `gemini-3*` 1,048,576 / 65,536; other `gemini-*`
 * 1,048,576 / 8,192.
 */
export const table: ReadonlyArray<readonly [RegExp, Limits]> = [
  [/^claude-/, { contextWindow: 200_000, maxOutputTokens: 8_192 }],
  [/^gpt-4o/, { contextWindow: 128_000, maxOutputTokens: 16_384 }],
  [/^gpt-4\.1/, { contextWindow: 1_047_576, maxOutputTokens: 32_768 }],
  [/^gpt-5/, { contextWindow: 400_000, maxOutputTokens: 128_000 }],
  [/^o[134](?:$|-)/, { contextWindow: 200_000, maxOutputTokens: 100_000 }],
  [/^gpt-4-turbo/, { contextWindow: 128_000, maxOutputTokens: 4_096 }],
  [/^gemini-(?:2\.5|3)/, { contextWindow: 1_048_576, maxOutputTokens: 65_536 }],
  [/^gemini-/, { contextWindow: 1_048_576, maxOutputTokens: 8_192 }],
]

/** Limits of a model the table does not know: 128,000 / 4,096. */
export const fallback: Limits = { contextWindow: 128_000, maxOutputTokens: 4_096 }

/** The table row for a model name (case-insensitive), or {@link fallback}. */
export const lookup = (name: string): Limits => {
  const lower = name.toLowerCase()
  for (const [pattern, limits] of table) if (pattern.test(lower)) return limits
  return fallback
}

/**
 * Settles a model's limits: explicit `contextWindow` / `maxOutputTokens` win
 * over the table. When the output reserve is not smaller than the window it
 * is clamped to half the window (rounded down).
 */
export const resolve = (model: Turn.Model): ResolvedModel => {
  const row = lookup(model.name)
  const contextWindow = model.contextWindow ?? row.contextWindow
  const wanted = model.maxOutputTokens ?? row.maxOutputTokens
  const maxOutputTokens = wanted < contextWindow ? wanted : Math.floor(contextWindow / 2)
  return {
    provider: model.provider,
    name: model.name,
    contextWindow,
    maxOutputTokens,
    effectiveWindow: contextWindow - maxOutputTokens,
  }
}
