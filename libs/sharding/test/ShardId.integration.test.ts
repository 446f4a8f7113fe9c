import { Database, Migrations } from "@ctxd/db"
import { TestDatabase } from "@ctxd/testing"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { ShardId } from "../src/index.ts"

describe("ShardId", () => {
  it("is the first 4 bytes of SHA-256 of tenant/session, mod S (pinned: changing it moves every session)", () => {
    expect(ShardId.hash("acme/s1")).toBe(1_352_973_582)
    expect(ShardId.hash("t/ü")).toBe(1_032_719_699)
    expect(ShardId.of("acme", "s1")).toBe(1_352_973_582 % 256)
    expect(ShardId.of("acme", "s2", 256)).toBe(35)
    expect(ShardId.of("acme", "s1", 1)).toBe(0)
  })

  it("is in range and the same every time", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.integer({ min: 1, max: ShardId.MAX_SHARDS }), (tenant, session, s) => {
        const shard = ShardId.of(tenant, session, s)
        return Number.isInteger(shard) && shard >= 0 && shard < s && shard === ShardId.of(tenant, session, s)
      }),
    )
  })

  it("spreads look-alike session ids evenly over 256 shards", () => {
    const counts = new Array<number>(256).fill(0)
    const n = 256 * 200
    for (let i = 0; i < n; i++) counts[ShardId.of("tenant-1", `session-${i}`)]!++
    // chi-square with 255 degrees of freedom: mean 255, sd about 22.6; 370 is p < 0.0001
    const chi = counts.reduce((sum, c) => sum + (c - 200) ** 2 / 200, 0)
    expect(chi).toBeLessThan(370)
    expect(Math.min(...counts)).toBeGreaterThan(140)
    expect(Math.max(...counts)).toBeLessThan(260)
  })

  it.scoped("the first shard count claimed is the cluster's; another is refused with a clear error", () =>
    Effect.gen(function* () {
      const { url, schema } = yield* TestDatabase.make
      const db = yield* Database.make({ url, schema })
      yield* Migrations.run.pipe(Effect.provideService(Database.Database, db))
      yield* ShardId.claimShardCount(db, 256)
      yield* ShardId.claimShardCount(db, 256)
      const error = yield* ShardId.claimShardCount(db, 64).pipe(Effect.flip)
      expect(error).toMatchObject({ _tag: "ShardCountMismatch", configured: 64, cluster: 256 })
      expect(error.message).toContain("set CTXD_SHARDS=256")
      // concurrent first starts agree on one value
      const { url: url2, schema: schema2 } = yield* TestDatabase.make
      const fresh = yield* Database.make({ url: url2, schema: schema2 })
      yield* Migrations.run.pipe(Effect.provideService(Database.Database, fresh))
      const results = yield* Effect.all(
        [128, 256, 128, 512].map((s) => Effect.either(ShardId.claimShardCount(fresh, s))),
        { concurrency: "unbounded" },
      )
      const won = results.filter((r) => r._tag === "Right").length
      expect(won).toBeGreaterThanOrEqual(1)
      const { rows } = yield* fresh.query<{ value: string }>("SELECT value FROM ctxd_cluster WHERE key = 'shards'")
      expect(rows.length).toBe(1)
    }),
  )
})
