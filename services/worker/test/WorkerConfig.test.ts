// CTXD_PRICES_FILE: the price table the worker hands the assembler, read and
// validated at start (a bad file is an error naming the file, row and field).
import { AssemblerConfig } from "@ctxd/assembler"
import { CostModel } from "@ctxd/context"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { memoryOptions, memoryToolsDefault, priceTable, WorkerConfig } from "../src/WorkerConfig.ts"

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

describe("WorkerConfig.memoryOptions (CTXD_MEMORY*, CTXD_LEARNINGS_FRACTION)", () => {
  const read = (env: Record<string, string>) => Effect.withConfigProvider(memoryOptions, ConfigProvider.fromMap(new Map(Object.entries(env))))

  it.effect("unset: no option (the MemoryRecall defaults apply); set: the turn options' defaults", () =>
    Effect.gen(function* () {
      expect(yield* read({})).toEqual({})
      expect(
        yield* read({ CTXD_MEMORY: "false", CTXD_MEMORY_TOKENS: "1500", CTXD_MEMORY_FRACTION: "0.1", CTXD_MEMORY_PLACEMENT: "system", CTXD_LEARNINGS_FRACTION: "0" }),
      ).toEqual({ memory: false, memoryTokens: 1500, memoryFraction: 0.1, memoryPlacement: "system", learningsFraction: 0 })
    }),
  )

  it.effect("out of range or unknown: a config error naming the key", () =>
    Effect.gen(function* () {
      expect(String(yield* Effect.flip(read({ CTXD_MEMORY_FRACTION: "1.5" })))).toContain("CTXD_MEMORY_FRACTION")
      expect(String(yield* Effect.flip(read({ CTXD_MEMORY_PLACEMENT: "middle" })))).toContain("CTXD_MEMORY_PLACEMENT")
    }),
  )
})

describe("WorkerConfig CTXD_MEMORY_TOOLS", () => {
  const read = (env: Record<string, string>) =>
    Effect.map(Effect.withConfigProvider(WorkerConfig, ConfigProvider.fromMap(new Map(Object.entries(env)))), (c) => memoryToolsDefault(c.memoryTools))

  it.effect("auto leaves the turn option unset; on and off set its default; anything else is refused", () =>
    Effect.gen(function* () {
      expect(yield* read({})).toEqual({})
      expect(yield* read({ CTXD_MEMORY_TOOLS: "on" })).toEqual({ memoryTools: true })
      expect(yield* read({ CTXD_MEMORY_TOOLS: "off" })).toEqual({ memoryTools: false })
      expect(Either.isLeft(yield* Effect.either(read({ CTXD_MEMORY_TOOLS: "sometimes" })))).toBe(true)
    }),
  )
})
