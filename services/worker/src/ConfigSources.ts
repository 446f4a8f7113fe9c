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
import { LocalCounter } from "@ctxd/tokens"
import type { Config } from "effect"
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
]

/**
 * Defaults the code computes per process (a host name, a pid, random bits):
 * the page names their form, not one machine's value.
 */
export const computedDefaults: Readonly<Record<string, string>> = {
  CTXD_WORKER_ID: "`<hostname>-<pid>-<6 hex>`",
}

/**
 * Variables read outside `Config` (by an SDK, or as a fallback name), with
 * their default and meaning; the reference test checks the code names them.
 */
export const otherVariables: ReadonlyArray<ConfigReference.Knob & { readonly component: string }> = [
  {
    component: "summarizer",
    name: "ANTHROPIC_AUTH_TOKEN",
    type: "string",
    description: "Anthropic bearer token, read by the Anthropic SDK; counts as a configured Anthropic key",
    default: "unset",
    list: false,
    secret: true,
  },
  {
    component: "summarizer",
    name: "GOOGLE_API_KEY",
    type: "string",
    description: "Gemini API key when GEMINI_API_KEY is unset (summaries, exact counts)",
    default: "unset",
    list: false,
    secret: true,
  },
  {
    component: "Postgres",
    name: "PGSSLMODE",
    type: "string",
    description: "libpq's sslmode for a DATABASE_URL that does not set it",
    default: "unset",
    list: false,
    secret: false,
  },
  {
    component: "Postgres",
    name: "PGSSLROOTCERT",
    type: "string",
    description: "libpq's sslrootcert for a DATABASE_URL that does not set it",
    default: "unset",
    list: false,
    secret: false,
  },
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
