// The pruner's tick against a real Postgres (a throwaway schema): bounded work
// per tick (CTXD_PRUNE_BATCH × maxBatches), the tenants' retention read
// through the getter at every tick, the sweep resumed across ticks, the
// ctxd_pruned_total counters; and the CTXD_REPLY_RETENTION format.
import type { Tenants } from "@ctxd/contracts"
import { Database, LifecycleStore, Migrations, SessionStore } from "@ctxd/db"
import { TestDatabase } from "@ctxd/testing"
import { describe, expect, it, layer } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Metric, type MetricState } from "effect"
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
  Effect.map(
    Metric.value(Metric.tagged(Pruner.pruned, "what", what)),
    (state: MetricState.MetricState.Counter<number>) => state.count,
  )

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
      expect(set._tag === "Right" && [set.right.replyRetentionSeconds, set.right.pruneBatch, set.right.pruneIntervalMs]).toEqual([5_400, 7, 250])
      const bad = yield* read({ CTXD_REPLY_RETENTION: "a day" })
      expect(bad._tag).toBe("Left")
      expect(String(bad._tag === "Left" && bad.left)).toMatch(/24h, 90m/)
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
})
