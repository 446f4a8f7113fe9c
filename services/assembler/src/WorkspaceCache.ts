/**
 * Workspace bundles: a request's `system: {workspace, extras?, cache?}`
 * becomes the Markdown files of `<root>/<workspace>/` as system sections,
 * read by the turn's shell (`Gather`) before the pure stages run, so agents
 * stop resending the same text every turn.
 *
 * Files, in this order, one section each (`id`: the file name): the fixed
 * {@link FIXED_FILES}, then the request's extras sorted by name (so the
 * same set is the same prompt and one cache entry whatever order the caller
 * lists them in; an extra naming a fixed file or repeated is ignored). A
 * missing or empty file is skipped; a scope without a directory →
 * `BadRequest`; a file over `maxFileBytes` → `TooLarge`.
 *
 * With `perTenant`, a tenant's scopes are `<root>/<tenant>/<workspace>/`
 * instead: a tenant cannot name another tenant's files.
 *
 * Cache: in memory, keyed by (root, [tenant,] scope, sorted extras), bounded in
 * entries and bytes (least recently used first out). A recursive
 * `node:fs` watcher on the root (Node 24 watches recursively on Linux too)
 * drops all of the root's entries `debounceMs` after the first change of
 * any `*.md` under it (changes during that wait fold into the same drop);
 * other files' changes are ignored. An entry older than `maxAgeSeconds` is
 * read again, for filesystems whose events are unreliable (NFS).
 *
 * Metrics: `ctxd_workspace_cache_hits_total`,
 * `ctxd_workspace_cache_misses_total`,
 * `ctxd_workspace_cache_invalidations_total{reason}` (entries dropped:
 * `change`, `max_age`, `evicted`).
 */
import type { Conversation } from "@ctxd/contracts"
import { Errors, type Turn } from "@ctxd/contracts"
import { Chunk, Clock, Context, Effect, Layer, Metric, Queue, Runtime, type Scope } from "effect"
import { watch } from "node:fs"
import { stat } from "node:fs/promises"
import { join, resolve } from "node:path"
import * as WorkspaceFiles from "./internal/workspaceFiles.ts"

/** The fixed files of a workspace, in the order their sections go out. */
export const FIXED_FILES = ["IDENTITY.md", "SOUL.md", "USER.md", "AGENTS.md", "MEMORY.md"] as const

/**
 * The defaults: a change drops the root's entries after 500 ms; an entry is
 * read again after 300 s whatever the watcher says; 256 bundles and 16 MiB
 * kept; a file may have 256 KiB; scopes shared by all tenants.
 */
export const defaults = {
  debounceMs: 500,
  maxAgeSeconds: 300,
  maxEntries: 256,
  maxBytes: 16 * 1024 * 1024,
  maxFileBytes: 256 * 1024,
  perTenant: false,
} as const

export interface Config {
  /** The workspace root (`CTXD_WORKSPACE_ROOT`); undefined: bundles are off and a request naming one is refused. */
  readonly root: string | undefined
  /** Wait after the first `*.md` change before the root's entries are dropped (ms). */
  readonly debounceMs: number
  /** An entry older than this is read again (seconds; 0: only file events refresh). */
  readonly maxAgeSeconds: number
  /** Bundles kept. */
  readonly maxEntries: number
  /** Bytes of file text kept over all bundles. */
  readonly maxBytes: number
  /** Largest file read (bytes). */
  readonly maxFileBytes: number
  /** Each tenant's scopes under `<root>/<tenant>/` (else every tenant may name every scope under the root). */
  readonly perTenant: boolean
}

/** What the cache holds, for tests and probes. */
export interface Stats {
  readonly entries: number
  readonly bytes: number
  /** File events the watcher has handled (Markdown or not). */
  readonly events: number
}

export type ReadError = Errors.BadRequest | Errors.PayloadTooLarge | Errors.InternalError

/** The port. */
export interface WorkspaceCacheService {
  /** The bundle's system sections for a turn of `tenant`, from the cache or read. */
  /** The bundle's sections; `cached: false` reads the files whatever the cache holds and stores nothing (`options.workspaceCache`). */
  readonly read: (
    ref: Turn.WorkspaceRef,
    tenant: string,
    cached?: boolean,
  ) => Effect.Effect<ReadonlyArray<Conversation.SystemSection>, ReadError>
  readonly stats: Effect.Effect<Stats>
}

export class WorkspaceCache extends Context.Tag("@ctxd/assembler/WorkspaceCache")<WorkspaceCache, WorkspaceCacheService>() {}

/** The metrics (exported for tests). */
export const metrics = {
  hits: Metric.counter("ctxd_workspace_cache_hits_total", { description: "workspace bundles served from the cache", incremental: true }),
  misses: Metric.counter("ctxd_workspace_cache_misses_total", {
    description: "workspace bundles read from the filesystem",
    incremental: true,
  }),
  invalidations: Metric.counter("ctxd_workspace_cache_invalidations_total", {
    description: "workspace bundle entries dropped, by reason: change (a *.md under the root changed), max_age, evicted (bounds)",
    incremental: true,
  }),
} as const

