// The compaction store's contract (leases, summaries, audit), run against
// Postgres and against `layerMemory`, so both behave the same.
import { Migrations, SessionStore } from "@ctxd/db"
import { TestDatabase } from "@ctxd/testing"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { CompactionStore } from "../src/index.ts"

const postgres = Layer.mergeAll(SessionStore.layer, CompactionStore.layer).pipe(
  Layer.provide(Migrations.layer),
  Layer.provide(TestDatabase.layer),
)
const sessions = SessionStore.makeMemory()
const known = new Set<string>()
const memory = Layer.mergeAll(
  Layer.succeed(SessionStore.SessionStore, sessions),
  CompactionStore.layerMemory({ sessionExists: (tenant, session) => known.has(`${tenant}/${session}`) }),
)

let n = 0
/** A stored session no other test uses. */
const stored = Effect.gen(function* () {
  const session = `compaction-contract-${++n}`
  const store = yield* SessionStore.SessionStore
  yield* store.commitTurn({
    tenant: "acme",
    session,
    turnId: "t1",
    requestHash: "h",
    expectedLastSeq: 0,
    messages: [{ message: { role: "user", parts: [{ type: "text", text: "hi" }] }, tokens: 1, encoding: "o200k_base" }],
    reply: {},
  })
  known.add(`acme/${session}`)
  return session
})

const summary = (coversToSeq: number) => ({
  coversFromSeq: 1,
  coversToSeq,
  text: `up to ${coversToSeq}`,
  mode: "one_shot" as const,
  depth: 1,
})

for (const [name, stores] of [
  ["postgres", postgres],
  ["memory", memory],
] as const) {
  describe(`compaction store contract: ${name}`, () => {
    layer(stores)((it) => {
      it.effect("one lease per session with a fencing token that only grows; writes only under a held lease", () =>
        Effect.gen(function* () {
          const store = yield* CompactionStore.CompactionStore
          const session = yield* stored
          const first = yield* store.acquire("acme", session, "a", 60_000)
          expect(first.owner).toBe("a")
          expect((yield* Effect.flip(store.acquire("acme", session, "b", 60_000)))._tag).toBe("LockHeld")
          const written = yield* store.writeSummary(first, summary(5))
          expect(written).toMatchObject({ coversFromSeq: 1, coversToSeq: 5, text: "up to 5", token: first.token })
          expect((yield* Effect.flip(store.writeSummary(first, summary(5))))._tag).toBe("NotNewer")
          const renewed = yield* store.renew(first, 60_000)
          expect(renewed.token).toBe(first.token)
          yield* store.release(first)
          expect((yield* Effect.flip(store.renew(first, 60_000)))._tag).toBe("LeaseLost")
          expect((yield* Effect.flip(store.writeSummary(first, summary(9))))._tag).toBe("LeaseLost")
          const second = yield* store.acquire("acme", session, "b", 60_000)
          expect(second.token > first.token).toBe(true)
          yield* store.writeSummary(second, summary(9))
          expect(Option.getOrThrow(yield* store.latestSummary("acme", session))).toMatchObject({ coversToSeq: 9, token: second.token })
          expect(Option.isNone(yield* store.latestSummary("other", session))).toBe(true)
          expect((yield* Effect.flip(store.acquire("acme", `${session}-unknown`, "a", 60_000)))._tag).toBe("UnknownSession")
        }),
      )

      it.effect("a provider-written summary keeps its signed block verbatim; a ctxd one has none", () =>
        Effect.gen(function* () {
          const store = yield* CompactionStore.CompactionStore
          const session = yield* stored
          const lease = yield* store.acquire("acme", session, "a", 60_000)
          yield* store.writeSummary(lease, summary(3))
          expect(Option.getOrThrow(yield* store.latestSummary("acme", session)).block).toBeUndefined()
          const block = { type: "compaction", content: "up to 7", encrypted_content: "eyJ2IjoxfQ", signature: "fakecmp1.s" }
          yield* store.writeSummary(lease, { ...summary(7), text: "up to 7", block })
          expect(Option.getOrThrow(yield* store.latestSummary("acme", session))).toMatchObject({ coversToSeq: 7, text: "up to 7", block })
        }),
      )

      it.effect("the audit newest first, and a failure streak only when the last attempts all failed", () =>
        Effect.gen(function* () {
          const store = yield* CompactionStore.CompactionStore
          const session = yield* stored
          const lease = yield* store.acquire("acme", session, "a", 60_000)
          const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s))
          yield* store.audit({
            sessionId: lease.sessionId,
            outcome: "ok",
            trigger: "soft",
            durationMs: 12.4,
            finishedAt: at(1),
            token: lease.token,
          })
          yield* store.audit({
            sessionId: lease.sessionId,
            outcome: "failed",
            trigger: "soft",
            durationMs: 3,
            finishedAt: at(2),
            detail: "timeout",
          })
          yield* store.audit({ sessionId: lease.sessionId, outcome: "lock_held", trigger: "soft", durationMs: 1, finishedAt: at(3) })
          yield* store.audit({ sessionId: lease.sessionId, outcome: "failed", trigger: "hard", durationMs: 3, finishedAt: at(4) })
          const rows = yield* store.compactions("acme", session)
          expect(rows.map((r) => [r.outcome, r.trigger, r.durationMs])).toEqual([
            ["failed", "hard", 3],
            ["lock_held", "soft", 1],
            ["failed", "soft", 3],
            ["ok", "soft", 12],
          ])
          expect(rows[3]).toMatchObject({ token: lease.token, detail: null, coversToSeq: null, tokensIn: 0 })
          expect(rows[2]!.detail).toBe("timeout")
          expect((yield* store.compactions("acme", session, 1)).length).toBe(1)
          expect(yield* store.failureStreak("acme", session, 2)).toEqual([at(4), at(2)])
          expect(yield* store.failureStreak("acme", session, 3)).toEqual([])
        }),
      )
    })
  })
}
