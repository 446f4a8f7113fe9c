/**
 * Workspace bundles: the files of a scope's directory in stable order, the
 * coded errors, and the cache — a `*.md` change under the root drops it after
 * the debounce (real files, a real recursive watcher; time moved with
 * `TestClock`), a non-Markdown change does not, `maxAgeSeconds` refreshes
 * without any event, and the bounds hold.
 */
import { Errors } from "@ctxd/contracts"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Metric, TestClock } from "effect"
import fc from "fast-check"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as WorkspaceCache from "../src/WorkspaceCache.ts"

/** A temporary workspace root with `files` (`"scope/NAME.md": text`), removed with the scope. */
const tempRoot = (files: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const root = mkdtempSync(join(tmpdir(), "ctxd-workspace-"))
      for (const [path, text] of Object.entries(files)) write(root, path, text)
      return root
    }),
    (root) => Effect.sync(() => rmSync(root, { recursive: true, force: true })),
  )

const write = (root: string, path: string, text: string) => {
  mkdirSync(join(root, path, ".."), { recursive: true })
  writeFileSync(join(root, path), text)
}

/** Waits (real time, polling) until `done` holds: file events arrive on their own schedule. */
const until = (done: Effect.Effect<boolean>, what: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 1_000; i++) {
      if (yield* done) return
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
    }
    return yield* Effect.dieMessage(`timed out waiting for ${what}`)
  })

const count = (metric: Metric.Metric.Counter<number>) => Effect.map(Metric.value(metric), (s) => s.count)
const invalidations = (reason: string) => count(Metric.tagged(WorkspaceCache.metrics.invalidations, "reason", reason))

const texts = (sections: ReadonlyArray<{ readonly text: string }>) => sections.map((s) => s.text)

const bot = {
  "acme-bot/IDENTITY.md": "# Identity\nAcme's support bot.",
  "acme-bot/SOUL.md": "Be kind.",
  "acme-bot/AGENTS.md": "Follow the runbook.",
  "acme-bot/MEMORY.md": "  \n",
  "acme-bot/TOOLS.md": "The tools.",
  "acme-bot/BOOT.md": "Boot steps.",
}

