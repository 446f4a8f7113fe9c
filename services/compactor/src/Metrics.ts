/**
 * Compaction metrics (Effect `Metric`, exported by whatever metrics layer
 * the process installs): `ctxd_compactions_total{outcome}` counts attempts
 * per outcome, `ctxd_compaction_duration_ms{outcome}` is a histogram of
 * their durations (exponential buckets from 50 ms to ~200 s), and
 * `ctxd_compaction_summarizer_tokens_total{direction}` counts the tokens
 * the summarizer was billed (`in`, `out`).
 */
import type { Compact } from "@ctxd/contracts"
import { Effect, Metric, MetricBoundaries } from "effect"

/** Attempts, tagged `outcome`. */
export const compactions = Metric.counter("ctxd_compactions_total", {
  description: "Compaction attempts by outcome",
  incremental: true,
})

/** Durations in milliseconds, tagged `outcome`. */
export const duration = Metric.histogram(
  "ctxd_compaction_duration_ms",
  MetricBoundaries.exponential({ start: 50, factor: 2, count: 13 }),
  "Duration of compaction attempts (ms)",
)

/** Summarizer tokens, tagged `direction` (`in`, `out`). */
export const summarizerTokens = Metric.counter("ctxd_compaction_summarizer_tokens_total", {
  description: "Tokens billed to the summarizer by compactions",
  incremental: true,
})

/** Records one attempt. */
export const record = (outcome: Compact.Outcome, durationMs: number, tokensIn = 0, tokensOut = 0): Effect.Effect<void> =>
  Effect.all(
    [
      Metric.increment(Metric.tagged(compactions, "outcome", outcome)),
      Metric.update(Metric.tagged(duration, "outcome", outcome), durationMs),
      tokensIn > 0 ? Metric.incrementBy(Metric.tagged(summarizerTokens, "direction", "in"), tokensIn) : Effect.void,
      tokensOut > 0 ? Metric.incrementBy(Metric.tagged(summarizerTokens, "direction", "out"), tokensOut) : Effect.void,
    ],
    { discard: true },
  )

/** The current count of one outcome (for health reports and tests). */
export const count = (outcome: Compact.Outcome): Effect.Effect<number> =>
  Effect.map(Metric.value(Metric.tagged(compactions, "outcome", outcome)), (state) => state.count)
