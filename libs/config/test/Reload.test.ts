// Hot reload against hostile files and real deployment layouts: whatever a file holds, the
// reload loop survives it (rejected, counted, logged, the last good config kept, the next valid
// edit applied); the file is found again after its directory is replaced, through a symlink to
// another directory, and across Kubernetes ConfigMap `..data` swaps.
import { ConfigFile, RuntimeConfig } from "@ctxd/config"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const root = mkdtempSync(join(tmpdir(), "ctxd-reload-"))
let n = 0
const freshDir = () => {
  const dir = join(root, String(n++))
  mkdirSync(dir)
  return dir
}

/** Waits (polling, bounded) until `done` holds. */
const until = (done: () => boolean, what: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 500 && !done(); i++) yield* Effect.sleep("20 millis")
    expect(done(), what).toBe(true)
  })

const run = <A>(
  configFile: string,
  body: (config: RuntimeConfig.RuntimeConfigService, lines: ReadonlyArray<string>) => Effect.Effect<A>,
  options: RuntimeConfig.WatchOptions = {},
) => {
  const lines: Array<string> = []
  const logger = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ logLevel, message }) => lines.push(`${logLevel.label} ${String(message)}`)),
  )
  return Effect.flatMap(RuntimeConfig.RuntimeConfig, (config) => body(config, lines)).pipe(
    Effect.provide(RuntimeConfig.layer({ configFile }, { debounceMs: 20, pollMs: 200, ...options }).pipe(Layer.provide(logger))),
  )
}

const valid = (maskKeep: number) => `defaults:\n  maskKeep: ${maskKeep}\n`
const aliasBomb = () => {
  let text = "defaults:\n  agent: x\nl0: &l0 [x, x, x, x, x, x, x, x, x]\n"
  for (let i = 1; i < 9; i++) text += `l${i}: &l${i} [${Array.from({ length: 9 }, () => `*l${i - 1}`).join(", ")}]\n`
  return text
}

describe("RuntimeConfig reload: hostile files", () => {
  it.live("an unresolved alias, an alias bomb and an oversized file are each rejected; the next valid edit applies", () => {
    const file = join(freshDir(), "ctxd.yaml")
    writeFileSync(file, valid(1))
    return run(file, (config, lines) =>
      Effect.gen(function* () {
        writeFileSync(file, "defaults:\n  windowMessages: *w\n")
        yield* until(() => config.rejected() === 1, "the unresolved alias is rejected")
        expect(lines.find((l) => l.includes("config not applied"))).toContain(
          `${file}:2:19: (file): YAML: the alias *w names no anchor defined before it`,
        )

        writeFileSync(file, aliasBomb())
        yield* until(() => config.rejected() === 2, "the alias bomb is rejected")
        expect(lines.filter((l) => l.includes("config not applied"))[1]).toContain("aliases expand the file to more than")

        writeFileSync(file, `defaults:\n  agent: ${"secret".repeat(ConfigFile.limits.maxBytes / 6 + 1)}\n`)
        yield* until(() => config.rejected() === 3, "the oversized file is rejected")
        const oversized = lines.filter((l) => l.includes("config not applied"))[2]!
        expect(oversized).toMatch(new RegExp(`bytes, more than the ${ConfigFile.limits.maxBytes} a configuration file may have`))
        expect(oversized).not.toContain("secret")

        expect(config.current().defaults).toEqual({ maskKeep: 1 })
        writeFileSync(file, valid(2))
        yield* until(() => config.reloads() === 1, "the next valid edit applies")
        expect(config.current().defaults).toEqual({ maskKeep: 2 })
        expect(config.rejected()).toBe(3)
      }),
    )
  })

  it.live("the reload parses off the event loop: a slow file does not hold other work", () => {
    const file = join(freshDir(), "ctxd.yaml")
    writeFileSync(file, valid(1))
    // many small keys: the parser's slowest input per byte, well under the size cap
    let slow = "tenants:\n"
    for (let i = 0; i < 20_000; i++) slow += `  t${i}: {}\n`
    return run(file, (config) =>
      Effect.gen(function* () {
        let gap = 0
        let last = performance.now()
        const timer = setInterval(() => {
          const now = performance.now()
          gap = Math.max(gap, now - last)
          last = now
        }, 5)
        writeFileSync(file, slow)
        yield* until(() => config.reloads() === 1, "the slow file applies").pipe(Effect.ensuring(Effect.sync(() => clearInterval(timer))))
        expect(Object.keys(config.current().tenants)).toHaveLength(20_000)
        expect(gap).toBeLessThan(300)
      }),
    )
  })
})

