import { RuntimeConfig } from "@ctxd/config"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Logger, Metric } from "effect"
import { mkdtempSync, renameSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const dir = mkdtempSync(join(tmpdir(), "ctxd-runtime-config-"))
let n = 0
const fresh = (name: string, text: string) => {
  const file = join(dir, `${n++}-${name}`)
  writeFileSync(file, text)
  return file
}

/** Log lines written while `effect` runs. */
const logged = (lines: Array<string>) =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ logLevel, message }) => lines.push(`${logLevel.label} ${String(message)}`)),
  )

/** Waits (polling, bounded) until `done` holds. */
const until = (done: () => boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 500 && !done(); i++) yield* Effect.sleep("20 millis")
    expect(done()).toBe(true)
  })

describe("RuntimeConfig", () => {
  it.effect("load: no file is the empty snapshot; CTXD_TENANTS_FILE's sections replace the config file's, tenant by tenant", () =>
    Effect.gen(function* () {
      expect((yield* RuntimeConfig.load({})).snapshot).toEqual({ defaults: {}, tenants: {}, agents: {}, hash: "none" })
      const configFile = fresh("ctxd.yaml", "tenants:\n  acme: { maskKeep: 1, toolCompression: minify }\n  beta: { maskKeep: 2 }\n")
      const tenantsFile = fresh("tenants.json", JSON.stringify({ acme: { maskKeep: 9 } }))
      const { snapshot } = yield* RuntimeConfig.load({ configFile, tenantsFile })
      expect(snapshot.tenants).toEqual({ acme: { maskKeep: 9 }, beta: { maskKeep: 2 } })
      expect(snapshot.hash).toMatch(/^[0-9a-f]{12}$/)
      const missing = yield* Effect.either(RuntimeConfig.load({ configFile: join(dir, "nope.yaml") }))
      expect(Either.isLeft(missing) && missing.left.message).toMatch(
        /^CTXD_CONFIG_FILE .*nope\.yaml is not valid:\n.*cannot be read \(ENOENT\)/,
      )
    }),
  )

  it.live("a changed valid file applies without a restart; an invalid edit keeps the last good one and says why", () => {
    const lines: Array<string> = []
    const file = fresh("ctxd.yaml", "CTXD_MAX_CONCURRENT: 4\ndefaults:\n  maskKeep: 1\n")
    return Effect.gen(function* () {
      const config = yield* RuntimeConfig.RuntimeConfig
      const first = config.current()
      expect(first.defaults).toEqual({ maskKeep: 1 })

      writeFileSync(file, "CTXD_MAX_CONCURRENT: 4\ndefaults:\n  maskKeep: 2\n")
      yield* until(() => config.reloads() === 1)
      expect(config.current().defaults).toEqual({ maskKeep: 2 })
      const second = config.current().hash
      expect(second).not.toBe(first.hash)

      // an invalid edit: the previous config stays, the log says where, never the value
      writeFileSync(file, "CTXD_MAX_CONCURRENT: 4\ndefaults:\n  maskKeep: secret-value\n")
      yield* until(() => config.rejected() === 1)
      expect(config.current().defaults).toEqual({ maskKeep: 2 })
      expect(config.current().hash).toBe(second)
      const warning = lines.find((l) => l.includes("config not applied"))
      expect(warning).toContain(`keeping ${second}`)
      expect(warning).toContain(`${file}:3:3: defaults.maskKeep: Expected number`)
      expect(lines.join("\n")).not.toContain("secret-value")

      // replaced by a rename (as editors and Kubernetes do), with a process-level key changed
      const next = `${file}.tmp`
      writeFileSync(next, "CTXD_MAX_CONCURRENT: 16\nNATS_URL: nats://other:4222\ndefaults:\n  maskKeep: 3\n")
      renameSync(next, file)
      yield* until(() => config.reloads() === 2)
      expect(config.current().defaults).toEqual({ maskKeep: 3 })
      expect(
        lines.some((l) => l.startsWith("WARN") && l.includes("config: CTXD_MAX_CONCURRENT changed; read at start, needs a restart")),
      ).toBe(true)
      // a key the environment sets: the file's value never applies, restart or not
      expect(lines.some((l) => l.startsWith("WARN") && l.includes("config: NATS_URL changed; the environment sets them"))).toBe(true)
      expect(config.rejected()).toBe(1)
    }).pipe(
      Effect.provide(
        RuntimeConfig.layer({ configFile: file }, { debounceMs: 20, setByEnvironment: (key) => key === "NATS_URL" }).pipe(
          Layer.provide(logged(lines)),
        ),
      ),
      Effect.provide(logged(lines)),
    )
  })

  it.live("CTXD_CONFIG_DEBOUNCE_MS: a file written in two steps within the debounce is read once, whole", () => {
    const file = fresh("ctxd.yaml", "defaults:\n  maskKeep: 1\n")
    return Effect.gen(function* () {
      const config = yield* RuntimeConfig.RuntimeConfig
      // the first half of a write (not valid on its own), then the rest
      writeFileSync(file, "defaults:\n  maskKeep:")
      yield* Effect.sleep("50 millis")
      writeFileSync(file, "defaults:\n  maskKeep: 5\n")
      yield* until(() => config.reloads() === 1)
      expect(config.rejected()).toBe(0)
      expect(config.current().defaults).toEqual({ maskKeep: 5 })
    }).pipe(Effect.provide(RuntimeConfig.layer({ configFile: file }, { debounceMs: 2_000 })))
  })

  it.live("ctxd_config_reloads_total counts applied and rejected reloads", () => {
    const file = fresh("ctxd.yaml", "defaults:\n  maskKeep: 1\n")
    const counter = (result: string) => Metric.value(Metric.tagged(RuntimeConfig.reloadsTotal, "result", result))
    return Effect.gen(function* () {
      const config = yield* RuntimeConfig.RuntimeConfig
      const before = { applied: (yield* counter("applied")).count, rejected: (yield* counter("rejected")).count }
      writeFileSync(file, "defaults:\n  maskKeep: 2\n")
      yield* until(() => config.reloads() === 1)
      writeFileSync(file, "defaults: [\n")
      yield* until(() => config.rejected() === 1)
      expect((yield* counter("applied")).count).toBe(before.applied + 1)
      expect((yield* counter("rejected")).count).toBe(before.rejected + 1)
    }).pipe(Effect.provide(RuntimeConfig.layer({ configFile: file }, { debounceMs: 20 })))
  })

  it.live("an invalid file stops the start", () =>
    Effect.gen(function* () {
      const file = fresh("bad.yaml", "defaults:\n  windowMessages: 0\n")
      const error = yield* Effect.flip(Effect.scoped(RuntimeConfig.make({ configFile: file })))
      expect(error.message).toBe(
        `CTXD_CONFIG_FILE ${file} is not valid:\n${file}:2:3: defaults.windowMessages: Expected a number greater than or equal to 1`,
      )
    }),
  )

  it.effect("layerMemory: a test sets the sections; each set counts as a reload", () =>
    Effect.sync(() => {
      const config = RuntimeConfig.memory({ agents: { coder: { maskKeep: 1 } } })
      const before = config.current().hash
      config.set({ agents: { coder: { maskKeep: 2 } } })
      expect(config.current().agents).toEqual({ coder: { maskKeep: 2 } })
      expect(config.current().hash).not.toBe(before)
      expect(config.reloads()).toBe(1)
    }),
  )
})
