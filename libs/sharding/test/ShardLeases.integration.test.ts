import type { Conversation } from "@ctxd/contracts"
import { Database, SessionStore } from "@ctxd/db"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Layer, Logger, LogLevel, Option, Stream } from "effect"
import { Assignment, type ShardLeases } from "../src/index.ts"
import { cluster, eventually, shardsOf, TTL_MS, type TestWorker } from "./support/Workers.ts"

const REFRESH_MS = TTL_MS / 3
const S = 256

// rounds log every change; the warnings of workers cut off on purpose are expected
const quiet = Logger.minimumLogLevel(LogLevel.Error)

const leaseRows = (db: Database.DatabaseService) =>
  db
    .query<{ shard: number; owner: string | null; epoch: string; live: boolean }>(
      "SELECT shard, owner, epoch, coalesce(expires_at > now(), false) AS live FROM ctxd_shard_leases ORDER BY shard",
    )
    .pipe(Effect.map(({ rows }) => rows.map((r) => ({ ...r, epoch: Number(r.epoch) }))))

/** Every shard owned by exactly one of `workers`, as the shared assignment says. */
const settled = (workers: ReadonlyArray<TestWorker>) =>
  Effect.gen(function* () {
    const owners = Assignment.assign(
      workers.map((w) => w.leases.self.id),
      S,
    )
    const views = yield* Effect.forEach(workers, shardsOf)
    return workers.every((w, i) => {
      const expected = Assignment.shardsOf(owners, w.leases.self.id)
      return views[i]!.length === expected.length && views[i]!.every((s, j) => s === expected[j])
    })
  })

/** No shard is owned by two workers at once (checked on every poll). */
const disjoint = (workers: ReadonlyArray<TestWorker>) =>
  Effect.gen(function* () {
    const all = (yield* Effect.forEach(workers, shardsOf)).flat()
    expect(new Set(all).size).toBe(all.length)
  })

const text = (t: string): Conversation.Message => ({ role: "user", parts: [{ type: "text", text: t }] })

/** A session name whose shard is `shard`. */
const sessionIn = (leases: ShardLeases.ShardLeases, shard: number) => {
  for (let i = 0; ; i++) if (leases.shardOf("acme", `s${i}`) === shard) return `s${i}`
}

