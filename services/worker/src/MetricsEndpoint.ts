/**
 * `<root>.v1.metrics`: this worker's metrics as JSON — every Effect `Metric`
 * (turns, tokens sent and saved, loop flags, waste, utilization, compactions
 * ...; the same registry Prometheus scrapes on `/metrics`, runtime gauges
 * refreshed first) plus the token counter's own (calls, cache, breaker,
 * drift per model). Every worker answers (no queue group): gather replies to
 * see the fleet.
 *
 * The reply is bounded: labels chosen by callers (model names, tenants) are
 * normalized and capped in number (the token counter's `CTXD_TOKEN_MAX_MODELS`;
 * `MetricLabels` for the metrics' `tenant` and `model` labels, then `other`);
 * as a last line of defence, a reply over {@link MAX_REPLY} bytes drops its
 * per-model drift sections, then the metric series labelled by tenant or
 * model, and says `truncated: true`.
 */
import { Endpoint } from "@ctxd/nats"
import { TokenCounter } from "@ctxd/token-counter"
import { Effect, Metric, MetricState } from "effect"

const stateJson = (state: MetricState.MetricState.Untyped): unknown => {
  if (MetricState.isCounterState(state)) return { type: "counter", value: Number(state.count) }
  if (MetricState.isGaugeState(state)) return { type: "gauge", value: Number(state.value) }
  if (MetricState.isHistogramState(state)) {
    return { type: "histogram", count: state.count, sum: state.sum, min: state.min, max: state.max, buckets: state.buckets }
  }
  if (MetricState.isFrequencyState(state)) return { type: "frequency", occurrences: Object.fromEntries(state.occurrences) }
  if (MetricState.isSummaryState(state)) return { type: "summary", count: state.count, sum: state.sum, quantiles: state.quantiles }
  return { type: "unknown" }
}

/** Largest metrics reply, in bytes of JSON (256 KB). */
export const MAX_REPLY = 256 * 1024

const fits = (reply: unknown): boolean => Buffer.byteLength(JSON.stringify(reply)) <= MAX_REPLY

/**
 * `reply` as it goes out: whole if it fits {@link MAX_REPLY}; else without
 * the per-model drift sections; if still too large, also without the metric
 * series labelled `tenant` or `model` (Prometheus `/metrics` has them all).
 */
export const bound = <
  T extends { readonly tokens: object; readonly metrics?: ReadonlyArray<{ readonly tags: Readonly<Record<string, string>> }> },
>(
  reply: T,
): T | (T & { truncated: true }) => {
  if (fits(reply)) return reply
  const { drift: _drift, rawDrift: _rawDrift, factors: _factors, ...tokens } = reply.tokens as Record<string, unknown>
  const smaller = { ...reply, tokens, truncated: true as const }
  if (fits(smaller) || reply.metrics === undefined) return smaller
  return { ...smaller, metrics: reply.metrics.filter((m) => m.tags.tenant === undefined && m.tags.model === undefined) }
}

export const serve = (options: {
  readonly subject: string
  readonly workerId: string
  /** Runs before each snapshot (sets the runtime gauges). */
  readonly refresh?: Effect.Effect<void> | undefined
}) =>
  Effect.gen(function* () {
    const tokens = yield* TokenCounter.TokenCounter
    return yield* Endpoint.serve({
      subject: options.subject,
      maxConcurrent: 2,
      handler: () =>
        Effect.gen(function* () {
          if (options.refresh !== undefined) yield* options.refresh
          const snapshot = yield* Metric.snapshot
          return bound({
            ok: true,
            worker: options.workerId,
            metrics: snapshot.map((pair) => ({
              name: pair.metricKey.name,
              tags: Object.fromEntries(pair.metricKey.tags.map((t) => [t.key, t.value])),
              ...(stateJson(pair.metricState) as object),
            })),
            tokens: yield* tokens.metrics,
          })
        }),
    })
  })