describe("WorkspaceCache", () => {
  it.scoped("one section per file: the fixed files in order, then the extras sorted; missing and empty files skipped", () =>
    Effect.gen(function* () {
      const root = yield* tempRoot(bot)
      const cache = yield* WorkspaceCache.make({ root })
      const sections = yield* cache.read({ workspace: "acme-bot", extras: ["TOOLS", "BOOT.md", "SOUL", "TOOLS.md", "NOPE"] }, "acme")
      expect(sections).toEqual([
        { id: "IDENTITY.md", text: bot["acme-bot/IDENTITY.md"], cache: "5m" },
        { id: "SOUL.md", text: "Be kind.", cache: "5m" },
        { id: "AGENTS.md", text: "Follow the runbook.", cache: "5m" },
        { id: "BOOT.md", text: "Boot steps.", cache: "5m" },
        { id: "TOOLS.md", text: "The tools.", cache: "5m" },
      ])
      // the same extras in another order: the same entry, the same sections; `cache` applies to each
      const hits = yield* count(WorkspaceCache.metrics.hits)
      const again = yield* cache.read({ workspace: "acme-bot", extras: ["NOPE", "BOOT", "TOOLS.md"], cache: "1h" }, "acme")
      expect(again.map((s) => s.id)).toEqual(["IDENTITY.md", "SOUL.md", "AGENTS.md", "BOOT.md", "TOOLS.md"])
      expect(again.every((s) => s.cache === "1h")).toBe(true)
      expect((yield* count(WorkspaceCache.metrics.hits)) - hits).toBe(1)
      expect((yield* cache.stats).entries).toBe(1)
    }),
  )

  it.scoped("a missing scope, bundles off, and a file over the size limit are coded errors", () =>
    Effect.gen(function* () {
      const root = yield* tempRoot({ ...bot, "big/SOUL.md": "x".repeat(2_000) })
      const cache = yield* WorkspaceCache.make({ root, maxFileBytes: 1_000 })
      const missing = yield* Effect.flip(cache.read({ workspace: "nobody" }, "acme"))
      expect(Errors.codeOf(missing)).toBe("BadRequest")
      expect(missing.message).toContain("no workspace nobody")
      const large = yield* Effect.flip(cache.read({ workspace: "big" }, "acme"))
      expect(Errors.codeOf(large)).toBe("TooLarge")
      expect(large).toMatchObject({ limit: 1_000, size: 2_000 })
      // the same file under a limit it fits
      const roomy = yield* WorkspaceCache.make({ root, maxFileBytes: 2_000 })
      expect(texts(yield* roomy.read({ workspace: "big" }, "acme"))).toEqual(["x".repeat(2_000)])
      const off = yield* WorkspaceCache.make({ root: undefined })
      const refused = yield* Effect.flip(off.read({ workspace: "acme-bot" }, "acme"))
      expect(Errors.codeOf(refused)).toBe("BadRequest")
      expect(refused.message).toContain("CTXD_WORKSPACE_ROOT")
    }),
  )

  it.scoped("editing a .md drops the root's entries once the debounce has passed: the next read sees the edit", () =>
    Effect.gen(function* () {
      const root = yield* tempRoot({ ...bot, "other/SOUL.md": "Other soul." })
      const cache = yield* WorkspaceCache.make({ root, debounceMs: 500, maxAgeSeconds: 0 })
      expect(texts(yield* cache.read({ workspace: "acme-bot" }, "acme"))).toContain("Be kind.")
      yield* cache.read({ workspace: "other" }, "acme")
      const dropped = yield* invalidations("change")
      write(root, "acme-bot/SOUL.md", "Be very kind.")
      yield* until(
        Effect.map(cache.stats, (s) => s.events >= 1),
        "the watcher's event",
      )
      // within the debounce the entry stands
      yield* TestClock.adjust(499)
      expect(texts(yield* cache.read({ workspace: "acme-bot" }, "acme"))).toContain("Be kind.")
      yield* TestClock.adjust(1)
      expect(texts(yield* cache.read({ workspace: "acme-bot" }, "acme"))).toContain("Be very kind.")
      // the whole root was dropped: both scopes' entries
      expect((yield* invalidations("change")) - dropped).toBe(2)
      // a Markdown file in a subdirectory counts too
      write(root, "acme-bot/notes/deep.md", "deep")
      const events = (yield* cache.stats).events
      yield* until(
        Effect.map(cache.stats, (s) => s.events > events),
        "the watcher's event",
      )
      yield* TestClock.adjust(500)
      expect((yield* cache.stats).entries).toBe(0)
    }),
  )

  it.scoped("editing a non-Markdown file keeps the entries", () =>
    Effect.gen(function* () {
      const root = yield* tempRoot(bot)
      const cache = yield* WorkspaceCache.make({ root, debounceMs: 500, maxAgeSeconds: 0 })
      yield* cache.read({ workspace: "acme-bot" }, "acme")
      const misses = yield* count(WorkspaceCache.metrics.misses)
      write(root, "acme-bot/notes.txt", "not markdown")
      write(root, "acme-bot/SOUL.md.bak", "Be rude.")
      yield* until(
        Effect.map(cache.stats, (s) => s.events >= 2),
        "the watcher's events",
      )
      yield* TestClock.adjust(10_000)
      expect((yield* cache.stats).entries).toBe(1)
      expect(texts(yield* cache.read({ workspace: "acme-bot" }, "acme"))).toContain("Be kind.")
      expect((yield* count(WorkspaceCache.metrics.misses)) - misses).toBe(0)
    }),
  )

  it.scoped("cached: false (options.workspaceCache) reads the files every time and leaves the cache as it is", () =>
    Effect.gen(function* () {
      const root = yield* tempRoot(bot)
      // no watcher events can drop the entry within the test: only a read that skips the cache sees the edit
      const cache = yield* WorkspaceCache.make({ root, debounceMs: 60_000, maxAgeSeconds: 0 })
      yield* cache.read({ workspace: "acme-bot" }, "acme")
      write(root, "acme-bot/SOUL.md", "Be brief.")
      const misses = yield* count(WorkspaceCache.metrics.misses)
      expect(texts(yield* cache.read({ workspace: "acme-bot" }, "acme", false))).toContain("Be brief.")
      expect((yield* count(WorkspaceCache.metrics.misses)) - misses).toBe(1)
      // the cached entry is the one read before the edit
      expect(texts(yield* cache.read({ workspace: "acme-bot" }, "acme"))).toContain("Be kind.")
      expect((yield* cache.stats).entries).toBe(1)
    }),
  )

  it.scoped("maxAgeSeconds reads an entry again without any file event (a debounce longer than the test)", () =>
    Effect.gen(function* () {
      const root = yield* tempRoot(bot)
      const cache = yield* WorkspaceCache.make({ root, debounceMs: 3_600_000, maxAgeSeconds: 60 })
      yield* cache.read({ workspace: "acme-bot" }, "acme")
      write(root, "acme-bot/SOUL.md", "Be brief.")
      yield* until(
        Effect.map(cache.stats, (s) => s.events >= 1),
        "the watcher's event",
      )
      const expired = yield* invalidations("max_age")
      yield* TestClock.adjust("59 seconds")
      expect(texts(yield* cache.read({ workspace: "acme-bot" }, "acme"))).toContain("Be kind.")
      yield* TestClock.adjust("1 second")
      expect(texts(yield* cache.read({ workspace: "acme-bot" }, "acme"))).toContain("Be brief.")
      expect((yield* invalidations("max_age")) - expired).toBe(1)
    }),
  )

  it.effect("bounded in entries and bytes: the least recently used go first; a bundle over the byte bound is not kept", () =>
    Effect.gen(function* () {
      const files = {
        a: { "SOUL.md": "a".repeat(100) },
        b: { "SOUL.md": "b".repeat(100) },
        c: { "SOUL.md": "c".repeat(100) },
        huge: { "SOUL.md": "h".repeat(500) },
      }
      const byEntries = yield* Effect.provide(WorkspaceCache.WorkspaceCache, WorkspaceCache.layerMemory(files, { maxEntries: 2 }))
      const evicted = yield* invalidations("evicted")
      yield* byEntries.read({ workspace: "a" }, "acme")
      yield* byEntries.read({ workspace: "b" }, "acme")
      yield* byEntries.read({ workspace: "a" }, "acme") // a is now the most recently used
      yield* byEntries.read({ workspace: "c" }, "acme")
      expect(yield* byEntries.stats).toMatchObject({ entries: 2, bytes: 200 })
      expect((yield* invalidations("evicted")) - evicted).toBe(1)
      const hits = yield* count(WorkspaceCache.metrics.hits)
      yield* byEntries.read({ workspace: "a" }, "acme")
      expect((yield* count(WorkspaceCache.metrics.hits)) - hits).toBe(1)

      const byBytes = yield* Effect.provide(WorkspaceCache.WorkspaceCache, WorkspaceCache.layerMemory(files, { maxBytes: 250 }))
      yield* byBytes.read({ workspace: "a" }, "acme")
      yield* byBytes.read({ workspace: "b" }, "acme")
      yield* byBytes.read({ workspace: "c" }, "acme")
      expect(yield* byBytes.stats).toMatchObject({ entries: 2, bytes: 200 })
      expect(texts(yield* byBytes.read({ workspace: "huge" }, "acme"))).toEqual(["h".repeat(500)])
      expect(yield* byBytes.stats).toMatchObject({ entries: 2, bytes: 200 })
    }),
  )

  it.scoped("perTenant: a tenant's scopes are under <root>/<tenant>/; another tenant's are out of reach", () =>
    Effect.gen(function* () {
      const root = yield* tempRoot({
        "acme/bot/SOUL.md": "Acme's soul.",
        "globex/bot/SOUL.md": "Globex's soul.",
        "bot/SOUL.md": "Shared soul.",
      })
      const shared = yield* WorkspaceCache.make({ root })
      expect(texts(yield* shared.read({ workspace: "bot" }, "acme"))).toEqual(["Shared soul."])
      const own = yield* WorkspaceCache.make({ root, perTenant: true })
      expect(texts(yield* own.read({ workspace: "bot" }, "acme"))).toEqual(["Acme's soul."])
      expect(texts(yield* own.read({ workspace: "bot" }, "globex"))).toEqual(["Globex's soul."])
      expect((yield* own.stats).entries).toBe(2)
      // a tenant without a directory of its own reaches nothing, not even the shared scope
      expect(Errors.codeOf(yield* Effect.flip(own.read({ workspace: "bot" }, "initech")))).toBe("BadRequest")
    }),
  )

  it.scoped("two turns that miss at once both store: one entry, its bytes counted once", () =>
    Effect.gen(function* () {
      const root = yield* tempRoot({ "a/SOUL.md": "a".repeat(100) })
      const cache = yield* WorkspaceCache.make({ root })
      const missed = yield* count(WorkspaceCache.metrics.misses)
      yield* Effect.all([cache.read({ workspace: "a" }, "acme"), cache.read({ workspace: "a" }, "acme")], { concurrency: "unbounded" })
      expect((yield* count(WorkspaceCache.metrics.misses)) - missed).toBe(2)
      expect(yield* cache.stats).toMatchObject({ entries: 1, bytes: 100 })
    }),
  )

  it("the section order depends on the set of extras only: the fixed files, then the others sorted, each once", () => {
    const name = fc.constantFrom("TOOLS", "BOOT", "HEARTBEAT", "SOUL", "MEMORY", "a", "Z", "x_1")
    const extra = fc.tuple(name, fc.boolean()).map(([n, md]) => (md ? `${n}.md` : n))
    fc.assert(
      fc.property(
        fc
          .array(extra, { maxLength: 16 })
          .chain((extras) =>
            fc.tuple(fc.constant(extras), fc.shuffledSubarray(extras, { minLength: extras.length, maxLength: extras.length })),
          ),
        ([extras, shuffled]) => {
          const files = WorkspaceCache.filesOf({ workspace: "w", extras })
          expect(WorkspaceCache.filesOf({ workspace: "w", extras: shuffled })).toEqual(files)
          expect(files.slice(0, 5)).toEqual([...WorkspaceCache.FIXED_FILES])
          const rest = files.slice(5)
          expect(rest).toEqual([...new Set(rest)].sort())
          expect(rest.every((f) => f.endsWith(".md") && !(WorkspaceCache.FIXED_FILES as ReadonlyArray<string>).includes(f))).toBe(true)
          expect(new Set(rest)).toEqual(
            new Set(extras.map((e) => (e.endsWith(".md") ? e : `${e}.md`)).filter((f) => !f.match(/^(SOUL|MEMORY)\.md$/))),
          )
        },
      ),
    )
  })

  it("a watcher event is a Markdown change when the name ends in .md (any case), or when the platform gives no name", () => {
    expect(["SOUL.md", "acme/notes/x.MD", null].map(WorkspaceCache.isMarkdownEvent)).toEqual([true, true, true])
    expect(["notes.txt", "SOUL.md.bak", "acme-bot", "SOUL.md~"].map(WorkspaceCache.isMarkdownEvent)).toEqual([false, false, false, false])
  })
})