describe("RuntimeConfig reload: layouts", () => {
  it.live("a deleted and recreated directory: the new file applies, and so does every later edit", () => {
    const dir = freshDir()
    const file = join(dir, "ctxd.yaml")
    writeFileSync(file, valid(1))
    return run(file, (config) =>
      Effect.gen(function* () {
        rmSync(dir, { recursive: true })
        mkdirSync(dir)
        writeFileSync(file, valid(2))
        yield* until(() => config.reloads() === 1, "the recreated file applies")
        writeFileSync(file, valid(3))
        yield* until(() => config.reloads() === 2, "an edit in the recreated directory applies")
        // and once more, with the file missing for longer than a debounce
        rmSync(dir, { recursive: true })
        yield* Effect.sleep("100 millis")
        mkdirSync(dir)
        writeFileSync(file, valid(4))
        yield* until(() => config.current().defaults.maskKeep === 4, "a directory back after a while applies")
        writeFileSync(file, valid(5))
        yield* until(() => config.current().defaults.maskKeep === 5, "and its edits too")
      }),
    )
  })

  it.live("a symlink to a file in another directory: in-place edits of the target apply, and so does a retargeted link", () => {
    const real = join(freshDir(), "real.yaml")
    const other = join(freshDir(), "other.yaml")
    const file = join(freshDir(), "ctxd.yaml")
    writeFileSync(real, valid(1))
    writeFileSync(other, valid(7))
    symlinkSync(real, file)
    return run(file, (config) =>
      Effect.gen(function* () {
        writeFileSync(real, valid(2))
        yield* until(() => config.reloads() === 1, "an in-place edit of the target applies")
        expect(config.current().defaults).toEqual({ maskKeep: 2 })
        // the link retargeted by a rename over it, then the new target edited in place
        symlinkSync(other, `${file}.new`)
        renameSync(`${file}.new`, file)
        yield* until(() => config.reloads() === 2, "the retargeted link applies")
        expect(config.current().defaults).toEqual({ maskKeep: 7 })
        writeFileSync(other, valid(8))
        yield* until(() => config.reloads() === 3, "an edit of the new target applies")
        writeFileSync(real, valid(9))
        yield* Effect.sleep("400 millis")
        expect(config.current().defaults).toEqual({ maskKeep: 8 })
      }),
    )
  })

  it.live("a Kubernetes ConfigMap volume: each update (a new ..data symlink renamed over the old) applies", () => {
    const dir = freshDir()
    /** What the kubelet does: a new timestamped directory, a new `..data` link to it renamed over the old, the old removed. */
    let version = 0
    let current: string | undefined
    const publish = (text: string) => {
      const next = `..2026_01_01_00_00_0${version++}.000000000`
      mkdirSync(join(dir, next))
      writeFileSync(join(dir, next, "ctxd.yaml"), text)
      symlinkSync(next, join(dir, "..data_tmp"))
      renameSync(join(dir, "..data_tmp"), join(dir, "..data"))
      if (current !== undefined) rmSync(join(dir, current), { recursive: true })
      current = next
    }
    publish(valid(1))
    symlinkSync("..data/ctxd.yaml", join(dir, "ctxd.yaml"))
    const file = join(dir, "ctxd.yaml")
    return run(file, (config) =>
      Effect.gen(function* () {
        expect(config.current().defaults).toEqual({ maskKeep: 1 })
        publish(valid(2))
        yield* until(() => config.reloads() === 1, "the first update applies")
        publish("defaults:\n  maskKeep: *nope\n")
        yield* until(() => config.rejected() === 1, "a bad update is rejected")
        publish(valid(3))
        yield* until(() => config.reloads() === 2, "the next update applies")
        expect(config.current().defaults).toEqual({ maskKeep: 3 })
      }),
    )
  })
})
