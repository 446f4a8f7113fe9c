// CTXD_PRICES_FILE: the price table the worker hands the assembler, read and
// validated at start (a bad file is an error naming the file, row and field).
import { AssemblerConfig, WorkspaceCache } from "@ctxd/assembler"
import { CostModel } from "@ctxd/context"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { priceTable, WorkerConfig, workspaceConfig } from "../src/WorkerConfig.ts"

const dir = mkdtempSync(join(tmpdir(), "ctxd-prices-"))
const write = (name: string, content: unknown) => {
  const path = join(dir, name)
  writeFileSync(path, typeof content === "string" ? content : JSON.stringify(content))
  return path
}
const withEnv = (env: Record<string, string>) => Effect.withConfigProvider(priceTable, ConfigProvider.fromMap(new Map(Object.entries(env))))

describe("WorkerConfig.priceTable (CTXD_PRICES_FILE)", () => {
  it.effect("unset or empty: the built-in table", () =>
    Effect.gen(function* () {
      expect(yield* withEnv({})).toBe(AssemblerConfig.defaults.prices)
      expect(yield* withEnv({ CTXD_PRICES_FILE: "" })).toBe(CostModel.builtIn)
    }),
  )

  it.effect("a valid file: its rows over the built-in table", () =>
    Effect.gen(function* () {
      const file = write("prices.json", { models: [{ match: "gpt-4o*", minCacheableTokens: 4096, cacheReadMultiplier: 0.25 }] })
      const prices = yield* withEnv({ CTXD_PRICES_FILE: file })
      expect(prices.rows).toHaveLength(1)
      expect(prices.lookup("gpt-4o-mini")).toEqual({ ...CostModel.lookup("gpt-4o-mini"), minCacheableTokens: 4096, cacheReadMultiplier: 0.25 })
      expect(prices.lookup("claude-sonnet-4-5")).toEqual(CostModel.lookup("claude-sonnet-4-5"))
    }),
  )

  it.effect("also from the CTXD_CONFIG_FILE provider (a key the environment does not set)", () =>
    Effect.gen(function* () {
      const file = write("from-config.json", { models: [{ match: "claude", inputPerMtok: 1 }] })
      const prices = yield* Effect.withConfigProvider(priceTable, ConfigProvider.fromJson({ CTXD_PRICES_FILE: file }))
      expect(prices.lookup("claude-opus-4-5").inputPerMtok).toBe(1)
    }),
  )

  it.effect("an invalid file: InvalidPricesFile naming the file, the row and the field", () =>
    Effect.gen(function* () {
      const file = write("bad.json", {
        models: [{ match: "claude", inputPerMtok: 1 }, { match: "gpt-4o", tiers: [{ name: "in_memory", ttlSeconds: 0, writeMultiplier: 1 }] }],
      })
      const error = yield* Effect.flip(withEnv({ CTXD_PRICES_FILE: file }))
      expect(error._tag).toBe("InvalidPricesFile")
      if (error._tag !== "InvalidPricesFile") return
      expect(error.file).toBe(file)
      expect(error.message).toBe(
        `CTXD_PRICES_FILE ${file} is not valid: models[1] (match "gpt-4o"), field tiers[0].ttlSeconds: Expected a number greater than or equal to 1, actual 0`,
      )
    }),
  )

  it.effect("a missing file or one that is not JSON: InvalidPricesFile naming the file", () =>
    Effect.gen(function* () {
      const missing = join(dir, "missing.json")
      const gone = yield* Effect.either(withEnv({ CTXD_PRICES_FILE: missing }))
      expect(Either.isLeft(gone) && gone.left.message).toMatch(new RegExp(`^CTXD_PRICES_FILE ${missing}: ENOENT`))
      const text = write("text.json", "models: []")
      const notJson = yield* Effect.either(withEnv({ CTXD_PRICES_FILE: text }))
      expect(Either.isLeft(notJson) && notJson.left.message).toMatch(new RegExp(`^CTXD_PRICES_FILE ${text} is not valid: not JSON: `))
    }),
  )
})

describe("WorkerConfig: workspace bundles (CTXD_WORKSPACE_*)", () => {
  const read = (env: Record<string, string>) =>
    Effect.map(Effect.withConfigProvider(WorkerConfig, ConfigProvider.fromMap(new Map(Object.entries(env)))), workspaceConfig)

  it.effect("unset: bundles off, the cache's defaults", () =>
    Effect.gen(function* () {
      expect(yield* read({})).toEqual({ root: undefined, ...WorkspaceCache.defaults })
      expect((yield* read({ CTXD_WORKSPACE_ROOT: "" })).root).toBeUndefined()
    }),
  )

  it.effect("each variable sets its knob", () =>
    Effect.gen(function* () {
      const config = yield* read({
        CTXD_WORKSPACE_ROOT: "/srv/workspaces",
        CTXD_WORKSPACE_DEBOUNCE_MS: "50",
        CTXD_WORKSPACE_MAX_AGE_SECONDS: "0",
        CTXD_WORKSPACE_CACHE_ENTRIES: "8",
        CTXD_WORKSPACE_CACHE_BYTES: "4096",
        CTXD_WORKSPACE_MAX_FILE_BYTES: "1024",
      })
      expect(config).toEqual({ root: "/srv/workspaces", debounceMs: 50, maxAgeSeconds: 0, maxEntries: 8, maxBytes: 4096, maxFileBytes: 1024 })
    }),
  )
})

describe("WorkerConfig: the prefix cache (CTXD_PREFIX_CACHE_BYTES)", () => {
  const read = (env: Record<string, string>) => Effect.withConfigProvider(WorkerConfig, ConfigProvider.fromMap(new Map(Object.entries(env))))
  it.effect("defaults to AssemblerConfig.defaults.prefixCacheBytes; 0 turns it off", () =>
    Effect.gen(function* () {
      expect((yield* read({})).prefixCacheBytes).toBe(AssemblerConfig.defaults.prefixCacheBytes)
      expect((yield* read({ CTXD_PREFIX_CACHE_BYTES: "0" })).prefixCacheBytes).toBe(0)
      expect((yield* read({ CTXD_PREFIX_CACHE_BYTES: "1048576" })).prefixCacheBytes).toBe(1_048_576)
    }),
  )
})