const dropped = (reason: "change" | "max_age" | "evicted", n: number) =>
  n === 0 ? Effect.void : Metric.incrementBy(Metric.tagged(metrics.invalidations, "reason", reason), n)

/** The bundle's file names in section order: the fixed ones, then the extras (`.md` added) sorted, without repeats. */
export const filesOf = (ref: Turn.WorkspaceRef): ReadonlyArray<string> => {
  const fixed = new Set<string>(FIXED_FILES)
  const extras = [...new Set((ref.extras ?? []).map((e) => (e.endsWith(".md") ? e : `${e}.md`)))].filter((e) => !fixed.has(e)).sort()
  return [...FIXED_FILES, ...extras]
}

/** Whether a watcher event's file name (relative to the root; null when the platform gives none) may be a Markdown change. */
export const isMarkdownEvent = (filename: string | null): boolean => filename === null || filename.toLowerCase().endsWith(".md")

const off = new Errors.BadRequest({
  message: "workspace bundles are off on this worker: CTXD_WORKSPACE_ROOT is not set",
  path: "system.workspace",
  hint: "send the system sections' text, or set CTXD_WORKSPACE_ROOT",
})

interface Entry {
  readonly files: ReadonlyArray<WorkspaceFiles.File>
  readonly bytes: number
  /** When it was read (ms, the Effect clock). */
  readonly at: number
}

