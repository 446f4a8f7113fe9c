/**
 * The gateway's metrics, in Effect's metric registry (the one the worker's
 * Prometheus exporter reads, so a process that runs both shows them on one
 * `/metrics`), and a Prometheus text exposition of that registry for a
 * gateway that runs alone.
 *
 * - `ctxd_gateway_requests_total{api, mode, outcome}`: every request, once,
 *   when it is answered. `api`: the route's label (`Routes.Label`);
 *   `mode`: `active`, `shadow`, `off`; `outcome`: see {@link Outcome}.
 * - `ctxd_gateway_added_latency_seconds{api, mode}`: from the client's body
 *   read to the upstream request sent (the port's prompt included).
 * - `ctxd_gateway_upstream_latency_seconds{api}`: from the upstream request
 *   sent to its response headers.
 * - `ctxd_gateway_first_byte_seconds{api}`: from the request's arrival to
 *   the first response byte relayed to the client.
 * - `ctxd_gateway_stream_bytes_total{api}`: response bytes relayed (as sent, encoded).
 * - `ctxd_gateway_fail_open_total{api, reason}`: requests forwarded
 *   untouched because the port failed (`reason`: `timeout`, `error`).
 * - `ctxd_gateway_usage_reports_total{api, read}`: turn responses whose
 *   usage was (`read="yes"`) or could not be (`"no"`) read.
 */
import { Effect, Metric, MetricBoundaries, MetricLabel, MetricState } from "effect"

/**
 * How a request ended: `ok` (the provider's 2xx/3xx relayed), `upstream_4xx`,
 * `upstream_5xx` (relayed as sent), `upstream_unreachable` (502),
 * `upstream_cut` (the provider broke off a response already begun: the client's is cut too),
 * `fail_open`, `fail_closed` (503), `bad_request` (400), `too_large` (413),
 * `unauthorized` (401/403 by `authenticate`), `client_gone` (the client left first).
 */
export type Outcome =
  | "ok"
  | "upstream_4xx"
  | "upstream_5xx"
  | "upstream_unreachable"
  | "upstream_cut"
  | "fail_open"
  | "fail_closed"
  | "bad_request"
  | "too_large"
  | "unauthorized"
  | "client_gone"

const SECONDS = MetricBoundaries.fromIterable([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120])

const requests = Metric.counter("ctxd_gateway_requests_total", {
  description: "gateway requests answered, by route label (api), mode and outcome",
  incremental: true,
})
const added = Metric.histogram(
  "ctxd_gateway_added_latency_seconds",
  SECONDS,
  "time the gateway adds before the upstream request is sent (body read to request sent, the port's prompt included)",
)
const upstream = Metric.histogram("ctxd_gateway_upstream_latency_seconds", SECONDS, "upstream request sent to its response headers")
const firstByte = Metric.histogram("ctxd_gateway_first_byte_seconds", SECONDS, "request arrival to the first response byte relayed")
const bytes = Metric.counter("ctxd_gateway_stream_bytes_total", { description: "response bytes relayed to clients", incremental: true })
const failOpen = Metric.counter("ctxd_gateway_fail_open_total", {
  description: "requests forwarded untouched because the port failed or timed out",
  incremental: true,
})
const usageReports = Metric.counter("ctxd_gateway_usage_reports_total", {
  description: "turn responses whose usage was read (read=yes) or not (read=no)",
  incremental: true,
})

// one label array per label set: Effect keys a metric's state by the array's identity (see assembler TurnMetrics)
const labelSets = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()
const labels = (...pairs: ReadonlyArray<string>): ReadonlyArray<MetricLabel.MetricLabel> => {
  const key = pairs.join("\u0000")
  let set = labelSets.get(key)
  if (set === undefined) {
    if (labelSets.size >= 1_024) labelSets.clear()
    const made: Array<MetricLabel.MetricLabel> = []
    for (let i = 0; i + 1 < pairs.length; i += 2) made.push(MetricLabel.make(pairs[i]!, pairs[i + 1]!))
    labelSets.set(key, (set = made))
  }
  return set
}

export const request = (api: string, mode: string, outcome: Outcome): void =>
  requests.unsafeUpdate(1, labels("api", api, "mode", mode, "outcome", outcome))
export const addedLatency = (api: string, mode: string, ms: number): void => added.unsafeUpdate(ms / 1000, labels("api", api, "mode", mode))
export const upstreamLatency = (api: string, ms: number): void => upstream.unsafeUpdate(ms / 1000, labels("api", api))
export const timeToFirstByte = (api: string, ms: number): void => firstByte.unsafeUpdate(ms / 1000, labels("api", api))
export const relayed = (api: string, n: number): void => bytes.unsafeUpdate(n, labels("api", api))
export const failedOpen = (api: string, reason: "timeout" | "error"): void => failOpen.unsafeUpdate(1, labels("api", api, "reason", reason))
export const usageRead = (api: string, read: boolean): void => usageReports.unsafeUpdate(1, labels("api", api, "read", read ? "yes" : "no"))

const escape = (value: string): string => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')

const tagText = (tags: ReadonlyArray<readonly [string, string]>): string =>
  tags.length === 0 ? "" : `{${tags.map(([k, v]) => `${k}="${escape(v)}"`).join(",")}}`

const number = (n: number): string => (Number.isFinite(n) ? String(n) : n > 0 ? "+Inf" : n < 0 ? "-Inf" : "NaN")

/**
 * Every metric of Effect's registry in the Prometheus text format 0.0.4
 * (counters, gauges, histograms; the gateway records no other kind).
 */
export const exposition = (): string => {
  const snapshot = Effect.runSync(Metric.snapshot)
  const byName = new Map<string, { type: string; help: string; lines: Array<string> }>()
  for (const pair of snapshot) {
    const name = pair.metricKey.name.replace(/[^a-zA-Z0-9_:]/g, "_")
    const tags = pair.metricKey.tags.map((t) => [t.key, t.value] as const)
    const state = pair.metricState
    const type = MetricState.isCounterState(state)
      ? "counter"
      : MetricState.isGaugeState(state)
        ? "gauge"
        : MetricState.isHistogramState(state)
          ? "histogram"
          : undefined
    if (type === undefined) continue
    const entry = byName.get(name) ?? {
      type,
      help: pair.metricKey.description._tag === "Some" ? pair.metricKey.description.value : "",
      lines: [],
    }
    byName.set(name, entry)
    if (MetricState.isCounterState(state)) {
      entry.lines.push(`${name}${tagText(tags)} ${number(Number(state.count))}`)
    } else if (MetricState.isGaugeState(state)) {
      entry.lines.push(`${name}${tagText(tags)} ${number(Number(state.value))}`)
    } else if (MetricState.isHistogramState(state)) {
      for (const [boundary, count] of state.buckets) {
        entry.lines.push(`${name}_bucket${tagText([...tags, ["le", number(boundary)]])} ${count}`)
      }
      if (!state.buckets.some(([b]) => b === Number.POSITIVE_INFINITY)) {
        entry.lines.push(`${name}_bucket${tagText([...tags, ["le", "+Inf"]])} ${state.count}`)
      }
      entry.lines.push(`${name}_sum${tagText(tags)} ${number(state.sum)}`, `${name}_count${tagText(tags)} ${state.count}`)
    }
  }
  const out: Array<string> = []
  for (const [name, entry] of byName) {
    out.push(`# HELP ${name} ${entry.help.replace(/\n/g, " ")}`, `# TYPE ${name} ${entry.type}`, ...entry.lines)
  }
  return out.join("\n") + "\n"
}
