/**
 * Billed cache reads against what ctxd expected, per turn: did the prompt
 * cache break where ctxd did not break it?
 *
 * A turn's report says how many prompt tokens the provider should read from
 * its cache given ctxd's own edits (`report.cache.expectedReadTokens`, in
 * ctxd's estimate of the prompt) and why the prefix changed where it did
 * (`report.cache.reason`; `append` = ctxd changed nothing before the new
 * messages). The usage the provider billed says what it did read:
 * `cache_read_input_tokens` (Anthropic) or `prompt_tokens_details.cached_tokens`
 * (OpenAI).
 *
 * The rule ({@link compare}): the expectation is first put in the provider's
 * tokens with the turn's own ratio billed prompt / estimated prompt (clamped
 * to [0.5, 2]), so a tokenizer mismatch is not taken for a break; the break
 * is `unexpected` when the billed read is below
 * `ratio × expected − slackTokens` (default 0.9 × expected − 64, see
 * {@link defaultTolerance}), else `none`. The slack absorbs the provider's
 * rounding (OpenAI caches in steps of 128 tokens) and per-request framing;
 * the ratio absorbs the estimate's remaining error. An unexpected break is
 * one ctxd did not cause: the runtime changed something ctxd does not see
 * (system prompt, tools, a field outside the body ctxd rendered), the cache
 * expired between ctxd's reply and the provider call, or the provider
 * evicted early. A billed read above the expectation is never a break.
 *
 * Metric ({@link record}): `ctxd_cache_break_total{reason}` counts, once per
 * turn (the first usage report of the turn), ctxd's own prefix changes under
 * the turn's `report.cache.reason` (any reason but `append`) and the
 * unexpected breaks under `unexpected`. A turn can count under both: ctxd
 * cut the window there and the provider read even less than the cut left.
 *
 * Misses ({@link recordMisses}): the verdict's `misses` (`CacheMiss.billed`:
 * the turn's own `report.cache.miss` in the provider's tokens, then the
 * unexpected shortfall, explained by the provider's diagnostics when the
 * usage report carries them) count in `ctxd_cache_miss_tokens_total{tenant, cause}`.
 */
import { CacheMiss, type CacheDiagnostics, ProviderUsage } from "@ctxd/context"
import { MetricLabels } from "@ctxd/observe"
import { Effect, Metric } from "effect"
import type * as Calibration from "./Calibration.ts"

/** What a turn's report expected of the prompt cache (`report.cache`). */
export interface Expectation {
  /** Tokens the provider should read from its cache (ctxd's estimate). */
  readonly expectedReadTokens: number
  /** Tokens it should write (Anthropic) or bill uncached (OpenAI), when the report gives it. */
  readonly expectedWriteTokens?: number | undefined
  /** Why the prefix changed where it did (`report.cache.reason`), when the report gives it. */
  readonly reason?: string | undefined
  /** The previous prompt's tokens the turn did not expect to read, and why (`report.cache.miss`). */
  readonly miss?: CacheMiss.Miss | undefined
}

/** How far below the expectation a billed read may fall before it is a break. */
export interface Tolerance {
  /** Share of the expected read that must be billed; default 0.9. */
  readonly ratio: number
  /** Tokens more that may be missing; default 64. */
  readonly slackTokens: number
}

/** Billed read ≥ 0.9 × expected − 64 tokens is no break. */
export const defaultTolerance: Tolerance = { ratio: 0.9, slackTokens: 64 }

/** The bounds of the estimate → billed scale applied to the expectation (as the calibration factor's). */
export const SCALE_BOUNDS = { min: 0.5, max: 2 } as const

/** The comparison of one turn, as the usage reply's `cache` field carries it. */
export interface Verdict {
  /** As the turn's report said (ctxd's estimate). */
  readonly expectedReadTokens: number
  readonly expectedWriteTokens?: number | undefined
  /** `cache_read_input_tokens` (Anthropic) or `prompt_tokens_details.cached_tokens` (OpenAI). */
  readonly billedReadTokens: number
  /** `cache_creation_input_tokens` (Anthropic) or the uncached prompt tokens, `prompt_tokens − cached_tokens` (OpenAI). */
  readonly billedWriteTokens: number
  /** The billed read below which the break is `unexpected` (0: none can be). */
  readonly minReadTokens: number
  readonly break: "unexpected" | "none"
  /** ctxd's own reason for the prefix change (the turn's `report.cache.reason`), when the report gives it. */
  readonly reason?: string | undefined
  /** The tokens not read, by cause (`CacheMiss.billed`); absent when none were missed. */
  readonly misses?: ReadonlyArray<CacheMiss.Miss> | undefined
}

