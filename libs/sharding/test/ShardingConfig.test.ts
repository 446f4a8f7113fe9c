import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { ShardingConfig } from "../src/index.ts"

const fromEnv = (env: Record<string, string>) =>
  Effect.flatMap(ShardingConfig.config, ShardingConfig.make).pipe(
    Effect.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))),
  )

describe("ShardingConfig", () => {
  it.effect("defaults: 256 shards, TTL 15 s, refresh a third, margin a fifth, a generated id as address", () =>
    Effect.gen(function* () {
      const config = yield* fromEnv({})
      expect(config).toMatchObject({ shards: 256, leaseTtlMs: 15_000, refreshIntervalMs: 5_000, safetyMarginMs: 3_000 })
      expect(config.workerId).toMatch(/^[A-Za-z0-9_-]+-\d+-[0-9a-f]{6}$/)
      expect(config.address).toBe(config.workerId)
      expect((yield* fromEnv({})).workerId).not.toBe(config.workerId)
    }),
  )

  it.effect("reads the environment", () =>
    Effect.gen(function* () {
      const config = yield* fromEnv({
        CTXD_WORKER_ID: "w-1",
        CTXD_WORKER_ADDRESS: "ctx.v1.worker.w-1",
        CTXD_SHARDS: "64",
        CTXD_LEASE_TTL_MS: "9000",
        CTXD_LEASE_REFRESH_MS: "2000",
        CTXD_LEASE_MARGIN_MS: "1000",
      })
      expect(config).toEqual({
        workerId: "w-1",
        address: "ctx.v1.worker.w-1",
        shards: 64,
        leaseTtlMs: 9_000,
        refreshIntervalMs: 2_000,
        safetyMarginMs: 1_000,
      })
      expect((yield* fromEnv({ CTXD_LEASE_TTL_MS: "3000" })).refreshIntervalMs).toBe(1_000)
    }),
  )

  it.effect("refuses inconsistent config", () =>
    Effect.gen(function* () {
      const bad = [
        { workerId: "has space" },
        { workerId: "" },
        { shards: 0 },
        { shards: 1.5 },
        { leaseTtlMs: 10 },
        { leaseTtlMs: 3_000, refreshIntervalMs: 1_500 }, // refresh above TTL/3
        { leaseTtlMs: 3_000, refreshIntervalMs: 1_000, safetyMarginMs: 1_000 }, // 2 × refresh + margin = TTL
        { safetyMarginMs: -1 },
      ]
      for (const options of bad) {
        const error = yield* ShardingConfig.make(options).pipe(Effect.flip)
        expect(error._tag).toBe("InvalidShardingConfig")
      }
    }),
  )
})
