/**
 * `npm run config:check -- ctxd.yaml`: validates a configuration file offline
 * — its sections with the request Schemas (`ConfigFile`), its
 * environment-style keys with the readers the worker starts with (each
 * service's `Config`; only the file is read, not the environment), and the
 * `CTXD_TENANTS_FILE` it names — and says what is wrong by key path and line.
 */
import { CompactorConfig } from "@ctxd/compactor"
import { ConfigFile, RuntimeConfig } from "@ctxd/config"
import { Database } from "@ctxd/db"
import { Admission, NatsClient, PayloadStore } from "@ctxd/nats"
import { ShardingConfig } from "@ctxd/sharding"
import { SummarizerConfig } from "@ctxd/summarizer"
import { TokenCounterConfig } from "@ctxd/token-counter"
import { LocalCounter } from "@ctxd/tokens"
import { Config, type ConfigError, ConfigProvider, Effect, Either } from "effect"
import { readFileSync } from "node:fs"
import * as Telemetry from "./Telemetry.ts"
import { WorkerConfig } from "./WorkerConfig.ts"

/** Every reader of the environment-style keys the worker runs at start. */
const readers = Config.all([
  WorkerConfig,
  NatsClient.config,
  PayloadStore.config,
  Admission.config,
  Admission.shareConfig,
  ShardingConfig.config,
  Database.config,
  LocalCounter.config,
  TokenCounterConfig.config,
  SummarizerConfig.config,
  CompactorConfig.config,
  Telemetry.config,
])

/** The outcome: `ok` and the lines to print (problems as `file:line:column: key path: message`). */
export interface Checked {
  readonly ok: boolean
  readonly lines: ReadonlyArray<string>
}

/** The line of `key` at the top level of `text` (1-based), if it is there. */
const lineOf = (text: string, key: string): number | undefined => {
  const at = text.split("\n").findIndex((line) => new RegExp(`^\\s*"?${key}"?\\s*:`).test(line))
  return at < 0 ? undefined : at + 1
}

/** A ConfigError's text without its wrapping (`(Invalid data at KEY: "...")`). */
const message = (error: ConfigError.ConfigError): string =>
  String(error)
    .replace(/^\(Invalid data at [^:]*: "([\s\S]*)"\)$/, "$1")
    .replace(/^\(Missing data at [^:]*: "([\s\S]*)"\)$/, "$1")

/** Checks the file at `path`. */
export const check = (path: string): Effect.Effect<Checked> =>
  Effect.gen(function* () {
    const text = yield* Effect.either(Effect.try(() => readFileSync(path, "utf8")))
    if (Either.isLeft(text))
      return { ok: false, lines: [`${path}: cannot be read (${(text.left.error as NodeJS.ErrnoException).code ?? "error"})`] }
    const decoded = ConfigFile.decode(text.right, path)
    if (Either.isLeft(decoded)) return { ok: false, lines: decoded.left.issues.map((issue) => ConfigFile.formatIssue(path, issue)) }
    const { knobs, agents } = decoded.right
    const read = (keys: Readonly<Record<string, string>>) =>
      Effect.either(Effect.withConfigProvider(readers, ConfigProvider.fromMap(new Map(Object.entries(keys)))))
    const all = yield* read(knobs)
    if (Either.isLeft(all)) {
      // each key alone (the others at their defaults) says which of them is wrong: a ConfigError of
      // a validation does not always name its key
      const lines: Array<string> = []
      for (const [key, value] of Object.entries(knobs)) {
        const alone = yield* read({ [key]: value })
        if (Either.isLeft(alone)) {
          const at = lineOf(text.right, key)
          lines.push(`${path}${at === undefined ? "" : `:${at}:1`}: ${key}: ${message(alone.left)}`)
        }
      }
      return { ok: false, lines: lines.length > 0 ? lines : [`${path}: ${message(all.left)}`] }
    }
    // the tenants file the file names, if any, and the hash a worker would report for both
    const loaded = yield* Effect.either(RuntimeConfig.load({ configFile: path, tenantsFile: knobs["CTXD_TENANTS_FILE"] }))
    if (Either.isLeft(loaded))
      return { ok: false, lines: loaded.left.issues.map((issue) => ConfigFile.formatIssue(loaded.left.file, issue)) }
    const { snapshot } = loaded.right
    return {
      ok: true,
      lines: [
        `${path}: valid (hash ${snapshot.hash}): ${Object.keys(knobs).length} environment keys, ` +
          `${Object.keys(snapshot.tenants).length} tenants, ${Object.keys(agents).length} agents`,
      ],
    }
  })
