/**
 * Metrics of the usage providers billed (Effect `Metric`s; the worker
 * exports them on `<root>.v1.metrics` and Prometheus `/metrics`). All come
 * from usage reports (`<root>.v1.usage.<tenant>.<session>`), counted once
 * per turn (the first report, see `UsageEndpoint`), never from ctxd's own
 * expectations (those are in the turn report's `cache` section):
 *
 * - `llm_cache_read_tokens_total{tenant}`: prompt tokens read from the
 *   provider's cache (Anthropic `cache_read_input_tokens`, OpenAI
 *   `prompt_tokens_details.cached_tokens`);
 * - `llm_cache_creation_tokens_total{tenant}`: prompt tokens written to it
 *   (Anthropic `cache_creation_input_tokens`; OpenAI bills no writes: 0);
 * - `llm_prompt_tokens_billed_total{tenant}`: every billed prompt token
 *   (uncached input + cache reads + cache writes);
 * - `llm_cache_hit_ratio{tenant}`: cache reads / billed prompt tokens over
 *   the tenant's reports in this process (0..1);
 * - `llm_prompt_tokens_drift{model}`: (estimate − billed) / billed in
 *   percent per report (negative: ctxd under-counted).
 *
 * Tenant and model labels are bounded (`MetricLabels`: the first 100, then
 * `other`), and so is the state behind the ratio (one entry per label).
 */
import { MetricLabels } from "@ctxd/observe"
import { Effect, Metric, MetricBoundaries } from "effect"
import type * as Calibration from "./Calibration.ts"

const cacheRead = Metric.counter("llm_cache_read_tokens_total", {
  description: "prompt tokens read from the provider's prompt cache, from usage reports (billed), by tenant",
  incremental: true,
})
const cacheCreation = Metric.counter("llm_cache_creation_tokens_total", {
  description: "prompt tokens written to the provider's prompt cache, from usage reports (billed; OpenAI bills none), by tenant",
  incremental: true,
})
const billed = Metric.counter("llm_prompt_tokens_billed_total", {
  description: "prompt tokens billed (uncached input + cache reads + cache writes), from usage reports, by tenant",
  incremental: true,
})
const hitRatio = Metric.gauge("llm_cache_hit_ratio", {
  description: "cache-read / billed prompt tokens over this process's usage reports of the tenant (0..1)",
})
const drift = Metric.histogram(
  "llm_prompt_tokens_drift",
  MetricBoundaries.fromIterable([-50, -25, -10, -5, -2, -1, 0, 1, 2, 5, 10, 25, 50]),
  "prompt estimate drift per usage report in percent: (estimate - billed) / billed * 100, by model",
)

// per tenant label: the sums behind the ratio (bounded by the label cap)
const totals = new Map<string, { read: number; billed: number }>()

/** Records one turn's first usage report: `usage` as parsed, `drift` as a fraction (`Calibration.drift`). */
export const record = (input: {
  readonly tenant: string
  readonly model: { readonly provider: string; readonly name: string }
  readonly usage: Calibration.Usage
  readonly drift: number
}): Effect.Effect<void> =>
  Effect.suspend(() => {
    const tenant = MetricLabels.tenant(input.tenant)
    const sums = totals.get(tenant) ?? { read: 0, billed: 0 }
    sums.read += input.usage.cacheRead
    sums.billed += input.usage.billedPrompt
    totals.set(tenant, sums)
    return Effect.all(
      [
        Metric.incrementBy(Metric.tagged(cacheRead, "tenant", tenant), input.usage.cacheRead),
        Metric.incrementBy(Metric.tagged(cacheCreation, "tenant", tenant), input.usage.cacheWrite),
        Metric.incrementBy(Metric.tagged(billed, "tenant", tenant), input.usage.billedPrompt),
        Metric.set(Metric.tagged(hitRatio, "tenant", tenant), sums.billed > 0 ? sums.read / sums.billed : 0),
        Number.isFinite(input.drift)
          ? Metric.update(Metric.tagged(drift, "model", MetricLabels.model(input.model)), input.drift * 100)
          : Effect.void,
      ],
      { discard: true },
    )
  })
