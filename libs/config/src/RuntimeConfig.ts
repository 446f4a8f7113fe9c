/**
 * The configuration a turn reads: the latest good snapshot of the
 * configuration file's sections (`defaults`, `tenants`, `agents`) and of
 * `CTXD_TENANTS_FILE`. {@link layer} reads the files at start (an invalid file
 * stops the start) and then watches them (through replaced directories,
 * symlinks and ConfigMap `..data` swaps; `internal/watch.ts`), parsing each
 * reload on a worker thread: a changed, valid file applies from the next call
 * of {@link RuntimeConfigService.current} (the next turn); an invalid edit,
 * whatever it holds (`ConfigFile.limits`), keeps the last good snapshot, is
 * counted in {@link RuntimeConfigService.rejected} and logs why (key paths and
 * lines, no value of the file). Environment-style keys are read once at start: a
 * change to them is logged as needing a restart.
 *
 * Metric: `ctxd_config_reloads_total{result}` (`applied`, `rejected`).
 */
import { Context, Duration, Effect, Either, Layer, Metric, Queue, Schedule, Stream } from "effect"
import { open } from "node:fs/promises"
import { Worker } from "node:worker_threads"
import * as ConfigFile from "./ConfigFile.ts"
import * as Watch from "./internal/watch.ts"

/** The reload's knobs. */
export const defaults = {
  /** File events within this of each other make one reload (editors write a file in several steps). Default 200 ms. */
  debounceMs: 200,
  /**
   * The files are also re-stat'ed this often, in case no file event came (a
   * directory recreated, a file system without events); a reload runs only
   * when a file's identity, size or times changed. Default 5,000 ms.
   */
  pollMs: 5_000,
  /** A reload's parse runs on a worker thread and is abandoned (the edit rejected) after this. Default 10,000 ms. */
  reloadTimeoutMs: 10_000,
} as const

