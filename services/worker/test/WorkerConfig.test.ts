// CTXD_PRICES_FILE: the price table the worker hands the assembler, read and
// validated at start (a bad file is an error naming the file, row and field);
// CTXD_CONFIG_FILE: its environment keys under the environment's; CTXD_WORKSPACE_*.
import { AssemblerConfig, WorkspaceCache } from "@ctxd/assembler"
import { ConfigFile } from "@ctxd/config"
import { CostModel } from "@ctxd/context"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  flowLimits,
  memoryOptions,
  memoryToolsDefault,
  priceTable,
  providerLayer,
  WorkerConfig,
  workspaceConfig,
} from "../src/WorkerConfig.ts"
import { SessionStore } from "@ctxd/db"
import { FlowControl } from "@ctxd/nats"

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
      expect(prices.lookup("gpt-4o-mini")).toEqual({
        ...CostModel.lookup("gpt-4o-mini"),
        minCacheableTokens: 4096,
        cacheReadMultiplier: 0.25,
      })
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
        models: [
          { match: "claude", inputPerMtok: 1 },
          { match: "gpt-4o", tiers: [{ name: "in_memory", ttlSeconds: 0, writeMultiplier: 1 }] },
        ],
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
  const read = (env: Record<string, string>) =>
    Effect.withConfigProvider(memoryOptions, ConfigProvider.fromMap(new Map(Object.entries(env))))

  it.effect("unset: no option (the MemoryRetrieval defaults apply); set: the turn options' defaults", () =>
    Effect.gen(function* () {
      expect(yield* read({})).toEqual({})
      expect(
        yield* read({
          CTXD_MEMORY: "false",
          CTXD_MEMORY_TOKENS: "1500",
          CTXD_MEMORY_FRACTION: "0.1",
          CTXD_MEMORY_PLACEMENT: "system",
          CTXD_LEARNINGS_FRACTION: "0",
        }),
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
        CTXD_WORKSPACE_PER_TENANT: "true",
      })
      expect(config).toEqual({
        root: "/srv/workspaces",
        debounceMs: 50,
        maxAgeSeconds: 0,
        maxEntries: 8,
        maxBytes: 4096,
        maxFileBytes: 1024,
        perTenant: true,
      })
    }),
  )
})

describe("WorkerConfig.providerLayer (CTXD_CONFIG_FILE's environment keys)", () => {
  /** `WorkerConfig` read through `providerLayer` with `env` as the process environment (restored after). */
  /** Reads the config with `env` set over the process's environment (`undefined`: unset, so the ambient value cannot shadow a file's key). */
  const readWith = (env: Record<string, string | undefined>) =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        const saved = { ...process.env }
        for (const [key, value] of Object.entries(env)) {
          if (value === undefined) delete process.env[key]
          else process.env[key] = value
        }
        return saved
      }),
      () => Effect.provide(WorkerConfig, providerLayer),
      (saved) =>
        Effect.sync(() => {
          for (const key of Object.keys(env)) delete process.env[key]
          Object.assign(process.env, saved)
        }),
    )

  it.effect("a YAML file's keys, under the environment's; a JSON file of keys as before", () =>
    Effect.gen(function* () {
      const yaml = write(
        "ctxd.yaml",
        "NATS_URL: nats://from-file:4222\nCTXD_MAX_CONCURRENT: 8\nCTXD_DEFAULT_TOOLSETS: [github, jira]\ndefaults:\n  maskKeep: 2\n",
      )
      const fromYaml = yield* readWith({ CTXD_CONFIG_FILE: yaml, CTXD_MAX_CONCURRENT: "7", NATS_URL: undefined })
      expect(fromYaml.natsUrl).toBe("nats://from-file:4222")
      expect(fromYaml.maxConcurrent).toBe(7)
      expect(fromYaml.defaultToolsets).toEqual(["github", "jira"])
      const json = write("ctxd.json", { NATS_URL: "nats://from-json:4222", CTXD_WINDOW_MESSAGES: 30 })
      const fromJson = yield* readWith({ CTXD_CONFIG_FILE: json, NATS_URL: undefined, CTXD_WINDOW_MESSAGES: undefined })
      expect(fromJson).toMatchObject({ natsUrl: "nats://from-json:4222", windowMessages: 30 })
    }),
  )

  it.effect("group commit: CTXD_COMMIT_BATCH and CTXD_COMMIT_STATEMENTS, SessionStore's defaults when unset", () =>
    Effect.gen(function* () {
      const unset = yield* readWith({})
      expect([unset.commitBatch, unset.commitStatements]).toEqual([SessionStore.defaults.maxBatch, SessionStore.defaults.statements])
      const set = yield* readWith({ CTXD_COMMIT_BATCH: "1", CTXD_COMMIT_STATEMENTS: "3" })
      expect([set.commitBatch, set.commitStatements]).toEqual([1, 3])
    }),
  )

  it.effect("an invalid file stops the start, naming the key path and line", () =>
    Effect.gen(function* () {
      const bad = write("bad.yaml", "NATS_URL: nats://x:4222\ntenants:\n  acme:\n    share: { turnsPercent: 0 }\n")
      const error = yield* Effect.flip(readWith({ CTXD_CONFIG_FILE: bad }))
      expect(error).toBeInstanceOf(ConfigFile.InvalidConfigFile)
      expect(error.message).toContain(`${bad}:4:14: tenants.acme.share.turnsPercent: Expected a number between 1 and 100`)
    }),
  )
})

