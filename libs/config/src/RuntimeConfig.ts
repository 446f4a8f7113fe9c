/**
 * The configuration a turn reads: the latest good snapshot of the
 * configuration file's sections (`defaults`, `tenants`, `agents`) and of
 * `CTXD_TENANTS_FILE`. {@link layer} reads the files at start (an invalid file
 * stops the start) and then watches them: a changed, valid file applies from
 * the next call of {@link RuntimeConfigService.current} (the next turn); an
 * invalid edit keeps the last good snapshot and logs why (key paths and lines,
 * no value of the file). Environment-style keys are read once at start: a
 * change to them is logged as needing a restart.
 *
 * Metric: `ctxd_config_reloads_total{result}` (`applied`, `rejected`).
 */
import { Context, Duration, Effect, Either, Layer, Metric, Queue, Stream } from "effect"
import { watch } from "node:fs"
import { readFile } from "node:fs/promises"
import { basename, dirname } from "node:path"
import * as ConfigFile from "./ConfigFile.ts"

/** The reload's knobs. */
export const defaults = {
  /** File events within this of each other make one reload (editors write a file in several steps). Default 200 ms. */
  debounceMs: 200,
} as const

/** The sections turns read. */
export interface Sections {
  readonly defaults: ConfigFile.Contents["defaults"]
  readonly tenants: ConfigFile.Contents["tenants"]
  readonly agents: ConfigFile.Contents["agents"]
}

/** One good configuration. */
export interface Snapshot extends Sections {
  /** {@link ConfigFile.hash} of the files' decoded contents; `none` without a file. */
  readonly hash: string
}

export interface RuntimeConfigService {
  /** The latest good snapshot (cheap: read it per request). */
  readonly current: () => Snapshot
  /** Changed configurations applied since start. */
  readonly reloads: () => number
  /** Edits rejected since start (the previous snapshot stayed). */
  readonly rejected: () => number
}

export class RuntimeConfig extends Context.Tag("@ctxd/config/RuntimeConfig")<RuntimeConfig, RuntimeConfigService>() {}

/** The files, by their environment names. */
export interface Files {
  /** `CTXD_CONFIG_FILE`. */
  readonly configFile?: string | undefined
  /** `CTXD_TENANTS_FILE`: its sections replace the config file's section of the same tenant, whole. */
  readonly tenantsFile?: string | undefined
}

/** What both files hold, decoded. */
export interface Loaded {
  readonly snapshot: Snapshot
  readonly knobs: Readonly<Record<string, string>>
}

const emptySnapshot: Snapshot = { defaults: {}, tenants: {}, agents: {}, hash: "none" }

const readText = (file: string): Effect.Effect<string, ConfigFile.InvalidConfigFile> =>
  Effect.tryPromise({
    try: () => readFile(file, "utf8"),
    catch: (e) =>
      ConfigFile.invalid(file, [
        { path: [], line: undefined, column: undefined, message: `cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})` },
      ]),
  })

/** The hash a worker reports for these files' contents (`config:check` shows the same). */
export const hashOf = (contents: ConfigFile.Contents, tenants?: ConfigFile.TenantSections | undefined): string =>
  ConfigFile.hash([contents, tenants ?? null])

/** The error's message headed by the environment name of the file. */
const named =
  (name: string) =>
  (error: ConfigFile.InvalidConfigFile): ConfigFile.InvalidConfigFile =>
    new ConfigFile.InvalidConfigFile({ ...error, message: `${name} ${error.file} is not valid:\n${error.message}` })

/** Reads and decodes the files (none: the empty snapshot, hash `none`). */
export const load = (files: Files): Effect.Effect<Loaded, ConfigFile.InvalidConfigFile> =>
  Effect.gen(function* () {
    const main =
      files.configFile === undefined || files.configFile === ""
        ? ConfigFile.empty
        : yield* Effect.flatMap(readText(files.configFile), (text) => ConfigFile.decode(text, files.configFile!)).pipe(
            Effect.mapError(named("CTXD_CONFIG_FILE")),
          )
    const tenants =
      files.tenantsFile === undefined || files.tenantsFile === ""
        ? undefined
        : yield* Effect.flatMap(readText(files.tenantsFile), (text) => ConfigFile.decodeTenants(text, files.tenantsFile!)).pipe(
            Effect.mapError(named("CTXD_TENANTS_FILE")),
          )
    if (main === ConfigFile.empty && tenants === undefined) return { snapshot: emptySnapshot, knobs: {} }
    const sections: Sections = { defaults: main.defaults, tenants: { ...main.tenants, ...tenants }, agents: main.agents }
    return { snapshot: { ...sections, hash: hashOf(main, tenants) }, knobs: main.knobs }
  })

