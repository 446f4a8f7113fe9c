/**
 * Drift and calibration, pure.
 *
 * - {@link parseUsage} reads the usage a provider billed for a turn, in
 *   Anthropic field names (`input_tokens`, `cache_read_input_tokens`,
 *   `cache_creation_input_tokens`) or OpenAI ones (`prompt_tokens`,
 *   `prompt_tokens_details.cached_tokens`). Billed prompt tokens are input +
 *   cache read + cache write (Anthropic reports them apart) or
 *   `prompt_tokens` (OpenAI's already include the cached ones).
 * - Drift of a turn = (estimate − billed) / billed: negative = under-count.
 * - A per-model, per-local-backend correction factor: an EWMA of
 *   billed / raw local estimate, bounded to [`minFactor`, `maxFactor`]
 *   (default [0.5, 2]). The first reports weigh more (weight
 *   max(`alpha`, 1 / n) for the n-th report), so a few reports already give
 *   a usable factor; after that it follows slow changes with weight `alpha`
 *   (default 0.1). Local estimates are multiplied by it.
 * - Drift distributions per model: a histogram with fixed buckets and a
 *   window of the last {@link WINDOW} values for quantiles, both bounded.
 *
 * The state built from these (per tenant and model, with a global prior,
 * bounded labels) is in `CalibrationState`.
 */
import { ProviderUsage, Providers } from "@ctxd/context"
import { Either } from "effect"

/** Usage of one provider response, normalized. */
export type Usage = ProviderUsage.Usage

/** Why a usage report is unusable: a JSON path and a sentence. */
export type UsageProblem = ProviderUsage.UsageProblem

/**
 * Reads a usage object in any provider's field names, by the adapter whose
 * names it uses (OpenAI Responses usage, `input_tokens` with
 * `input_tokens_details.cached_tokens`, reads as OpenAI: its `input_tokens`
 * include the cached ones; so does Gemini's `usageMetadata`,
 * `promptTokenCount` with `cachedContentTokenCount`, output
 * `candidatesTokenCount` + `thoughtsTokenCount`). Fails with a clear
 * problem when it is not an object, has none of `input_tokens`,
 * `prompt_tokens` and `promptTokenCount`, or has a count field that is negative, fractional or not
 * a number; cached OpenAI tokens may not exceed `prompt_tokens`.
 */
export const parseUsage = (usage: unknown, path = "usage"): Either.Either<Usage, UsageProblem> => {
  if (!ProviderUsage.isRecord(usage)) return Either.left({ path, message: "usage must be an object with the provider's token counts" })
  const adapter = Providers.all.find((a) => a.usage.matches(usage))
  if (adapter !== undefined) return adapter.usage.read(usage, path)
  // a malformed output count is reported before the missing input field, as every reader does
  const output = ProviderUsage.output(usage, path)
  if (Either.isLeft(output)) return Either.left(output.left)
  return Either.left({
    path,
    message: "usage has neither input_tokens (Anthropic) nor prompt_tokens (OpenAI) nor promptTokenCount (Gemini)",
  })
}

/** (estimate − billed) / billed; billed must be positive. */
export const drift = (estimate: number, billed: number): number => (estimate - billed) / billed

// ---------------------------------------------------------------- factors

/** Tuning of the correction factor (defaults in the module doc). */
export interface FactorOptions {
  readonly alpha: number
  readonly minFactor: number
  readonly maxFactor: number
}

/** `alpha` 0.1, factor bounded to [0.5, 2]. */
export const defaultFactorOptions: FactorOptions = { alpha: 0.1, minFactor: 0.5, maxFactor: 2 }

/** One model's (and local backend's) correction factor. */
export interface Factor {
  readonly factor: number
  /** Usage reports folded in. */
  readonly reports: number
}

/** No report yet: factor 1. */
export const initialFactor: Factor = { factor: 1, reports: 0 }

