/**
 * Every `Config` a ctxd process reads, by component: the one list the
 * configuration reference (`docs/configuration.md`, `npm run docs:config`)
 * is generated from. A `Config` added to the code and not here fails the
 * reference test, which greps the sources for the names they read.
 */
import { CompactorConfig } from "@ctxd/compactor"
import { ConfigReference } from "@ctxd/config"
import { Database } from "@ctxd/db"
import { Admission, NatsAuth, NatsClient, PayloadStore } from "@ctxd/nats"
import { ShardingConfig } from "@ctxd/sharding"
import { SummarizerConfig } from "@ctxd/summarizer"
import { TokenCounterConfig } from "@ctxd/token-counter"
import { MemoryRetrieval } from "@ctxd/context"
import { GatewayEnv } from "@ctxd/gateway"
import { LocalCounter } from "@ctxd/tokens"
import type { Config } from "effect"
import * as Pruner from "./Pruner.ts"
import * as Telemetry from "./Telemetry.ts"
import * as WorkerConfig from "./WorkerConfig.ts"

/** One component's configs, as its code reads them. */
export interface Source {
  readonly component: string
  readonly configs: ReadonlyArray<Config.Config<unknown>>
}

/** The components, in the order the reference lists them (the first to read a key describes it). */
export const sources: ReadonlyArray<Source> = [
  { component: "worker", configs: [WorkerConfig.WorkerConfig, WorkerConfig.pricesFile] },
  { component: "NATS", configs: [NatsClient.config, NatsAuth.config, Admission.config, Admission.shareConfig, PayloadStore.config] },
  { component: "Postgres", configs: [Database.config, WorkerConfig.embeddedDatabase] },
  { component: "sharding", configs: [ShardingConfig.config] },
  { component: "token counting", configs: [TokenCounterConfig.config, LocalCounter.config] },
  { component: "compaction", configs: [CompactorConfig.config] },
  { component: "summarizer", configs: [SummarizerConfig.config] },
  { component: "telemetry", configs: [Telemetry.config] },
  { component: "gateway", configs: [GatewayEnv.config] },
]

/**
 * Defaults the code computes (per process: a host name, a pid; or from other
 * knobs) or that an optional key stands for when unset: the page names their
 * form or the value in effect, not "unset".
 */
export const computedDefaults: Readonly<Record<string, string>> = {
  CTXD_WORKER_ID: "`<hostname>-<pid>-<6 hex>`",
  CTXD_WORKER_ADDRESS: "`<root>.v1.worker.<id>`",
  CTXD_LEASE_REFRESH_MS: "TTL / 3",
  CTXD_LEASE_MARGIN_MS: "TTL / 5",
  CTXD_COMPACT_STREAM: "`ctxd-compact-<root>`",
  CTXD_TURN_RETENTION: `\`${(Pruner.defaults.turnRetentionSeconds ?? 0) / 86_400}d\` (at least the reply window; \`off\` while that is \`off\`)`,
  CTXD_MEMORY: "unset: while the agent has memories",
  CTXD_MEMORY_TOKENS: `unset: the smaller of ${MemoryRetrieval.defaults.tokens} and the fraction`,
  CTXD_MEMORY_FRACTION: `unset: \`${MemoryRetrieval.defaults.fraction}\``,
  CTXD_MEMORY_PLACEMENT: "unset: `tail`",
  CTXD_LEARNINGS_FRACTION: `unset: \`${MemoryRetrieval.defaults.learningsFraction}\``,
  CTXD_SUMMARIZER_CONTEXT_WINDOW: "the model table's",
  CTXD_WORKSPACE_ROOT: "unset: bundles off",
  CTXD_PRICES_FILE: "unset: the built-in table",
  CTXD_CONFIG_FILE: "unset: no file",
  CTXD_TENANTS_FILE: "unset: no file",
  CTXD_GATEWAY_UPSTREAM_ANTHROPIC: "`https://api.anthropic.com`",
  CTXD_GATEWAY_UPSTREAM_OPENAI: "`https://api.openai.com`",
  CTXD_GATEWAY_UPSTREAM_GOOGLE: "`https://generativelanguage.googleapis.com`",
  CTXD_GATEWAY_SHADOW_FILE: "unset: records in memory and metrics only",
  ANTHROPIC_BASE_URL: "the SDK's",
  OPENAI_BASE_URL: "the SDK's",
  GOOGLE_GEMINI_BASE_URL: "the SDK's",
}