/** The estimate → billed scale of a turn: billed / estimate within {@link SCALE_BOUNDS}, 1 when unknown. */
export const scaleOf = (estimate: number, billed: number): number =>
  estimate > 0 && billed > 0 && Number.isFinite(estimate) && Number.isFinite(billed)
    ? Math.min(SCALE_BOUNDS.max, Math.max(SCALE_BOUNDS.min, billed / estimate))
    : 1

/**
 * Compares what the provider billed (`usage`, parsed) with what the turn
 * expected; `estimate` is the turn's prompt estimate (`report.tokens.total`),
 * used to put the expectation in the provider's tokens.
 */
export const compare = (
  expectation: Expectation,
  usage: Calibration.Usage,
  estimate: number,
  tolerance: Tolerance = defaultTolerance,
  diagnosis?: CacheDiagnostics.Diagnosis,
): Verdict => {
  const expected = Math.max(0, expectation.expectedReadTokens)
  const scale = scaleOf(estimate, usage.billedPrompt)
  const scaled = expected * scale
  const minReadTokens = Math.max(0, Math.ceil(tolerance.ratio * scaled - tolerance.slackTokens))
  const billedWriteTokens = ProviderUsage.billedWrites(usage)
  const misses = CacheMiss.billed({
    expected: expectation.miss,
    scale,
    expectedReadTokens: scaled,
    billedReadTokens: usage.cacheRead,
    unexpected: usage.cacheRead < minReadTokens,
    diagnosis,
  })
  return {
    ...(misses.length === 0 ? {} : { misses }),
    expectedReadTokens: expectation.expectedReadTokens,
    ...(expectation.expectedWriteTokens === undefined ? {} : { expectedWriteTokens: expectation.expectedWriteTokens }),
    billedReadTokens: usage.cacheRead,
    billedWriteTokens,
    minReadTokens,
    break: usage.cacheRead < minReadTokens ? "unexpected" : "none",
    ...(expectation.reason === undefined ? {} : { reason: expectation.reason }),
  }
}

/** `ctxd_cache_break_total{reason}`. */
export const breaks = Metric.counter("ctxd_cache_break_total", {
  description: "prompt-cache breaks per turn with a usage report: ctxd's own by report.cache.reason, and unexpected ones",
  incremental: true,
})

/** The `reason` labels one turn's verdict counts under (none for an append with the cache read as expected). */
export const labelsOf = (verdict: Verdict): ReadonlyArray<string> => [
  ...(verdict.reason !== undefined && verdict.reason !== "append" ? [verdict.reason] : []),
  ...(verdict.break === "unexpected" ? ["unexpected"] : []),
]

/** Counts one turn's verdict in {@link breaks}; call once per turn. */
export const record = (verdict: Verdict): Effect.Effect<void> =>
  Effect.forEach(labelsOf(verdict), (reason) => Metric.increment(Metric.tagged(breaks, "reason", reason)), { discard: true })

/** `ctxd_cache_miss_tokens_total{tenant, cause}`. */
export const missTokens = Metric.counter("ctxd_cache_miss_tokens_total", {
  description:
    "prompt tokens not read from the provider's cache, from usage reports, by tenant and cause (ctxd_edit, ttl_expiry, client_change, unknown)",
  incremental: true,
})

/** Counts one turn's missed tokens in {@link missTokens} by cause; call once per turn. */
export const recordMisses = (tenant: string, verdict: Verdict): Effect.Effect<void> =>
  Effect.forEach(
    verdict.misses ?? [],
    (miss) =>
      Metric.incrementBy(Metric.tagged(Metric.tagged(missTokens, "tenant", MetricLabels.tenant(tenant)), "cause", miss.cause), miss.tokens),
    { discard: true },
  )

/** The current count of `reason` (tests, benches). */
export const count = (reason: string): Effect.Effect<number> =>
  Effect.map(Metric.value(Metric.tagged(breaks, "reason", reason)), (state) => state.count)