/** Environment-style keys whose value differs between two loads (names only). */
export const changedKnobs = (before: Readonly<Record<string, string>>, after: Readonly<Record<string, string>>): ReadonlyArray<string> =>
  [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((key) => before[key] !== after[key]).sort()

/** `ctxd_config_reloads_total{result}`: `applied`, `rejected`. */
export const reloadsTotal = Metric.counter("ctxd_config_reloads_total", {
  description: "configuration file reloads: applied (a changed valid file), rejected (an invalid edit; the previous config stays)",
  incremental: true,
})

/**
 * Watches the files' directories (not the files: editors and Kubernetes
 * ConfigMaps replace a file by renaming over it) until the scope closes; any
 * event of one of them lands in `queue`. The watchers are in place when this returns.
 */
const watchFiles = (files: ReadonlyArray<string>, queue: Queue.Queue<void>) =>
  Effect.forEach(
    [...new Set(files.map(dirname))],
    (dir) => {
      const names = new Set(files.filter((f) => dirname(f) === dir).map((f) => basename(f)))
      return Effect.acquireRelease(
        Effect.sync(() => {
          const watcher = watch(dir, (_event, name) => {
            // `..data`: a Kubernetes ConfigMap swaps this symlink for every update
            if (name === null || names.has(name) || name === "..data") Queue.unsafeOffer(queue, undefined)
          })
          watcher.on("error", () => watcher.close())
          return watcher
        }),
        (watcher) => Effect.sync(() => watcher.close()),
      )
    },
    { discard: true },
  )

/** The service over `files`, watching them until the scope closes. */
/** How the service watches and reports. */
export interface WatchOptions {
  /** Default {@link defaults.debounceMs}. */
  readonly debounceMs?: number | undefined
  /** True for an environment-style key the environment sets (its value in the file never applies). Default: none. */
  readonly setByEnvironment?: ((key: string) => boolean) | undefined
}

export const make = (files: Files, options: WatchOptions = {}) =>
  Effect.gen(function* () {
    const first = yield* load(files)
    let good = first
    let reloads = 0
    let rejected = 0
    const names = [files.configFile, files.tenantsFile].filter((f): f is string => f !== undefined && f !== "")
    const reload = Effect.gen(function* () {
      const next = yield* Effect.either(load(files))
      if (Either.isLeft(next)) {
        rejected++
        yield* Metric.increment(Metric.tagged(reloadsTotal, "result", "rejected"))
        const problems = next.left.issues.map((issue) => ConfigFile.formatIssue(next.left.file, issue)).join("; ")
        return yield* Effect.logWarning(`config not applied, keeping ${good.snapshot.hash}: ${problems}`)
      }
      if (next.right.snapshot.hash === good.snapshot.hash) return
      const changed = changedKnobs(first.knobs, next.right.knobs)
      const shadowed = changed.filter((key) => options.setByEnvironment?.(key) === true)
      const restart = changed.filter((key) => !shadowed.includes(key))
      good = next.right
      reloads++
      yield* Metric.increment(Metric.tagged(reloadsTotal, "result", "applied"))
      yield* Effect.logInfo(`config ${good.snapshot.hash} applied (reload ${reloads}); turns use it from now on`)
      if (restart.length > 0) yield* Effect.logWarning(`config: ${restart.join(", ")} changed; read at start, needs a restart`)
      if (shadowed.length > 0)
        yield* Effect.logWarning(`config: ${shadowed.join(", ")} changed; the environment sets them, the file's values do not apply`)
    })
    if (names.length > 0) {
      const queue = yield* Queue.sliding<void>(16)
      yield* watchFiles(names, queue)
      yield* Stream.fromQueue(queue).pipe(
        Stream.debounce(Duration.millis(options.debounceMs ?? defaults.debounceMs)),
        Stream.runForEach(() => reload),
        Effect.annotateLogs({ component: "config" }),
        Effect.forkScoped,
      )
      yield* Effect.logInfo(`config ${good.snapshot.hash} from ${names.join(", ")}; watching for changes`)
    }
    return RuntimeConfig.of({ current: () => good.snapshot, reloads: () => reloads, rejected: () => rejected })
  })

/** The service over `files`, watched (scoped). */
export const layer = (files: Files, options: WatchOptions = {}): Layer.Layer<RuntimeConfig, ConfigFile.InvalidConfigFile> =>
  Layer.scoped(RuntimeConfig, make(files, options))

/** A fixed snapshot that a test can replace ({@link MemoryRuntimeConfig.set} counts as a reload). */
export interface MemoryRuntimeConfig extends RuntimeConfigService {
  readonly set: (sections: Partial<Sections>) => void
}

export const memory = (sections: Partial<Sections> = {}): MemoryRuntimeConfig => {
  const of = (s: Partial<Sections>): Snapshot => {
    const full = { ...emptySnapshot, ...s }
    return { ...full, hash: ConfigFile.hash([full.defaults, full.tenants, full.agents]) }
  }
  let snapshot = of(sections)
  let reloads = 0
  return {
    current: () => snapshot,
    reloads: () => reloads,
    rejected: () => 0,
    set: (next) => {
      snapshot = of(next)
      reloads++
    },
  }
}

export const layerMemory = (sections: Partial<Sections> = {}): Layer.Layer<RuntimeConfig> =>
  Layer.sync(RuntimeConfig, () => memory(sections))
