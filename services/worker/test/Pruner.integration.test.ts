// The pruner's tick against a real Postgres (a throwaway schema): bounded work
// per tick (CTXD_PRUNE_BATCH × maxBatches), the tenants' retention read
// through the getter at every tick, the sweep resumed across ticks, the
// ctxd_pruned_total counters; the turn records' day partitions dropped past
// CTXD_TURN_RETENTION; and the CTXD_REPLY_RETENTION / CTXD_TURN_RETENTION formats.
import type { Tenants } from "@ctxd/contracts"
import { Database, LifecycleStore, Migrations, Partitions, SessionStore } from "@ctxd/db"
import { TestDatabase } from "@ctxd/testing"
import { describe, expect, it, layer } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Metric, type MetricState, Option, TestClock } from "effect"
import * as Pruner from "../src/Pruner.ts"
import { WorkerConfig } from "../src/WorkerConfig.ts"

const Stores = Layer.mergeAll(SessionStore.layer, LifecycleStore.layer).pipe(
  Layer.provide(Migrations.layer),
  Layer.provideMerge(TestDatabase.layer),
)

const turns = (tenant: string, session: string, n: number) =>
  Effect.gen(function* () {
    const store = yield* SessionStore.SessionStore
    for (let i = 0; i < n; i++) {
      yield* store.commitTurn({
        tenant,
        session,
        turnId: `t${i}`,
        requestHash: `h${i}`,
        expectedLastSeq: i,
        messages: [{ message: { role: "user", parts: [{ type: "text", text: `q${i}` }] }, tokens: 2, encoding: "o200k_base" }],
        reply: { ok: true, turnId: `t${i}` },
      })
    }
  })

const sql = (text: string, params?: ReadonlyArray<unknown>) => Effect.flatMap(Database.Database, (db) => db.query(text, params))

const ageAll = (hours: number) =>
  Effect.zipRight(
    sql(`UPDATE ctxd_turns SET created_at = created_at - make_interval(hours => $1)`, [hours]),
    sql(`UPDATE ctxd_sessions SET updated_at = updated_at - make_interval(hours => $1)`, [hours]),
  )

const kept = Effect.map(sql(`SELECT count(*) AS n FROM ctxd_turns WHERE reply_z IS NOT NULL`), (r) => Number(r.rows[0]!.n))

const counter = (what: string) =>
  Effect.map(Metric.value(Metric.tagged(Pruner.pruned, "what", what)), (state: MetricState.MetricState.Counter<number>) => state.count)

// no pause between batches: the test clock does not move
const options: Pruner.Options = { ...Pruner.defaults, pauseMs: 0 }

describe("Pruner.parseRetention (CTXD_REPLY_RETENTION)", () => {
  it("reads whole numbers with s, m, h, d, bare seconds, and off", () => {
    expect(Pruner.parseRetention("24h")).toBe(86_400)
    expect(Pruner.parseRetention("90m")).toBe(5_400)
    expect(Pruner.parseRetention("3600s")).toBe(3_600)
    expect(Pruner.parseRetention("3600")).toBe(3_600)
    expect(Pruner.parseRetention("7d")).toBe(604_800)
    expect(Pruner.parseRetention("off")).toBeUndefined()
    for (const bad of ["", "0", "0h", "1.5h", "24 hours", "-1", "h"]) expect(Pruner.parseRetention(bad), bad).toBeInstanceOf(Error)
  })

  it.effect("the worker's config: default 24 h, a value, and a refusal naming the format", () =>
    Effect.gen(function* () {
      const read = (env: Record<string, string>) =>
        Effect.withConfigProvider(Effect.either(WorkerConfig), ConfigProvider.fromMap(new Map(Object.entries(env))))
      const byDefault = yield* read({})
      expect(byDefault._tag === "Right" && byDefault.right.replyRetentionSeconds).toBe(86_400)
      const set = yield* read({ CTXD_REPLY_RETENTION: "90m", CTXD_PRUNE_BATCH: "7", CTXD_PRUNE_INTERVAL_MS: "250" })
      expect(set._tag === "Right" && [set.right.replyRetentionSeconds, set.right.pruneBatch, set.right.pruneIntervalMs]).toEqual([
        5_400, 7, 250,
      ])
      const bad = yield* read({ CTXD_REPLY_RETENTION: "a day" })
      expect(bad._tag).toBe("Left")
      expect(String(bad._tag === "Left" && bad.left)).toMatch(/24h, 90m/)
    }),
  )
})

