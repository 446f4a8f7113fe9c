/**
 * One compaction end to end on real Postgres and the real SDKs against the
 * fake provider: the lease race, provider failure, the cooldown, the
 * fencing token, the audit.
 */
import { Database, SessionStore } from "@ctxd/db"
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, beforeEach, describe, expect, layer } from "@effect/vitest"
import { Effect, Option, Schedule, TestClock, TestServices } from "effect"
import { CompactionStore, Metrics } from "../src/index.ts"
import * as Fixture from "./Fixture.ts"

let server: FakeProvider.FakeProviderServer
beforeAll(async () => {
  server = await FakeProvider.start()
  Fixture.warmUp()
})
afterAll(() => server.close())
beforeEach(() => server.reset())

const providerCalls = () => server.requests().filter((r) => r.endpoint === "chat_completions" || r.endpoint === "messages")

const store = CompactionStore.CompactionStore
/** Real time for tests that wait on leases and latency. */
const live = TestServices.provideLive

layer(Fixture.Stores)((it) => {
  describe("Compactor", () => {
    it.effect("two compactors race for one session: one summary, the other lock_held", () =>
      live(
        Effect.gen(function* () {
          const session = Fixture.fresh()
          const messages = Fixture.tauMessages(150)
          yield* Fixture.storeSession("acme", session, messages)
          server.control({ latencyMs: 400 })
          const run = (owner: string) =>
            Effect.flatMap(Fixture.compactor({ owner }), (c) =>
              c.compact({ tenant: "acme", session, model: Fixture.MODEL, trigger: "hard" }),
            ).pipe(Effect.provide(Fixture.summarizer(server)))
          const okBefore = yield* Metrics.count("ok")
          const results = yield* Effect.all([run("compactor-a"), run("compactor-b")], { concurrency: "unbounded" })
          expect(results.map((r) => r.outcome).sort()).toEqual(["lock_held", "ok"])
          expect(providerCalls()).toHaveLength(1)
          const winner = results.find((r) => r.outcome === "ok")!
          const loser = results.find((r) => r.outcome === "lock_held")!
          const live = Option.getOrThrow(yield* Effect.flatMap(store, (s) => s.latestSummary("acme", session)))
          expect({ id: live.id, coversFromSeq: live.coversFromSeq, mode: live.mode, depth: live.depth, token: String(live.token) }).toEqual(
            {
              id: winner.summary!.id,
              coversFromSeq: 1,
              mode: "rolling",
              depth: 1,
              token: "1",
            },
          )
          expect(live.coversToSeq).toBeLessThan(messages.length)
          expect(live.text).toMatch(/^- Summary of \d+ messages/)
          const audit = yield* Effect.flatMap(store, (s) => s.compactions("acme", session))
          expect(audit.map((a) => a.outcome).sort()).toEqual(["lock_held", "ok"])
          // the loser is told to come back when the winner's lease runs out: after it gave up, within one TTL of the winner's acquire
          const held = audit.find((a) => a.outcome === "lock_held")!
          expect({ owner: held.owner, token: held.token }).toEqual({
            owner: loser === results[0] ? "compactor-a" : "compactor-b",
            token: null,
          })
          expect(loser.retryAt!.getTime()).toBeGreaterThan(held.finishedAt.getTime())
          expect(loser.retryAt!.getTime()).toBeLessThanOrEqual(held.finishedAt.getTime() + Fixture.LEASE_TTL_MS)
          const ok = audit.find((a) => a.outcome === "ok")!
          expect({ ...ok, token: String(ok.token) }).toMatchObject({
            trigger: "hard",
            coversFromSeq: 1,
            coversToSeq: live.coversToSeq,
            summaryId: live.id,
            mode: "rolling",
            depth: 1,
            model: "gpt-4o",
            token: "1",
          })
          expect(ok.tokensIn).toBeGreaterThan(0)
          expect(ok.tokensOut).toBeGreaterThan(0)
          expect(ok.durationMs).toBeGreaterThanOrEqual(400)
          expect(yield* Metrics.count("ok")).toBe(okBefore + 1)
          // the next compaction rolls over the live summary
          server.control({ latencyMs: 0 })
          yield* Effect.flatMap(SessionStore.SessionStore, (s) =>
            s.commitTurn({
              tenant: "acme",
              session,
              turnId: "more",
              requestHash: "h2",
              expectedLastSeq: messages.length,
              messages: Fixture.tauMessages(80, 40).map((message) => ({
                message,
                tokens: Fixture.counter.countMessage(message, "o200k_base"),
                encoding: "o200k_base",
              })),
              reply: {},
            }),
          )
          const next = yield* run("compactor-a")
          expect(next.outcome).toBe("ok")
          expect({ coversFromSeq: next.summary?.coversFromSeq, token: String(next.summary?.token) }).toEqual({
            coversFromSeq: 1,
            token: "2",
          }) // a lock_held attempt takes no token
          expect(next.summary!.coversToSeq).toBeGreaterThan(live.coversToSeq)
          const prompt = String((providerCalls().at(-1)!.body as { messages: Array<{ content: string }> }).messages[1]!.content)
          expect(prompt).toContain(`<previous_summary>\n${live.text}`)
          expect(prompt).toContain(`<conversation messages="${live.coversToSeq + 1}–`)
        }),
      ),
    )

    it.effect("the provider failing: history unchanged, no summary, outcome failed", () =>
      live(
        Effect.gen(function* () {
          const session = Fixture.fresh()
          yield* Fixture.storeSession("acme", session, Fixture.tauMessages(150))
          const before = yield* Effect.flatMap(SessionStore.SessionStore, (s) => s.loadMessages("acme", session, 0))
          server.control({ failNext: 100 })
          const compactor = yield* Fixture.compactor().pipe(Effect.provide(Fixture.summarizer(server)))
          const result = yield* compactor.compact({ tenant: "acme", session, model: Fixture.MODEL, trigger: "over_window" })
          expect(result.outcome).toBe("failed")
          expect(result.detail).toMatch(/server/)
          expect(providerCalls()).toHaveLength(4) // the call and its 3 retries
          expect(yield* Effect.flatMap(SessionStore.SessionStore, (s) => s.loadMessages("acme", session, 0))).toEqual(before)
          expect(Option.isNone(yield* Effect.flatMap(store, (s) => s.latestSummary("acme", session)))).toBe(true)
          const [audit] = yield* Effect.flatMap(store, (s) => s.compactions("acme", session))
          expect(audit).toMatchObject({ outcome: "failed", trigger: "over_window", summaryId: null, coversFromSeq: 1 })
          // the lease was released: another attempt can take it at once
          server.control({ failNext: 0 })
          expect((yield* compactor.compact({ tenant: "acme", session, model: Fixture.MODEL, trigger: "manual" })).outcome).toBe("ok")
        }),
      ),
    )

    it.effect("no_boundary, not_needed, tool_result_truncated, and an unknown session", () =>
      live(
        Effect.gen(function* () {
          const compactor = yield* Fixture.compactor().pipe(Effect.provide(Fixture.summarizer(server, { toolResultMaxPct: 0.01 })))
          const small = Fixture.fresh()
          yield* Fixture.storeSession("acme", small, Fixture.tauMessages(6))
          const noBoundary = yield* compactor.compact({ tenant: "acme", session: small, model: Fixture.MODEL, trigger: "manual" })
          expect(noBoundary).toMatchObject({ outcome: "no_boundary" })
          expect(noBoundary.detail).toMatch(/fit in the kept tail/)
          expect((yield* compactor.compact({ tenant: "acme", session: small, model: Fixture.MODEL, trigger: "soft" })).outcome).toBe(
            "not_needed",
          )
          const audit = yield* Effect.flatMap(store, (s) => s.compactions("acme", small))
          expect(audit.map((a) => a.outcome)).toEqual(["no_boundary"])

          // from tau-airline-17-3 on: tool results of 2-3 kB in the folded part, over 1 % of the window
          const big = Fixture.fresh()
          yield* Fixture.storeSession("acme", big, Fixture.tauMessages(150, 6))
          const truncated = yield* compactor.compact({
            tenant: "acme",
            session: big,
            model: Fixture.MODEL,
            trigger: "hard",
            fixedTokens: 1_000,
          })
          expect(truncated.outcome).toBe("tool_result_truncated")
          expect(truncated.detail).toMatch(/tool result\(s\) truncated/)

          const unknown = yield* Effect.flip(
            compactor.compact({ tenant: "acme", session: "nobody", model: Fixture.MODEL, trigger: "manual" }),
          )
          expect(unknown).toMatchObject({ _tag: "CompactionError", reason: "unknown_session" })
        }),
      ),
    )
  })

  describe("CompactionStore", () => {
    it.effect("leases: held until the TTL (database clock), the fencing token grows on every acquire, stale writes are rejected", () =>
      live(
        Effect.gen(function* () {
          const s = yield* store
          const session = Fixture.fresh()
          yield* Fixture.storeSession("acme", session, Fixture.tauMessages(4))
          const summary = { coversFromSeq: 1, coversToSeq: 2, text: "- a", mode: "rolling" as const, depth: 1 }

          // long enough that b's attempt right after comes before the expiry even when the machine stalls for seconds
          const a = yield* s.acquire("acme", session, "a", 5_000)
          expect(String(a.token)).toBe("1")
          const refused = yield* Effect.flip(s.acquire("acme", session, "b", 800))
          expect(refused).toMatchObject({ _tag: "LockHeld", owner: "a" })
          expect(refused._tag === "LockHeld" && refused.expiresAt.getTime()).toBe(a.expiresAt.getTime())
          // held until a's expiry by the database clock, and free from then on
          const db = yield* Database.Database
          yield* db.query<{ past: boolean }>("SELECT clock_timestamp() > $1 AS past", [a.expiresAt]).pipe(
            Effect.map(({ rows }) => rows[0]!.past),
            Effect.repeat({ until: (past) => past, schedule: Schedule.spaced("100 millis") }),
          )
          const b = yield* s.acquire("acme", session, "b", 60_000)
          expect(String(b.token)).toBe("2")
          // a's token is stale: its write and its renewal are rejected, b's write lands
          const stale = yield* Effect.flip(s.writeSummary(a, summary))
          expect({ _tag: stale._tag, token: stale._tag === "LeaseLost" ? String(stale.token) : undefined }).toEqual({
            _tag: "LeaseLost",
            token: "1",
          })
          expect(yield* Effect.flip(s.renew(a, 1_000))).toMatchObject({ _tag: "LeaseLost" })
          const written = yield* s.writeSummary(b, summary)
          expect({ coversToSeq: written.coversToSeq, token: String(written.token) }).toEqual({ coversToSeq: 2, token: "2" })
          // a summary must cover more than the live one
          expect(yield* Effect.flip(s.writeSummary(b, { ...summary, coversToSeq: 2 }))).toMatchObject({ _tag: "NotNewer", liveToSeq: 2 })
          // a release ends the lease but keeps the token growing
          yield* s.release(b)
          expect(yield* Effect.flip(s.writeSummary(b, { ...summary, coversToSeq: 3 }))).toMatchObject({ _tag: "LeaseLost" })
          const c = yield* s.acquire("acme", session, "c", 60_000)
          expect(String(c.token)).toBe("3")
          const renewed = yield* s.renew(c, 120_000)
          expect(renewed.expiresAt.getTime()).toBeGreaterThan(c.expiresAt.getTime())
          expect(yield* Effect.flip(s.acquire("acme", "nobody", "c", 1_000))).toMatchObject({ _tag: "UnknownSession" })
        }),
      ),
    )
  })

  describe("Compactor cooldown", () => {
    it.effect("after 3 failed compactions in a row the session cools down (TestClock)", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(Date.now())
        const session = Fixture.fresh()
        yield* Fixture.storeSession("acme", session, Fixture.tauMessages(150))
        const compactor = yield* Fixture.compactor({ cooldownMs: 600_000 }).pipe(Effect.provide(Fixture.summarizer(server, { retries: 0 })))
        const compact = (trigger: "hard" | "manual" = "hard") =>
          compactor.compact({ tenant: "acme", session, model: Fixture.MODEL, trigger })
        server.control({ failNext: 3 })
        for (let i = 0; i < 3; i++) {
          expect((yield* compact()).outcome).toBe("failed")
          yield* TestClock.adjust("1 minute")
        }
        expect(providerCalls()).toHaveLength(3)
        const cooling = yield* compact()
        expect(cooling.outcome).toBe("cooldown")
        expect(cooling.retryAt!.getTime()).toBe(
          Date.parse((yield* Effect.flatMap(store, (s) => s.compactions("acme", session)))[0]!.finishedAt.toISOString()) + 600_000,
        )
        yield* TestClock.adjust("7 minutes") // 9 minutes after the last failure
        expect((yield* compact()).outcome).toBe("cooldown")
        expect(providerCalls()).toHaveLength(3)
        yield* TestClock.adjust("2 minutes")
        expect((yield* compact()).outcome).toBe("ok")
        expect(providerCalls()).toHaveLength(4)
        // cooldown rows are not audited; the streak is broken by the success
        const audit = yield* Effect.flatMap(store, (s) => s.compactions("acme", session))
        expect(audit.map((a) => a.outcome)).toEqual(["ok", "failed", "failed", "failed"])
      }),
    )

    it.effect("a manual compaction ignores the cooldown", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(Date.now())
        const session = Fixture.fresh()
        yield* Fixture.storeSession("acme", session, Fixture.tauMessages(150))
        const compactor = yield* Fixture.compactor().pipe(Effect.provide(Fixture.summarizer(server, { retries: 0 })))
        server.control({ failNext: 3 })
        for (let i = 0; i < 3; i++) yield* compactor.compact({ tenant: "acme", session, model: Fixture.MODEL, trigger: "soft" })
        expect((yield* compactor.compact({ tenant: "acme", session, model: Fixture.MODEL, trigger: "soft" })).outcome).toBe("cooldown")
        expect((yield* compactor.compact({ tenant: "acme", session, model: Fixture.MODEL, trigger: "manual" })).outcome).toBe("ok")
      }),
    )
  })
})
