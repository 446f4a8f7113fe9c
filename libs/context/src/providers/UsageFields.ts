/**
 * The neutral form of a provider's usage report and the field readers the
 * adapters' usage readers share: each adapter's `Usage.ts` reads its own
 * field names into {@link Usage}.
 */
import { Either } from "effect"

/** Usage of one provider response, normalized. */
export interface Usage {
  readonly style: "anthropic" | "openai"
  /** Uncached input tokens (Anthropic), or prompt tokens minus cached ones (OpenAI). */
  readonly input: number
  readonly cacheRead: number
  /** Cache writes (Anthropic only; 0 for OpenAI). */
  readonly cacheWrite: number
  /** The whole prompt as billed: what an estimate of the prompt is compared with. */
  readonly billedPrompt: number
  readonly output: number | undefined
}

/**
 * The prompt tokens a report says were written to the cache, by its style:
 * Anthropic-style reports bill cache writes in a field of their own;
 * OpenAI-style ones (OpenAI, Gemini) write the uncached input implicitly.
 */
const WRITES: { readonly [S in Usage["style"]]: (usage: Usage) => number } = {
  anthropic: (usage) => usage.cacheWrite,
  openai: (usage) => usage.input,
}

/** The cache writes billed in `usage` (see {@link WRITES}). */
export const billedWrites = (usage: Usage): number => WRITES[usage.style](usage)

/** Why a usage report is unusable: a JSON path and a sentence. */
export interface UsageProblem {
  readonly path: string
  readonly message: string
}

/** One adapter's usage reader: whether a usage object is in its field names, and reading it. */
export interface UsageReader {
  readonly matches: (usage: Readonly<Record<string, unknown>>) => boolean
  readonly read: (usage: Readonly<Record<string, unknown>>, path: string) => Either.Either<Usage, UsageProblem>
}

/** True for a plain object (not an array). */
export const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A token count field: absent/null = undefined; present = a finite, non-negative integer. */
export const field = (
  record: Readonly<Record<string, unknown>>,
  key: string,
  path: string,
): Either.Either<number | undefined, UsageProblem> => {
  const value = record[key]
  if (value === undefined || value === null) return Either.right(undefined)
  if (typeof value !== "number" || !Number.isFinite(value)) {
    return Either.left({
      path: `${path}.${key}`,
      message: `usage.${key} must be a number of tokens, got ${JSON.stringify(value) ?? typeof value}`,
    })
  }
  if (value < 0) return Either.left({ path: `${path}.${key}`, message: `usage.${key} must not be negative, got ${value}` })
  if (!Number.isInteger(value))
    return Either.left({ path: `${path}.${key}`, message: `usage.${key} must be a whole number of tokens, got ${value}` })
  return Either.right(value)
}

/** The output tokens, by either OpenAI-style or Anthropic-style name. */
export const output = (usage: Readonly<Record<string, unknown>>, path: string): Either.Either<number | undefined, UsageProblem> =>
  Either.gen(function* () {
    return (yield* field(usage, "output_tokens", path)) ?? (yield* field(usage, "completion_tokens", path))
  })

/**
 * An OpenAI-style prompt split by its details: `cached` read, and, on models
 * that bill their writes (GPT-5.6+), `cache_write_tokens` written — then the
 * report bills writes in a field of its own, as Anthropic's does (Anthropic
 * style); without the field, as before (OpenAI style). The writes are part of
 * the prompt tokens (https://developers.openai.com/api/docs/guides/prompt-caching:
 * "OpenAI reports writes in cache_write_tokens and reads in cached_tokens").
 */
export const openaiSplit = (
  details: Readonly<Record<string, unknown>> | undefined,
  prompt: number,
  cached: number,
  output: number | undefined,
  at: string,
): Either.Either<Usage, UsageProblem> =>
  Either.gen(function* () {
    const written = details === undefined ? undefined : yield* field(details, "cache_write_tokens", at)
    if (written === undefined)
      return { style: "openai", input: prompt - cached, cacheRead: cached, cacheWrite: 0, billedPrompt: prompt, output } as const
    if (cached + written > prompt)
      return yield* Either.left({
        path: `${at}.cache_write_tokens`,
        message: `cached_tokens + cache_write_tokens (${cached + written}) exceed the prompt (${prompt})`,
      })
    return {
      style: "anthropic",
      input: prompt - cached - written,
      cacheRead: cached,
      cacheWrite: written,
      billedPrompt: prompt,
      output,
    } as const
  })