describe("ShardLeases", () => {
  it.scopedLive("one worker owns every shard after its first round", () =>
    Effect.gen(function* () {
      const { db, start } = yield* cluster
      const a = yield* start({ workerId: "a" })
      const owned = yield* a.leases.ownedShards
      expect(owned.map((o) => o.shard)).toEqual(Array.from({ length: S }, (_, i) => i))
      expect(owned.every((o) => o.epoch === 1)).toBe(true)
      expect(yield* a.leases.fence(17)).toEqual(Option.some({ shard: 17, owner: "a", epoch: 1 }))
      expect(yield* a.leases.owner(17)).toEqual(Option.some({ id: "a", address: "a" }))
      expect(yield* a.leases.status).toEqual({ joined: true, assigned: S, owned: S, missing: 0 })
      const rows = yield* leaseRows(db)
      expect(rows.length).toBe(S)
      expect(rows.every((r) => r.owner === "a" && r.live && r.epoch === 1)).toBe(true)
      // the changes stream starts with what is owned
      const first = yield* a.leases.changes.pipe(Stream.take(S), Stream.runCollect)
      expect(Chunk.toArray(first).every((c) => c._tag === "Acquired")).toBe(true)
      // renewals keep the epoch
      yield* Effect.sleep(REFRESH_MS * 2)
      expect((yield* leaseRows(db)).every((r) => r.owner === "a" && r.epoch === 1)).toBe(true)
    }).pipe(Effect.provide(quiet)),
  )

  it.scopedLive("a second worker gets its fair half within 2 × TTL, never overlapping", () =>
    Effect.gen(function* () {
      const { start } = yield* cluster
      const a = yield* start({ workerId: "a", address: "ctx.worker.a" })
      const b = yield* start({ workerId: "b", address: "ctx.worker.b" })
      const took = yield* eventually(Effect.zipRight(disjoint([a, b]), settled([a, b])), 2 * TTL_MS, "a and b split the shards")
      expect(took).toBeLessThan(2 * TTL_MS)
      const [ofA, ofB] = [yield* shardsOf(a), yield* shardsOf(b)]
      expect(ofA.length + ofB.length).toBe(S)
      for (const n of [ofA.length, ofB.length]) expect(Math.abs(n - S / 2)).toBeLessThanOrEqual(S / 8)
      // both route the same way
      const route = (w: TestWorker, shard: number) =>
        Effect.map(
          w.leases.owner(shard),
          Option.map((o) => o.address),
        )
      expect(yield* route(b, ofA[0]!)).toEqual(Option.some("ctx.worker.a"))
      expect(yield* route(a, ofB[0]!)).toEqual(Option.some("ctx.worker.b"))
      expect(yield* b.leases.isOwner(ofA[0]!)).toBe(false)
      expect(Option.isNone(yield* b.leases.fence(ofA[0]!))).toBe(true)
    }).pipe(Effect.provide(quiet)),
  )

  it.scopedLive("a graceful stop releases at once; the other takes over within one round", () =>
    Effect.gen(function* () {
      const { db, start } = yield* cluster
      const a = yield* start({ workerId: "a" })
      const b = yield* start({ workerId: "b" })
      yield* eventually(settled([a, b]), 2 * TTL_MS, "a and b split the shards")
      const ofB = yield* b.leases.ownedShards
      const events = yield* a.leases.changes.pipe(
        Stream.filter((c) => c._tag === "Acquired" && ofB.some((o) => o.shard === c.shard)),
        Stream.take(ofB.length),
        Stream.runCollect,
        Effect.fork,
      )

      expect(yield* b.leases.status).toEqual({ joined: true, assigned: ofB.length, owned: ofB.length, missing: 0 })
      yield* b.stop
      expect(yield* b.leases.ownedShards).toEqual([])
      expect((yield* b.leases.status).joined).toBe(false)
      const released = (yield* leaseRows(db)).filter((r) => ofB.some((o) => o.shard === r.shard))
      expect(released.every((r) => r.owner === null || r.owner === "a")).toBe(true)

      const took = yield* eventually(
        Effect.map(shardsOf(a), (s) => s.length === S),
        REFRESH_MS * 2,
        "a owns every shard",
      )
      expect(took).toBeLessThanOrEqual(REFRESH_MS * 2)
      // a takeover raises the epoch
      const owned = new Map((yield* a.leases.ownedShards).map((o) => [o.shard, o.epoch]))
      for (const { shard, epoch } of ofB) expect(owned.get(shard)).toBe(epoch + 1)
      expect(Chunk.size(yield* Fiber.join(events))).toBe(ofB.length)
    }).pipe(Effect.provide(quiet)),
  )

  it.scopedLive("a killed worker's shards move after the TTL, with a new epoch; its stale writes are fenced out", () =>
    Effect.gen(function* () {
      const { db, start } = yield* cluster
      const a = yield* start({ workerId: "a" })
      const b = yield* start({ workerId: "b" })
      yield* eventually(settled([a, b]), 2 * TTL_MS, "a and b split the shards")
      const ofB = yield* b.leases.ownedShards
      const shard = ofB[0]!.shard
      const staleFence = Option.getOrThrow(yield* b.leases.fence(shard))

      yield* b.cut
      const took = yield* eventually(
        Effect.zipRight(
          disjoint([a, b]),
          Effect.map(shardsOf(a), (s) => s.length === S),
        ),
        TTL_MS + 4 * REFRESH_MS,
        "a owns every shard",
      )
      // not before b's lease could have expired (b renewed at most a round before the cut)
      expect(took).toBeGreaterThanOrEqual(TTL_MS - REFRESH_MS)
      expect(yield* b.leases.ownedShards).toEqual([])
      const owned = new Map((yield* a.leases.ownedShards).map((o) => [o.shard, o.epoch]))
      for (const { shard, epoch } of ofB) expect(owned.get(shard)).toBe(epoch + 1)

      // b's write with its old lease is rejected and not applied; a's goes through
      const session = sessionIn(a.leases, shard)
      const commit = (fence: SessionStore.Fence) =>
        Effect.flatMap(SessionStore.SessionStore, (store) =>
          store.commitTurn({
            tenant: "acme",
            session,
            turnId: `t-${fence.owner}`,
            requestHash: "h",
            expectedLastSeq: 0,
            messages: [{ message: text(fence.owner), tokens: 1, encoding: "o200k_base" }],
            reply: {},
            fence,
          }),
        ).pipe(Effect.provide(SessionStore.layer.pipe(Layer.provide(Layer.succeed(Database.Database, db)))))
      const rejected = yield* commit(staleFence).pipe(Effect.flip)
      expect(rejected).toMatchObject({ _tag: "NotOwner", shard, owner: "b" })
      expect(yield* commit(Option.getOrThrow(yield* a.leases.fence(shard)))).toEqual({ firstSeq: 1, lastSeq: 1 })
      const { rows } = yield* db.query<{ turn_id: string }>("SELECT turn_id FROM ctxd_turns")
      expect(rows.map((r) => r.turn_id)).toEqual(["t-a"])
    }).pipe(Effect.provide(quiet)),
  )

  it.scopedLive("a worker reported unreachable is declared dead once its heartbeat is late, not before", () =>
    Effect.gen(function* () {
      const { db, start } = yield* cluster
      const a = yield* start({ workerId: "a" })
      const b = yield* start({ workerId: "b" })
      yield* eventually(settled([a, b]), 2 * TTL_MS, "a and b split the shards")
      const ofB = yield* b.leases.ownedShards
      // alive (heartbeat fresh): a report changes nothing
      expect(yield* a.leases.unreachable("b")).toBe(false)
      expect(yield* a.leases.unreachable("nobody")).toBe(false)
      expect((yield* shardsOf(b)).length).toBe(ofB.length)

      // b dies (no more heartbeats); reported as forwards to it fail, it is declared dead after refresh + margin
      yield* b.cut
      const took = yield* eventually(a.leases.unreachable("b"), TTL_MS, "b declared dead")
      // ... and a owns every shard at once, before b's leases could have expired
      expect(took).toBeLessThan(TTL_MS - REFRESH_MS)
      expect((yield* shardsOf(a)).length).toBe(S)
      const owned = new Map((yield* a.leases.ownedShards).map((o) => [o.shard, o.epoch]))
      for (const { shard, epoch } of ofB) expect(owned.get(shard)).toBe(epoch + 1)
      const { rows } = yield* db.query<{ id: string }>("SELECT id FROM ctxd_workers")
      expect(rows.map((r) => r.id)).toEqual(["a"])
    }).pipe(Effect.provide(quiet)),
  )

  it.scopedLive("a worker cut off from Postgres stops owning before its lease ends", () =>
    Effect.gen(function* () {
      const { db, start } = yield* cluster
      const a = yield* start({ workerId: "a" })
      const lost = yield* a.leases.changes.pipe(
        Stream.filter((c) => c._tag === "Lost"),
        Stream.take(S),
        Stream.runCollect,
        Effect.fork,
      )
      yield* a.cut
      const took = yield* eventually(
        Effect.map(a.leases.ownedShards, (owned) => owned.length === 0),
        TTL_MS,
        "a stops owning",
      )
      // ... while the database still has every lease as a's and unexpired: nobody could have taken one yet
      const rows = yield* leaseRows(db)
      expect(rows.filter((r) => r.owner === "a" && r.live).length).toBe(S)
      expect(took).toBeLessThan(TTL_MS)
      expect(yield* a.leases.isOwner(0)).toBe(false)
      expect(Option.isNone(yield* a.leases.fence(0))).toBe(true)
      expect(Chunk.size(yield* Fiber.join(lost))).toBe(S)
    }).pipe(Effect.provide(quiet)),
  )

  it.scopedLive("a worker configured with another shard count is refused and never joins", () =>
    Effect.gen(function* () {
      const { db, start } = yield* cluster
      yield* start({ workerId: "a" })
      const error = yield* start({ workerId: "c", shards: 128 }).pipe(Effect.flip)
      expect(error).toMatchObject({ _tag: "ShardCountMismatch", configured: 128, cluster: S })
      expect(error.message).toContain("CTXD_SHARDS=256")
      const { rows } = yield* db.query<{ id: string }>("SELECT id FROM ctxd_workers")
      expect(rows.map((r) => r.id)).toEqual(["a"])
    }).pipe(Effect.provide(quiet)),
  )
})
