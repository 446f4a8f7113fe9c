/**
 * Metrics of answered turns (Effect `Metric`s, read by the worker's
 * `<root>.v1.metrics` endpoint): turns by counter backend and exactness,
 * tokens sent and saved by mechanism, loop flags by pattern, virtual calls,
 * and the waste ratio of tool definitions.
 */
import type { Turn } from "@ctxd/contracts"
import { Effect, Metric, MetricBoundaries } from "effect"

const turns = Metric.counter("ctxd_turns_total", { description: "turns answered", incremental: true })
const tokensSent = Metric.counter("ctxd_tokens_sent_total", { description: "estimated prompt tokens sent", incremental: true })
const tokensSaved = Metric.counter("ctxd_tokens_saved_total", {
  description: "tokens not sent: window/budget cuts, masking, schema compression",
  incremental: true,
})
const loopFlags = Metric.counter("ctxd_loop_flags_total", { description: "turns flagged as looping, by pattern", incremental: true })
const virtualCalls = Metric.counter("ctxd_virtual_calls_total", { description: "load_toolset / load_knowledge / recall answered", incremental: true })
const wasteRatio = Metric.histogram(
  "ctxd_tool_waste_ratio",
  MetricBoundaries.linear({ start: 0, width: 0.1, count: 11 }),
  "share of tool-definition tokens sent for tools never called, per turn",
)
const utilization = Metric.histogram(
  "ctxd_window_utilization",
  MetricBoundaries.linear({ start: 0, width: 0.1, count: 11 }),
  "prompt tokens / effective window, per turn",
)

/** Records one answered turn's report. */
export const record = (report: Turn.Report): Effect.Effect<void> =>
  Effect.all(
    [
      Metric.increment(Metric.tagged(Metric.tagged(turns, "backend", report.counter.backend), "exact", String(report.counter.exact))),
      Metric.incrementBy(tokensSent, report.tokens.total),
      Metric.incrementBy(Metric.tagged(tokensSaved, "kind", "window"), Math.max(0, report.tokens.fullHistory - report.tokens.history)),
      Metric.incrementBy(Metric.tagged(tokensSaved, "kind", "masking"), report.masking?.tokensSaved ?? 0),
      Metric.incrementBy(Metric.tagged(tokensSaved, "kind", "compression"), report.tools?.saved ?? 0),
      Metric.incrementBy(virtualCalls, report.virtualCalls?.length ?? 0),
      Metric.update(utilization, report.utilization),
      ...(report.waste === undefined ? [] : [Metric.update(wasteRatio, report.waste.ratio)]),
      ...(report.loop?.verdict.findings ?? []).map((f) => Metric.increment(Metric.tagged(loopFlags, "pattern", f.pattern))),
    ],
    { discard: true },
  )