describe("Pruner.turnRetention (CTXD_TURN_RETENTION)", () => {
  it("defaults to 7 days, never below the reply window, and off while replies are kept forever", () => {
    expect(Pruner.turnRetention(undefined, 86_400)).toBe(7 * 86_400)
    expect(Pruner.turnRetention(undefined, 30 * 86_400)).toBe(30 * 86_400)
    expect(Pruner.turnRetention(undefined, undefined)).toBeUndefined()
    expect(Pruner.turnRetention("2d", 86_400)).toBe(2 * 86_400)
    expect(Pruner.turnRetention("off", 86_400)).toBeUndefined()
    expect(Pruner.turnRetention("off", undefined)).toBeUndefined()
    // shorter than the reply window, or set while replies are kept forever: refused
    expect(String(Pruner.turnRetention("1h", 86_400))).toMatch(/must not be shorter than CTXD_REPLY_RETENTION/)
    expect(String(Pruner.turnRetention("30d", undefined))).toMatch(/must be off while CTXD_REPLY_RETENTION is off/)
    expect(Pruner.turnRetention("a week", 86_400)).toBeInstanceOf(Error)
  })

  it.effect("the worker's config: the default, a value, and refusals that stop the start", () =>
    Effect.gen(function* () {
      const read = (env: Record<string, string>) =>
        Effect.withConfigProvider(Effect.either(WorkerConfig), ConfigProvider.fromMap(new Map(Object.entries(env))))
      const seconds = (env: Record<string, string>) =>
        Effect.map(read(env), (r) => (r._tag === "Right" ? r.right.turnRetentionSeconds : r.left))
      expect(yield* seconds({})).toBe(7 * 86_400)
      expect(yield* seconds({ CTXD_TURN_RETENTION: "14d" })).toBe(14 * 86_400)
      expect(yield* seconds({ CTXD_REPLY_RETENTION: "off" })).toBeUndefined()
      expect(String(yield* seconds({ CTXD_TURN_RETENTION: "12h" }))).toMatch(/CTXD_TURN_RETENTION.*shorter than CTXD_REPLY_RETENTION/)
      expect(String(yield* seconds({ CTXD_REPLY_RETENTION: "off", CTXD_TURN_RETENTION: "7d" }))).toMatch(/must be off/)
    }),
  )
})

