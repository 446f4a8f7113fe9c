import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger, LogLevel } from "effect"
import { cluster, eventually, TTL_MS } from "./support/Workers.ts"

describe("Membership", () => {
  it.scopedLive("workers register, heartbeat on the database clock, and leave on shutdown", () =>
    Effect.gen(function* () {
      const { db, start } = yield* cluster
      const a = yield* start({ workerId: "a", address: "ctx.worker.a" })
      const b = yield* start({ workerId: "b", address: "ctx.worker.b" })
      expect(a.membership.self).toEqual({ id: "a", address: "ctx.worker.a" })
      expect(yield* a.membership.live).toEqual([
        { id: "a", address: "ctx.worker.a" },
        { id: "b", address: "ctx.worker.b" },
      ])
      const beat = db.query<{ at: Date }>("SELECT heartbeat_at AS at FROM ctxd_workers WHERE id = 'a'")
      const first = (yield* beat).rows[0]!.at.getTime()
      yield* eventually(
        Effect.map(beat, ({ rows }) => rows[0]!.at.getTime() > first),
        TTL_MS,
        "a heartbeats",
      )
      yield* b.stop
      expect((yield* a.membership.live).map((w) => w.id)).toEqual(["a"])
    }).pipe(Effect.provide(Logger.minimumLogLevel(LogLevel.Error))),
  )

  it.scopedLive("a worker that stops heartbeating drops out after the TTL", () =>
    Effect.gen(function* () {
      const { start } = yield* cluster
      const a = yield* start({ workerId: "a" })
      const b = yield* start({ workerId: "b" })
      yield* b.cut
      const took = yield* eventually(
        Effect.map(a.membership.live, (live) => live.length === 1 && live[0]!.id === "a"),
        2 * TTL_MS,
        "b drops out",
      )
      expect(took).toBeGreaterThanOrEqual(TTL_MS - TTL_MS / 3)
    }).pipe(Effect.provide(Logger.minimumLogLevel(LogLevel.Error))),
  )
})