/** Reads the files `names` of a scope: `dir` is its path under the root (`<scope>` or `<tenant>/<scope>`). */
type Load = (dir: string, scope: string, names: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<WorkspaceFiles.File>, ReadError>

/** The cache over `load` for `root`; `drop()` empties it (a change under the root). */
const makeCache = (root: string, config: Omit<Config, "root">, load: Load) => {
  const entries = new Map<string, Entry>() // insertion order = least recently used first
  let bytes = 0
  // bumped by every drop: a read that started before a drop does not store what it read
  let generation = 0
  let events = 0

  const remove = (key: string, entry: Entry) => {
    entries.delete(key)
    bytes -= entry.bytes
  }

  const drop = Effect.suspend(() => {
    generation++
    const n = entries.size
    entries.clear()
    bytes = 0
    return dropped("change", n)
  })

  const store = (key: string, entry: Entry) =>
    Effect.suspend(() => {
      // two turns that missed at once both store: the second replaces the first
      const previous = entries.get(key)
      if (previous !== undefined) remove(key, previous)
      if (entry.bytes > config.maxBytes || config.maxEntries < 1) return Effect.void
      let evicted = 0
      for (const [k, e] of entries) {
        if (entries.size < config.maxEntries && bytes + entry.bytes <= config.maxBytes) break
        remove(k, e)
        evicted++
      }
      entries.set(key, entry)
      bytes += entry.bytes
      return dropped("evicted", evicted)
    })

  const sections = (files: ReadonlyArray<WorkspaceFiles.File>, cache: Conversation.CacheTtl): ReadonlyArray<Conversation.SystemSection> =>
    files.map((f) => ({ id: f.name, text: f.text, cache }))

  const read = (ref: Turn.WorkspaceRef, tenant: string, cached = true) =>
    Effect.gen(function* () {
      const names = filesOf(ref)
      const dir = config.perTenant ? `${tenant}/${ref.workspace}` : ref.workspace
      const key = `${root}\u0000${dir}\u0000${names.slice(FIXED_FILES.length).join("\u0000")}`
      const cache = ref.cache ?? "5m"
      const now = yield* Clock.currentTimeMillis
      const hit = cached ? entries.get(key) : undefined
      if (hit !== undefined) {
        if (config.maxAgeSeconds <= 0 || now - hit.at < config.maxAgeSeconds * 1000) {
          entries.delete(key)
          entries.set(key, hit)
          yield* Metric.increment(metrics.hits)
          return sections(hit.files, cache)
        }
        remove(key, hit)
        yield* dropped("max_age", 1)
      }
      yield* Metric.increment(metrics.misses)
      const before = generation
      const files = yield* load(dir, ref.workspace, names)
      if (cached && generation === before) yield* store(key, { files, bytes: files.reduce((n, f) => n + f.bytes, 0), at: now })
      return sections(files, cache)
    })

  const stats = Effect.sync((): Stats => ({ entries: entries.size, bytes, events }))
  const counted = () => void events++
  return { service: { read, stats } satisfies WorkspaceCacheService, drop, counted }
}

/**
 * The debounce loop: takes watcher events; a Markdown one waits
 * `debounceMs`, folds the events that came meanwhile, then drops the root's
 * entries. Owned by the current scope.
 */
const debounce = (queue: Queue.Queue<string | null>, debounceMs: number, cache: ReturnType<typeof makeCache>) =>
  Queue.take(queue).pipe(
    Effect.flatMap((filename) => {
      cache.counted()
      if (!isMarkdownEvent(filename)) return Effect.void
      return Effect.sleep(debounceMs).pipe(
        Effect.zipRight(Queue.takeAll(queue)),
        Effect.tap((more) => Effect.sync(() => Chunk.forEach(more, cache.counted))),
        Effect.zipRight(cache.drop),
      )
    }),
    Effect.forever,
    Effect.forkScoped,
  )

/** `root` as an absolute path, or a failure naming it when it is not a directory (the worker checks before it connects anywhere). */
export const checkRoot = (root: string): Effect.Effect<string, Error> =>
  Effect.flatMap(
    Effect.promise(() =>
      stat(resolve(root)).then(
        (s) => s.isDirectory(),
        () => false,
      ),
    ),
    (isDir) => (isDir ? Effect.succeed(resolve(root)) : Effect.fail(new Error(`CTXD_WORKSPACE_ROOT ${resolve(root)} is not a directory`))),
  )

/**
 * The cache over the real filesystem under `config.root`, watched while the
 * scope is open (the watcher closes with it). Fails when the root is not a
 * directory; a watcher that cannot start or fails later is logged and the
 * cache relies on `maxAgeSeconds`.
 */
export const make = (config: Partial<Config> & Pick<Config, "root">): Effect.Effect<WorkspaceCacheService, Error, Scope.Scope> =>
  Effect.gen(function* () {
    const settings = { ...defaults, ...config }
    if (settings.root === undefined || settings.root === "") {
      return { read: () => Effect.fail(off), stats: Effect.succeed({ entries: 0, bytes: 0, events: 0 }) }
    }
    const root = yield* checkRoot(settings.root)
    const cache = makeCache(root, settings, (dir, scope, names) =>
      WorkspaceFiles.read(join(root, dir), scope, names, settings.maxFileBytes),
    )
    const queue = yield* Queue.sliding<string | null>(1_024)
    yield* debounce(queue, settings.debounceMs, cache)
    const runtime = yield* Effect.runtime<never>()
    const failed = (e: unknown) =>
      Effect.logWarning(
        `workspace watcher on ${root} failed (${String((e as { code?: unknown } | undefined)?.code ?? e)}); ` +
          `entries refresh after CTXD_WORKSPACE_MAX_AGE_SECONDS (${settings.maxAgeSeconds} s)`,
      ).pipe(Effect.zipRight(cache.drop))
    yield* Effect.acquireRelease(
      Effect.try(() =>
        watch(root, { recursive: true, persistent: false }, (_event, filename) => {
          Queue.unsafeOffer(queue, filename === null ? null : String(filename))
        }).on("error", (e) => Runtime.runFork(runtime)(failed(e))),
      ).pipe(Effect.catchAll((e) => Effect.as(failed(e.error), undefined))),
      (watcher) => Effect.sync(() => watcher?.close()),
    )
    return cache.service
  })

/** The real cache (`config` over {@link defaults}); `root` undefined: bundles off. */
export const layer = (config: Partial<Config> & Pick<Config, "root">): Layer.Layer<WorkspaceCache, Error> =>
  Layer.scoped(WorkspaceCache, make(config))

/**
 * Bundles from memory: `files[scope][fileName]` (e.g.
 * `{"acme-bot": {"SOUL.md": "..."}}`; with `perTenant`, `files["<tenant>/<scope>"]`), with the same order, skipping and
 * errors as the real one; no watcher (the map is read at each miss).
 */
export const layerMemory = (
  files: Readonly<Record<string, Readonly<Record<string, string>>>>,
  config: Partial<Omit<Config, "root">> = {},
): Layer.Layer<WorkspaceCache> =>
  Layer.sync(WorkspaceCache, () => {
    const settings = { ...defaults, ...config }
    const load: Load = (path, scope, names) => {
      const dir = Object.hasOwn(files, path) ? files[path]! : undefined
      if (dir === undefined) return Effect.fail(new Errors.BadRequest({ message: `no workspace ${scope}`, path: "system.workspace" }))
      return Effect.forEach(names, (name) => {
        const text = Object.hasOwn(dir, name) ? dir[name]! : ""
        const bytes = Buffer.byteLength(text)
        if (bytes > settings.maxFileBytes) {
          return Effect.fail(
            new Errors.PayloadTooLarge({
              message: `workspace ${scope}: ${name} is over the per-file limit`,
              limit: settings.maxFileBytes,
              size: bytes,
            }),
          )
        }
        return Effect.succeed(text.trim() === "" ? [] : [{ name, text, bytes }])
      }).pipe(Effect.map((found) => found.flat()))
    }
    return makeCache("memory", settings, load).service
  })