/** The sections turns read. */
export interface Sections {
  readonly defaults: ConfigFile.Contents["defaults"]
  readonly tenants: ConfigFile.Contents["tenants"]
  readonly agents: ConfigFile.Contents["agents"]
  /** The `gateway` section (absent: none in the file). */
  readonly gateway?: ConfigFile.Contents["gateway"]
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

/** A file's text; one larger than `ConfigFile.limits.maxBytes` is refused by its size, unread. */
const readText = (file: string): Effect.Effect<string, ConfigFile.InvalidConfigFile> =>
  Effect.flatMap(
    Effect.tryPromise({
      try: async () => {
        const handle = await open(file, "r")
        try {
          const { size } = await handle.stat()
          return size > ConfigFile.limits.maxBytes ? size : await handle.readFile("utf8")
        } finally {
          await handle.close()
        }
      },
      catch: (e) =>
        ConfigFile.invalid(file, [
          { path: [], line: undefined, column: undefined, message: `cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})` },
        ]),
    }),
    (text) => (typeof text === "number" ? Effect.fail(ConfigFile.oversized(text, file)!) : Effect.succeed(text)),
  )

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
    const sections: Sections = {
      defaults: main.defaults,
      tenants: { ...main.tenants, ...tenants },
      agents: main.agents,
      ...(main.gateway === undefined ? {} : { gateway: main.gateway }),
    }
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
 * {@link load} on a worker thread: a reload runs while the worker serves
 * turns, and parsing a large file holds the thread that runs it for up to
 * seconds. The thread is bounded in memory and time (`timeoutMs`); a thread
 * that fails, runs out of memory or takes longer rejects the edit.
 */
export const loadOffThread = (
  files: Files,
  timeoutMs: number = defaults.reloadTimeoutMs,
): Effect.Effect<Loaded, ConfigFile.InvalidConfigFile> =>
  Effect.async<Loaded, ConfigFile.InvalidConfigFile>((resume) => {
    const file = files.configFile || files.tenantsFile || "(none)"
    const failed = (message: string) => Effect.fail(ConfigFile.invalid(file, [{ path: [], line: undefined, column: undefined, message }]))
    const worker = new Worker(new URL("./internal/loadThread.ts", import.meta.url), {
      workerData: files,
      resourceLimits: { maxOldGenerationSizeMb: 256 },
    })
    let done = false
    const finish = (outcome: Effect.Effect<Loaded, ConfigFile.InvalidConfigFile>) => {
      if (done) return
      done = true
      clearTimeout(timer)
      void worker.terminate()
      resume(outcome)
    }
    const timer = setTimeout(() => finish(failed(`not parsed within ${timeoutMs} ms`)), timeoutMs)
    type Outcome = { ok: true; loaded: Loaded } | { ok: false; file: string; issues: ReadonlyArray<ConfigFile.Issue>; message: string }
    worker.once("message", (outcome: Outcome) =>
      finish(
        outcome.ok
          ? Effect.succeed(outcome.loaded)
          : Effect.fail(new ConfigFile.InvalidConfigFile({ file: outcome.file, issues: outcome.issues, message: outcome.message })),
      ),
    )
    worker.once("error", (e: NodeJS.ErrnoException) => finish(failed(`could not be parsed (${e.code ?? e.name})`)))
    worker.once("exit", (code) => finish(failed(`could not be parsed (the parser exited with ${code})`)))
    return Effect.sync(() => {
      done = true
      clearTimeout(timer)
      void worker.terminate()
    })
  })

/** How the service watches and reports. */
export interface WatchOptions {
  /** Default {@link defaults.debounceMs}. */
  readonly debounceMs?: number | undefined
  /** Default {@link defaults.pollMs}. */
  readonly pollMs?: number | undefined
  /** Default {@link defaults.reloadTimeoutMs}. */
  readonly reloadTimeoutMs?: number | undefined
  /** True for an environment-style key the environment sets (its value in the file never applies). Default: none. */
  readonly setByEnvironment?: ((key: string) => boolean) | undefined
}

/** The service over `files`, watching them until the scope closes. */
export const make = (files: Files, options: WatchOptions = {}) =>
  Effect.gen(function* () {
    const names = [files.configFile, files.tenantsFile].filter((f): f is string => f !== undefined && f !== "")
    // taken before the read: a change while it runs makes the next check reload again
    let seen = Watch.fingerprint(names)
    const first = yield* load(files)
    let good = first
    let reloads = 0
    let rejected = 0
    const reload = Effect.gen(function* () {
      const next = yield* Effect.either(loadOffThread(files, options.reloadTimeoutMs))
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
      const watcher = yield* Effect.acquireRelease(
        Effect.sync(() => Watch.make(names, () => Queue.unsafeOffer(queue, undefined))),
        (watcher) => Effect.sync(() => watcher.close()),
      )
      // after any event or poll: follow replaced directories and links, then reload if a file changed
      const check = Effect.suspend(() => {
        watcher.rearm()
        const now = Watch.fingerprint(names)
        if (now === seen) return Effect.void
        seen = now
        return reload
      })
      yield* Stream.fromQueue(queue).pipe(
        Stream.debounce(Duration.millis(options.debounceMs ?? defaults.debounceMs)),
        // whatever a reload meets, the loop goes on to the next event
        Stream.runForEach(() => check.pipe(Effect.catchAllCause((cause) => Effect.logError("config reload failed", cause)))),
        Effect.annotateLogs({ component: "config" }),
        Effect.forkScoped,
      )
      yield* Effect.sync(() => Queue.unsafeOffer(queue, undefined)).pipe(
        Effect.catchAllCause((cause) => Effect.logError("config poll failed", cause)),
        Effect.repeat(Schedule.spaced(Duration.millis(options.pollMs ?? defaults.pollMs))),
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
    const parts = [full.defaults, full.tenants, full.agents]
    return { ...full, hash: ConfigFile.hash(full.gateway === undefined ? parts : [...parts, full.gateway]) }
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