describe("Pruner", () => {
  layer(Stores, { timeout: 60_000 })("on a migrated throwaway schema", (it) => {
    it.effect("prunes at most batch × maxBatches replies per tick, the rest at the next ticks", () =>
      Effect.gen(function* () {
        yield* turns("p", "s1", 9)
        yield* turns("p", "s2", 4)
        yield* ageAll(25)
        yield* turns("p", "s3", 2)
        const before = yield* counter("replies")
        const tick = yield* Pruner.make({ ...options, batch: 2, maxBatches: 3 }, () => ({}))
        expect((yield* tick).replies).toBe(6)
        expect((yield* tick).replies).toBe(6)
        expect((yield* tick).replies).toBe(1)
        expect((yield* tick).replies).toBe(0)
        // the two recent turns keep their replies
        expect(yield* kept).toBe(2)
        expect((yield* counter("replies")) - before).toBe(13)
        // off: nothing pruned
        yield* ageAll(25)
        const off = yield* Pruner.make({ ...options, replyRetentionSeconds: undefined }, () => ({}))
        expect((yield* off).replies).toBe(0)
        expect(yield* kept).toBe(2)
      }),
    )

    it.effect("deletes idle sessions of the tenants with retentionDays, read anew at every tick", () =>
      Effect.gen(function* () {
        yield* turns("r1", "idle", 3)
        yield* turns("r2", "idle", 2)
        yield* ageAll(24 * 3)
        yield* turns("r1", "active", 1)
        let sections: Record<string, Tenants.Tenant> = {}
        const tick = yield* Pruner.make({ ...options, replyRetentionSeconds: undefined }, () => sections)
        expect((yield* tick).removed).toEqual(LifecycleStore.NONE)
        const before = { sessions: yield* counter("sessions"), messages: yield* counter("messages") }
        sections = { r1: { retentionDays: 2 }, r2: { retentionDays: 5 } }
        expect((yield* tick).removed).toMatchObject({ sessions: 1, messages: 3, turns: 3 })
        expect((yield* counter("sessions")) - before.sessions).toBe(1)
        expect((yield* counter("messages")) - before.messages).toBe(3)
        const left = yield* sql(`SELECT tenant, session FROM ctxd_sessions WHERE tenant IN ('r1', 'r2') ORDER BY tenant, session`)
        expect(left.rows).toEqual([
          { tenant: "r1", session: "active" },
          { tenant: "r2", session: "idle" },
        ])
        // the getter's next value: r2 down to 1 day
        sections = { r2: { retentionDays: 1 } }
        expect((yield* tick).removed).toMatchObject({ sessions: 1, messages: 2 })
      }),
    )

    it.effect("sweeps the sessions in steps of sweepSpan ids, resuming at the next tick", () =>
      Effect.gen(function* () {
        for (let i = 0; i < 6; i++) yield* turns("sw", `s${i}`, 1)
        yield* ageAll(24 * 3)
        const { rows } = yield* sql(`SELECT min(id)::text AS lo, max(id)::text AS hi FROM ctxd_sessions WHERE tenant = 'sw'`)
        const lo = Number(rows[0]!.lo)
        const hi = Number(rows[0]!.hi)
        expect(hi - lo).toBe(5)
        // one step of `lo` ids per tick: the first tick reaches up to the first sw session only
        const tick = yield* Pruner.make({ ...options, replyRetentionSeconds: undefined, sweepSpan: lo, maxSweepSteps: 1 }, () => ({
          sw: { retentionDays: 1 },
        }))
        const removed: Array<number> = []
        for (let i = 0; i < 8; i++) removed.push((yield* tick).removed.sessions)
        expect(removed.reduce((a, b) => a + b, 0)).toBe(6)
        expect(removed[0]).toBe(1)
        expect(removed.filter((n) => n > 0).length).toBeGreaterThan(1)
      }),
    )
  })

  // a schema of its own: dropping today's partition must not reach the tests above
  layer(Stores, { timeout: 60_000 })("turn records past CTXD_TURN_RETENTION", (it) => {
    it.effect("drops the day partitions of ctxd_turns whose turns are all older, by the clock; messages stay, commits go on", () =>
      Effect.gen(function* () {
        yield* turns("k", "s1", 2)
        const store = yield* SessionStore.SessionStore
        const day = 86_400_000
        const midnight = Math.floor(Date.now() / day) * day
        const name = (d: number) => `ctxd_turns_p${new Date(midnight + d * day).toISOString().slice(0, 10).replaceAll("-", "")}`
        const partitions = Effect.map(Partitions.status, (s) => s.turns.map((p) => p.name))
        expect(yield* partitions).toEqual(expect.arrayContaining([name(0), name(1), name(2), name(3)]))
        const before = yield* counter("turn_partitions")
        const tick = yield* Pruner.make({ ...options, turnRetentionSeconds: 7 * 86_400 }, () => ({}))
        // today, by the clock: nothing is 7 days old
        yield* TestClock.setTime(Date.now())
        expect((yield* tick).turnPartitions).toBe(0)
        // 9 days on: today's and tomorrow's partitions (ending at most 7 days ago) go, with the pre-partitioning one
        yield* TestClock.setTime(midnight + 9 * day)
        expect((yield* tick).turnPartitions).toBe(3)
        const left = yield* partitions
        expect(left).not.toContain(name(0))
        expect(left).not.toContain(name(1))
        expect(left).not.toContain("ctxd_turns_v1")
        expect(left).toEqual(expect.arrayContaining([name(2), name(3), "ctxd_turns_default"]))
        expect((yield* counter("turn_partitions")) - before).toBe(3)
        // the turn records are gone, the history is not; the next turn commits (into the default partition)
        expect(Option.isNone(yield* store.findTurn("k", "s1", "t1"))).toBe(true)
        expect((yield* store.loadMessages("k", "s1", 0)).length).toBe(2)
        yield* store.commitTurn({
          tenant: "k",
          session: "s1",
          turnId: "t2",
          requestHash: "h2",
          expectedLastSeq: 2,
          messages: [{ message: { role: "user", parts: [{ type: "text", text: "q2" }] }, tokens: 2, encoding: "o200k_base" }],
          reply: { ok: true, turnId: "t2" },
        })
        // idempotent; off drops nothing
        expect((yield* tick).turnPartitions).toBe(0)
        yield* TestClock.setTime(midnight + 30 * day)
        const off = yield* Pruner.make({ ...options, turnRetentionSeconds: undefined }, () => ({}))
        expect((yield* off).turnPartitions).toBe(0)
        expect(yield* partitions).toContain(name(3))
      }),
    )
  })
})