describe("WorkerConfig.flowLimits", () => {
  const limitsOf = (env: Record<string, string>) =>
    Effect.withConfigProvider(Effect.flatMap(WorkerConfig, flowLimits), ConfigProvider.fromMap(new Map(Object.entries(env))))

  it.effect("unset: FlowControl's defaults, whose commit grouping is the session store's own default", () =>
    Effect.gen(function* () {
      const limits = yield* limitsOf({})
      expect(limits).toMatchObject({ turnSlots: 4, commit: SessionStore.defaults, commitWaits: 48, requestsPerSubject: 64, mailbox: 64 })
      expect({ maxBatch: FlowControl.defaults.commitBatch, statements: FlowControl.defaults.commitStatements }).toEqual(
        SessionStore.defaults,
      )
    }),
  )

  it.effect("every flow knob reaches the one derivation", () =>
    Effect.gen(function* () {
      const env = {
        CTXD_MAX_CONCURRENT: "10",
        CTXD_MAX_INFLIGHT_BYTES: "1000",
        CTXD_COMMIT_BATCH: "0",
        CTXD_COMMIT_STATEMENTS: "3",
        CTXD_SESSION_MAILBOX: "5",
        CTXD_TENANT_BYTES_PERCENT: "25",
        CTXD_TENANT_TURNS_PERCENT: "50",
      }
      const limits = yield* limitsOf(env)
      expect(limits).toMatchObject({
        turnSlots: 10,
        inflightBytes: 1000,
        // CTXD_COMMIT_BATCH=0: batches of 1, as the group commit runs it
        commit: { maxBatch: 1, statements: 3 },
        commitWaits: 4,
        requestsPerSubject: 40 + 4,
        mailbox: 5,
        tenantShare: { maxBytes: 250, maxTurns: 5 },
      })
    }),
  )
})

describe("WorkerConfig CTXD_MEMORY_TOOLS", () => {
  const read = (env: Record<string, string>) =>
    Effect.map(Effect.withConfigProvider(WorkerConfig, ConfigProvider.fromMap(new Map(Object.entries(env)))), (c) =>
      memoryToolsDefault(c.memoryTools),
    )

  it.effect("auto leaves the turn option unset; on and off set its default; anything else is refused", () =>
    Effect.gen(function* () {
      expect(yield* read({})).toEqual({})
      expect(yield* read({ CTXD_MEMORY_TOOLS: "on" })).toEqual({ memoryTools: true })
      expect(yield* read({ CTXD_MEMORY_TOOLS: "off" })).toEqual({ memoryTools: false })
      expect(Either.isLeft(yield* Effect.either(read({ CTXD_MEMORY_TOOLS: "sometimes" })))).toBe(true)
    }),
  )
})

describe("WorkerConfig: the prefix cache (CTXD_PREFIX_CACHE_BYTES)", () => {
  const read = (env: Record<string, string>) =>
    Effect.withConfigProvider(WorkerConfig, ConfigProvider.fromMap(new Map(Object.entries(env))))
  it.effect("defaults to AssemblerConfig.defaults.prefixCacheBytes; 0 turns it off", () =>
    Effect.gen(function* () {
      expect((yield* read({})).prefixCacheBytes).toBe(AssemblerConfig.defaults.prefixCacheBytes)
      expect((yield* read({ CTXD_PREFIX_CACHE_BYTES: "0" })).prefixCacheBytes).toBe(0)
      expect((yield* read({ CTXD_PREFIX_CACHE_BYTES: "1048576" })).prefixCacheBytes).toBe(1_048_576)
    }),
  )
})
