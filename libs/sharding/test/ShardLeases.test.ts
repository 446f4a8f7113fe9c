/** The always-owner leases (`ShardLeases.layerMemory`): one process owning every shard, no database. */
import { Chunk, Effect, Option, Stream } from "effect"
import { describe, expect, it } from "vitest"
import * as ShardId from "../src/ShardId.ts"
import * as ShardLeases from "../src/ShardLeases.ts"

const leasesOf = (options: Parameters<typeof ShardLeases.makeOwner>[0] = {}) =>
  Effect.runSync(Effect.provide(ShardLeases.ShardLeases, ShardLeases.layerMemory(options)))

describe("ShardLeases.layerMemory", () => {
  it("owns every shard: fences pass, owner is itself, status full", () => {
    const leases = leasesOf({ shards: 4 })
    const shard = leases.shardOf("acme", "s1")
    expect(shard).toBe(ShardId.of("acme", "s1", 4))
    expect(Effect.runSync(leases.isOwner(shard))).toBe(true)
    expect(leases.isOwnerNow(3)).toBe(true)
    expect(Effect.runSync(leases.fence(shard))).toEqual(Option.some({ shard, owner: "in-process", epoch: 0 }))
    expect(Effect.runSync(leases.owner(shard))).toEqual(Option.some(leases.self))
    expect(Effect.runSync(leases.ownedShards).map((o) => o.shard)).toEqual([0, 1, 2, 3])
    expect(Effect.runSync(leases.status)).toEqual({ joined: true, assigned: 4, owned: 4, missing: 0 })
    expect(Effect.runSync(leases.unreachable("other"))).toBe(false)
  })

  it("announces each shard once and then ends (nothing ever changes hands)", () => {
    const changes = Effect.runSync(Stream.runCollect(leasesOf({ shards: 3 }).changes))
    expect(Chunk.toArray(changes)).toEqual([0, 1, 2].map((shard) => ({ _tag: "Acquired", shard, epoch: 0 })))
  })

  it("defaults to the fleet's shard count, so a session keeps the shard it has in a default fleet", () => {
    const leases = leasesOf()
    expect(leases.shards).toBe(ShardId.DEFAULT_SHARDS)
    expect(leases.shardOf("acme", "s1")).toBe(ShardId.of("acme", "s1"))
  })
})
