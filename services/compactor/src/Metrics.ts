/**
 * Compaction metrics (Effect `Metric`, exported by whatever metrics layer
 * the process installs): `ctxd_compactions_total{outcome}` counts attempts
 * per outcome, `ctxd_compaction_duration_ms{outcome}` is a histogram of
 * their durations (exponential buckets from 50 ms to ~200 s), and
 * `ctxd_compaction_summarizer_tokens_total{direction}` counts the tokens
 * the summarizer was billed (`in`, `out`). The same attempts in the
 * platform's names: `llm_compaction_triggered_total{outcome}` and
 * `llm_compaction_duration_seconds{outcome}` (seconds, same buckets).
 */
import { Compact } from "@ctxd/contracts"
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

/** Attempts, tagged `outcome` (the platform name of {@link compactions}). */
export const triggered = Metric.counter("llm_compaction_triggered_total", {
  description: "compactions triggered (background, blocking or manual), by the outcome of the attempt",
  incremental: true,
})

/** Durations in seconds, tagged `outcome`. */
export const durationSeconds = Metric.histogram(
  "llm_compaction_duration_seconds",
  MetricBoundaries.exponential({ start: 0.05, factor: 2, count: 13 }),
  "duration of compaction attempts in seconds, by outcome",
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
      Metric.increment(Metric.tagged(triggered, "outcome", outcome)),
      Metric.update(Metric.tagged(durationSeconds, "outcome", outcome), durationMs / 1000),
      tokensIn > 0 ? Metric.incrementBy(Metric.tagged(summarizerTokens, "direction", "in"), tokensIn) : Effect.void,
      tokensOut > 0 ? Metric.incrementBy(Metric.tagged(summarizerTokens, "direction", "out"), tokensOut) : Effect.void,
    ],
    { discard: true },
  )

/**
 * Exports every outcome at zero, so alerts on a rare outcome see the series
 * from the first scrape (the worker runs it at start).
 */
export const initialize: Effect.Effect<void> = Effect.forEach(
  Compact.Outcome.literals,
  (outcome) =>
    Effect.all([
      Metric.incrementBy(Metric.tagged(compactions, "outcome", outcome), 0),
      Metric.incrementBy(Metric.tagged(triggered, "outcome", outcome), 0),
    ]),
  { discard: true },
)

/** The current count of one outcome (for health reports and tests). */
export const count = (outcome: Compact.Outcome): Effect.Effect<number> =>
  Effect.map(Metric.value(Metric.tagged(compactions, "outcome", outcome)), (state) => state.count)
