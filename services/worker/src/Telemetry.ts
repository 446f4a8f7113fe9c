/**
 * OpenTelemetry for the worker process, through `@effect/opentelemetry`:
 *
 * - **Traces** ({@link tracing}): Effect's spans (`ctxd.turn` and its
 *   children, see the assembler) exported over OTLP/HTTP (JSON) to
 *   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT`
 *   + `/v1/traces`, in batches (the SDK's `BatchSpanProcessor`: a bounded
 *   queue, `OTEL_BSP_*`), flushed at shutdown. The standard variables apply
 *   (`OTEL_SERVICE_NAME`, default `ctxd`; `OTEL_RESOURCE_ATTRIBUTES`;
 *   `OTEL_EXPORTER_OTLP_HEADERS`; `OTEL_TRACES_SAMPLER`, default parent-based
 *   always-on; `OTEL_SDK_DISABLED`). With no endpoint nothing of the SDK is
 *   loaded: Effect's own tracer runs as before (no export).
 * - **Metrics** ({@link prometheus}): the one registry is Effect's; the
 *   bridge's `MetricProducer` feeds an OpenTelemetry `PrometheusExporter`
 *   that runs no server of its own (`preventServerStart`): the worker's HTTP
 *   server renders {@link Scrape.text} on `/metrics`.
 */
import * as Metrics from "@effect/opentelemetry/Metrics"
import * as Resource from "@effect/opentelemetry/Resource"
import { PrometheusExporter, PrometheusSerializer } from "@opentelemetry/exporter-prometheus"
import type { ResourceMetrics } from "@opentelemetry/sdk-metrics"
import { ConfigReference } from "@ctxd/config"
import { Config, Context, Effect, Layer, Option } from "effect"

/** Telemetry defaults. */
export const defaults = {
  /** `service.name` when `OTEL_SERVICE_NAME` is unset. */
  serviceName: "ctxd",
  serviceVersion: "0.1.0",
  /** How long flushing spans may hold the shutdown up. Default 5,000 ms. */
  shutdownTimeoutMs: 5_000,
} as const

/** An optional URL (the page shows it as one). */
const optional = (name: string) =>
  Config.option(Config.string(name)).pipe(Config.map(Option.filter((value) => value.trim() !== "")), ConfigReference.shownAs("URL"))

/** The standard OpenTelemetry variables ctxd reads itself (the SDK reads the rest). */
export const config = Config.all({
  serviceName: Config.string("OTEL_SERVICE_NAME").pipe(
    Config.withDefault(defaults.serviceName),
    Config.withDescription("service.name of the spans and of /metrics' target_info (service.instance.id is the worker id)"),
  ),
  endpoint: optional("OTEL_EXPORTER_OTLP_ENDPOINT").pipe(
    Config.withDescription(
      "OTLP/HTTP base URL: when set (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), spans are exported to <url>/v1/traces as OTLP JSON. Unset: no export, no OpenTelemetry SDK loaded",
    ),
  ),
  tracesEndpoint: optional("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").pipe(
    Config.withDescription("The full OTLP/HTTP traces URL; wins over OTEL_EXPORTER_OTLP_ENDPOINT"),
  ),
  disabled: Config.boolean("OTEL_SDK_DISABLED").pipe(
    Config.withDefault(false),
    Config.withDescription("true: no span export even with an endpoint"),
  ),
})
export type Config = Config.Config.Success<typeof config>

/** Where spans go: the traces URL, else the base URL + `/v1/traces`; none when unset or disabled. */
export const tracesUrl = (c: Config): string | undefined => {
  if (c.disabled) return undefined
  if (Option.isSome(c.tracesEndpoint)) return c.tracesEndpoint.value.trim()
  if (Option.isNone(c.endpoint)) return undefined
  const base = c.endpoint.value.trim()
  return `${base}${base.endsWith("/") ? "" : "/"}v1/traces`
}

const resource = (c: Config, workerId: string) => ({
  serviceName: c.serviceName,
  serviceVersion: defaults.serviceVersion,
  attributes: { "service.instance.id": workerId },
})

/**
 * The OTLP trace exporter when {@link tracesUrl} names one, else nothing
 * (Effect's default tracer). The SDK is loaded only then.
 */
export const tracing = (c: Config, workerId: string): Layer.Layer<never> => {
  const url = tracesUrl(c)
  if (url === undefined) return Layer.empty
  return Layer.unwrapEffect(
    Effect.promise(async () => {
      const [NodeSdk, { OTLPTraceExporter }, { BatchSpanProcessor }] = await Promise.all([
        import("@effect/opentelemetry/NodeSdk"),
        import("@opentelemetry/exporter-trace-otlp-http"),
        import("@opentelemetry/sdk-trace-base"),
      ])
      return NodeSdk.layer(() => ({
        resource: resource(c, workerId),
        spanProcessor: new BatchSpanProcessor(new OTLPTraceExporter({ url })),
        shutdownTimeout: defaults.shutdownTimeoutMs,
      })).pipe(Layer.tap(() => Effect.logInfo(`traces exported to ${new URL(url).origin} (OTLP/HTTP)`)))
    }),
  ).pipe(Layer.catchAllCause((cause) => Layer.effectDiscard(Effect.logWarning("traces: OpenTelemetry export not started", cause))))
}

/** The Prometheus exposition of the process's metrics. */
export interface ScrapeService {
  /** Every Effect metric in the Prometheus text format (0.0.4). */
  readonly text: Effect.Effect<string, Error>
}

export class Scrape extends Context.Tag("@ctxd/worker/Telemetry/Scrape")<Scrape, ScrapeService>() {}

/**
 * The unit a metric's name ends in (`_seconds`, `_bytes`, `_ratio`), else
 * none. The bridge calls every metric's unit `1`; Prometheus takes units
 * from names, so a `# UNIT` line is written only where the name has one.
 */
export const unitOf = (name: string): string => /_(seconds|bytes|ratio)$/.exec(name)?.[1] ?? ""

const withUnits = (metrics: ResourceMetrics): ResourceMetrics => ({
  ...metrics,
  scopeMetrics: metrics.scopeMetrics.map((scope) => ({
    ...scope,
    metrics: scope.metrics.map((m) => ({ ...m, descriptor: { ...m.descriptor, unit: unitOf(m.descriptor.name) } })),
  })),
})

/** {@link Scrape} over Effect's metric registry (the reader is shut down with the scope). */
export const prometheus = (c: Config, workerId: string): Layer.Layer<Scrape> =>
  Layer.scoped(
    Scrape,
    Effect.gen(function* () {
      const exporter = new PrometheusExporter({ preventServerStart: true })
      const producer = yield* Metrics.makeProducer
      yield* Metrics.registerProducer(producer, () => exporter)
      // no otel_scope_* labels (one scope: the bridge); target_info carries the resource
      const serializer = new PrometheusSerializer("", false, undefined, false, true)
      return {
        text: Effect.tryPromise({
          try: () => exporter.collect(),
          catch: (e) => (e instanceof Error ? e : new Error(String(e))),
        }).pipe(Effect.map(({ resourceMetrics }) => serializer.serialize(withUnits(resourceMetrics)))),
      }
    }),
  ).pipe(Layer.provide(Resource.layer(resource(c, workerId))))