const clamp = (x: number, lo: number, hi: number): number => Math.min(hi, Math.max(lo, x))

/** Folds one observation `billed / rawEstimate` into the factor. */
export const updateFactor = (current: Factor, ratio: number, options: FactorOptions = defaultFactorOptions): Factor => {
  if (!Number.isFinite(ratio) || ratio <= 0) return current
  const r = clamp(ratio, options.minFactor, options.maxFactor)
  const n = current.reports + 1
  const weight = Math.max(options.alpha, 1 / n)
  return { factor: clamp(current.factor + weight * (r - current.factor), options.minFactor, options.maxFactor), reports: n }
}

// -------------------------------------------------------------- histogram

/** Upper bucket edges of signed drift; one more bucket takes everything above the last edge. */
export const BUCKETS: ReadonlyArray<number> = [-0.5, -0.25, -0.1, -0.05, -0.03, -0.01, 0.01, 0.03, 0.05, 0.1, 0.25, 0.5]

/** Drift values kept for quantiles. */
export const WINDOW = 1_024

/** A bounded drift distribution. */
export interface Histogram {
  /** `counts[i]` = values ≤ `BUCKETS[i]` (and above the previous edge); the last entry counts the rest. */
  readonly counts: ReadonlyArray<number>
  readonly count: number
  readonly sum: number
  /** The last {@link WINDOW} values, oldest first. */
  readonly recent: ReadonlyArray<number>
}

/** A histogram with no values. */
export const emptyHistogram: Histogram = { counts: BUCKETS.map(() => 0).concat(0), count: 0, sum: 0, recent: [] }

/** `h` with one more value. */
export const observe = (h: Histogram, value: number): Histogram => {
  let i = BUCKETS.findIndex((edge) => value <= edge)
  if (i === -1) i = BUCKETS.length
  const counts = h.counts.slice()
  counts[i] = (counts[i] ?? 0) + 1
  const recent = h.recent.length >= WINDOW ? h.recent.slice(h.recent.length - WINDOW + 1) : h.recent.slice()
  recent.push(value)
  return { counts, count: h.count + 1, sum: h.sum + value, recent }
}

/** The q-quantile (0..1, nearest rank) of `values`; NaN for none. */
export const quantile = (values: ReadonlyArray<number>, q: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
}

/** A summary of a drift distribution (quantiles over the recent window, of the absolute drift). */
export interface DriftSummary {
  readonly count: number
  /** Mean signed drift over all values: negative = under-count. */
  readonly mean: number
  readonly absP50: number
  readonly absP99: number
  readonly buckets: ReadonlyArray<{ readonly le: number | "+Inf"; readonly count: number }>
}

/** Count, mean, |drift| p50/p99 over the recent window, and the buckets. */
export const summarize = (h: Histogram): DriftSummary => {
  const abs = h.recent.map(Math.abs)
  return {
    count: h.count,
    mean: h.count === 0 ? 0 : h.sum / h.count,
    absP50: quantile(abs, 0.5),
    absP99: quantile(abs, 0.99),
    buckets: h.counts.map((count, i) => ({ le: BUCKETS[i] ?? "+Inf", count })),
  }
}

/** Whether a backend name is a local estimator whose error a factor corrects. */
export const isLocal = (backend: string): boolean => backend === "tiktoken" || backend === "heuristic"

/** One billed turn to fold in (see `CalibrationState.record`). */
export interface FactorObservation {
  readonly model: { readonly provider: string; readonly name: string }
  /** The estimate as reported for the turn (after the factor, if one was applied). */
  readonly estimate: number
  /** Billed prompt tokens (positive). */
  readonly billed: number
  /** Which backend made the estimate; only local ones (`tiktoken`, `heuristic`) teach a factor. */
  readonly backend: string
  /** The factor that was applied to the estimate (1 for none). */
  readonly calibration: number
  /** When false, drift is recorded but the factor is left alone. Default true. */
  readonly learn?: boolean
}