const sdk = (component: string, name: string, description: string, secret = false, fallback = "unset", type = "a text") => ({
  component,
  name,
  type,
  description,
  default: fallback,
  list: false,
  secret,
})

/**
 * Variables read outside `Config` (by an SDK, or as a fallback name), with
 * their default and meaning; the reference test checks the code names them.
 */
export const otherVariables: ReadonlyArray<ConfigReference.Knob & { readonly component: string }> = [
  sdk(
    "summarizer",
    "ANTHROPIC_AUTH_TOKEN",
    "Anthropic bearer token, read by the Anthropic SDK; counts as a configured Anthropic key",
    true,
  ),
  sdk("summarizer", "GOOGLE_API_KEY", "Gemini API key when GEMINI_API_KEY is unset (summaries, exact counts)", true),
  sdk("Postgres", "PGPASSWORD", "Postgres password when DATABASE_URL names none (read by node-postgres; never logged)", true),
  sdk("Postgres", "PGSSLMODE", "libpq's sslmode for a DATABASE_URL that does not set it"),
  sdk("Postgres", "PGSSLROOTCERT", "libpq's sslrootcert for a DATABASE_URL that does not set it"),
  sdk("telemetry", "OTEL_EXPORTER_OTLP_HEADERS", "Headers of the OTLP export, e.g. an API key (read by the OpenTelemetry SDK)", true),
  sdk("telemetry", "OTEL_RESOURCE_ATTRIBUTES", "Extra resource attributes of the spans (read by the OpenTelemetry SDK)"),
  sdk(
    "telemetry",
    "OTEL_TRACES_SAMPLER",
    "The sampler (read by the OpenTelemetry SDK); the default is parent-based: a caller's traceparent with the sampled flag off is not exported",
    false,
    "`parentbased_always_on`",
  ),
  sdk("telemetry", "OTEL_TRACES_SAMPLER_ARG", "The sampler's argument, e.g. a ratio (read by the OpenTelemetry SDK)"),
  {
    ...sdk(
      "telemetry",
      "OTEL_BSP_SCHEDULE_DELAY",
      "Batch span processor: time between two exports (read by the OpenTelemetry SDK)",
      false,
      "`5000`",
    ),
    shown: "duration (ms)",
  },
  sdk(
    "telemetry",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "Batch span processor: spans queued at most (read by the OpenTelemetry SDK)",
    false,
    "`2048`",
    "an integer",
  ),
  sdk(
    "telemetry",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "Batch span processor: spans per export (read by the OpenTelemetry SDK)",
    false,
    "`512`",
    "an integer",
  ),
]

/** One row of the reference: a key, the components that read it, its default and meaning. */
export interface Row extends ConfigReference.Knob {
  readonly components: ReadonlyArray<string>
}

/**
 * Every key of `from` (default {@link sources}; the generator adds the
 * client library's, a dependency the worker does not have) and
 * {@link otherVariables}, each once, with the components that read it.
 */
export const rows = (from: ReadonlyArray<Source> = sources): ReadonlyArray<Row> => {
  const readBy = new Map<string, Array<string>>()
  const lists = from.map((source) => {
    const list = ConfigReference.merge(source.configs.map(ConfigReference.knobs))
    for (const knob of list) {
      const components = readBy.get(knob.name) ?? []
      if (!components.includes(source.component)) components.push(source.component)
      readBy.set(knob.name, components)
    }
    return list
  })
  for (const other of otherVariables) readBy.set(other.name, [...(readBy.get(other.name) ?? []), other.component])
  return ConfigReference.merge([...lists, otherVariables]).map((knob) => ({
    ...knob,
    default: computedDefaults[knob.name] ?? knob.default,
    components: readBy.get(knob.name) ?? [],
  }))
}
