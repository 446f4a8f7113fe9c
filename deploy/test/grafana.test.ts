// deploy/grafana/ctxd.json: a well-formed dashboard whose queries use the
// worker's metric families (and only those), each of the ones it is built
// on at least once.
import { readFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { describe, expect, it } from "vitest"

const ROOT = resolve(import.meta.dirname, "..", "..")

interface Panel {
  readonly id: number
  readonly type: string
  readonly title: string
  readonly gridPos: { readonly x: number; readonly y: number; readonly w: number; readonly h: number }
  readonly targets?: ReadonlyArray<{ readonly refId: string; readonly expr: string }>
}
interface Dashboard {
  readonly uid: string
  readonly title: string
  readonly schemaVersion: number
  readonly panels: ReadonlyArray<Panel>
  readonly templating: { readonly list: ReadonlyArray<{ readonly name: string; readonly type: string }> }
}

const dashboard = JSON.parse(readFileSync(join(ROOT, "deploy", "grafana", "ctxd.json"), "utf8")) as Dashboard

/** The families the dashboard is built on (histograms by their base name). */
const FAMILIES = {
  llm_cache_read_tokens_total: "counter",
  llm_cache_creation_tokens_total: "counter",
  llm_cache_hit_ratio: "gauge",
  llm_compaction_triggered_total: "counter",
  llm_compaction_duration_seconds: "histogram",
  llm_prompt_tokens_drift: "histogram",
  ctxd_turn_duration_seconds: "histogram",
  ctxd_turns_total: "counter",
  ctxd_tokens_saved_total: "counter",
  ctxd_shards_owned: "gauge",
} as const

const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })))
/** Metric names in a PromQL expression: identifiers followed by a selector or range. */
const metricsIn = (expr: string): Array<string> => [...expr.matchAll(/\b((?:llm|ctxd)_[a-z_]+)\b/g)].map((m) => m[1]!)
const familyOf = (metric: string): string => metric.replace(/_(bucket|sum|count)$/, "")

describe("Grafana dashboard (deploy/grafana/ctxd.json)", () => {
  it("is a dashboard with a Prometheus data source variable and unique panel ids", () => {
    expect(dashboard.uid).toMatch(/^[a-z0-9-]{1,40}$/)
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36)
    expect(dashboard.templating.list.find((v) => v.type === "datasource")).toBeDefined()
    const ids = dashboard.panels.map((p) => p.id)
    expect(new Set(ids).size).toBe(ids.length)
    for (const p of dashboard.panels) {
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24)
      if (p.type !== "row") expect(p.targets?.length ?? 0, p.title).toBeGreaterThan(0)
    }
  })

  it("queries only the worker's metric families, the right way for their type", () => {
    for (const { panel, expr } of exprs) {
      const metrics = metricsIn(expr)
      expect(metrics.length, `${panel}: ${expr}`).toBeGreaterThan(0)
      for (const metric of metrics) {
        const family = familyOf(metric) as keyof typeof FAMILIES
        expect(FAMILIES[family], `${panel}: ${metric}`).toBeDefined()
        // histograms by their buckets (or sum / count), counters through rate() or increase()
        if (FAMILIES[family] === "histogram") expect(metric, `${panel}: ${metric}`).toMatch(/_(bucket|sum|count)$/)
        if (FAMILIES[family] === "counter") expect(expr, `${panel}: ${metric}`).toMatch(new RegExp(`(rate|increase)\\(${metric}\\b`))
      }
      // balanced parentheses and braces
      for (const [open, close] of [
        ["(", ")"],
        ["{", "}"],
        ["[", "]"],
      ] as const) {
        expect(expr.split(open).length, `${panel}: ${expr}`).toBe(expr.split(close).length)
      }
    }
  })

  it("uses every metric it is built on", () => {
    const used = new Set(exprs.flatMap(({ expr }) => metricsIn(expr).map(familyOf)))
    expect([...used].sort()).toEqual(Object.keys(FAMILIES).sort())
  })

  it("breaks down by the labels the metrics carry", () => {
    const all = exprs.map((e) => e.expr).join("\n")
    expect(all).toMatch(/by \(outcome\) \(rate\(ctxd_turns_total/)
    expect(all).toMatch(/by \(outcome\) \(increase\(llm_compaction_triggered_total/)
    expect(all).toMatch(/by \(mechanism\) \(rate\(ctxd_tokens_saved_total/)
    expect(all).toMatch(/by \(instance\) \(ctxd_shards_owned/)
  })
})
