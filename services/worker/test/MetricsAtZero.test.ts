// Metrics that alert on rare events are exported at zero from the first
// scrape (Prometheus: a series that appears only with its first event makes
// rate() and absent() alerts miss it), before any turn or compaction.
import { TurnMetrics } from "@ctxd/assembler"
import { Metrics as CompactorMetrics } from "@ctxd/compactor"
import { Compact, Errors } from "@ctxd/contracts"
import { Effect, Metric } from "effect"
import { describe, expect, it } from "vitest"

const series = () =>
  Effect.runSync(Metric.snapshot).map((pair) => ({
    name: pair.metricKey.name,
    tags: Object.fromEntries(pair.metricKey.tags.map((t) => [t.key, t.value])),
    value: (pair.metricState as { count?: number }).count,
  }))

describe("known label sets at zero", () => {
  it("llm_compaction_triggered_total{outcome} and the error outcomes of ctxd_turns_total exist before any event", () => {
    Effect.runSync(CompactorMetrics.initialize)
    TurnMetrics.initialize()
    const all = series()
    for (const outcome of Compact.Outcome.literals) {
      expect(all).toContainEqual({ name: "llm_compaction_triggered_total", tags: { outcome }, value: 0 })
    }
    for (const code of Errors.ErrorCode.literals) {
      const outcome = TurnMetrics.outcomeOf(code)
      expect(all).toContainEqual({ name: "ctxd_turns_total", tags: { outcome, backend: "none", exact: "none" }, value: 0 })
    }
  })
})
