/**
 * The JetStream work queue and the manual endpoint on a real NATS server,
 * real Postgres and the fake provider: dedup, ack after the outcome, and a
 * compactor killed mid-call whose job another compactor completes after
 * the lease TTL.
 */
import { Compact, Subjects } from "@ctxd/contracts"
import { Json, Request } from "@ctxd/nats"
import { FakeProvider, TestNats } from "@ctxd/testing"
import { afterAll, beforeAll, beforeEach, describe, expect, layer } from "@effect/vitest"
import { Database } from "@ctxd/db"
import { Effect, Either, Layer, Option, Schema, TestServices } from "effect"
import { spawn } from "node:child_process"
import { join } from "node:path"
import { CompactEndpoint, CompactionStore, Compactor, WorkQueue } from "../src/index.ts"
import * as Fixture from "./Fixture.ts"
import { cleanup, pending, QUEUE, VICTIM } from "./Queue.ts"

let server: FakeProvider.FakeProviderServer
beforeAll(async () => {
  server = await FakeProvider.start()
  Fixture.warmUp()
})
afterAll(() => server.close())
beforeEach(() => server.reset())

const live = TestServices.provideLive
const providerCalls = () => server.requests().filter((r) => r.endpoint === "chat_completions")

/** Polls `check` every 100 ms until it yields a value, for at most `ms`. */
const poll = <A, E, R>(check: Effect.Effect<A | undefined, E, R>, ms = 15_000): Effect.Effect<A, E | "timeout", R> =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (Date.now() < deadline) {
      const value = yield* check
      if (value !== undefined) return value
      yield* Effect.sleep("100 millis")
    }
    return yield* Effect.fail("timeout" as const)
  })

const latest = (session: string) =>
  Effect.flatMap(CompactionStore.CompactionStore, (s) => s.latestSummary("acme", session)).pipe(Effect.map(Option.getOrUndefined))

const job = (session: string): WorkQueue.Job => ({ tenant: "acme", session, afterSeq: 0, trigger: "hard", model: Fixture.MODEL })

layer(Layer.merge(Fixture.Stores, TestNats.layer("ctxd-compactor-test")))((it) => {
  describe("compaction work queue", () => {
    it.scoped(
      "jobs are deduplicated per session and live summary; a job is acked once its outcome is recorded",
      () =>
        live(
          Effect.gen(function* () {
            const options = { subjects: Subjects.make(TestNats.uniqueRoot()), config: QUEUE }
            yield* cleanup(options)
            const session = Fixture.fresh()
            yield* Fixture.storeSession("acme", session, Fixture.tauMessages(150))
            yield* WorkQueue.ensure(options)
            expect(yield* WorkQueue.enqueue(options, job(session))).toMatchObject({ duplicate: false })
            expect(yield* WorkQueue.enqueue(options, job(session))).toMatchObject({ duplicate: true })
            expect(yield* pending(options)).toBe(1)
            const compactor = yield* Fixture.compactor({ owner: "worker-1" }).pipe(Effect.provide(Fixture.summarizer(server)))
            yield* CompactEndpoint.serveJobs(options).pipe(Effect.provideService(Compactor.Compactor, compactor))
            const summary = yield* poll(latest(session), 30_000)
            expect({ coversFromSeq: summary.coversFromSeq, mode: summary.mode }).toEqual({ coversFromSeq: 1, mode: "rolling" })
            expect(
              yield* poll(
                Effect.map(pending(options), (n) => (n === 0 ? n : undefined)),
                30_000,
              ),
            ).toBe(0)
            expect(providerCalls()).toHaveLength(1)
            // the next job for this session is keyed by the new live summary
            expect(yield* WorkQueue.enqueue(options, { ...job(session), afterSeq: summary.coversToSeq })).toMatchObject({
              duplicate: false,
            })
            // below the soft threshold now: not needed, not audited, acked
            expect(
              yield* poll(
                Effect.map(pending(options), (n) => (n === 0 ? n : undefined)),
                30_000,
              ),
            ).toBe(0)
            const audit = yield* Effect.flatMap(CompactionStore.CompactionStore, (s) => s.compactions("acme", session))
            expect(audit.map((a) => a.outcome)).toEqual(["ok"])
            expect(providerCalls()).toHaveLength(1)
          }),
        ),
      90_000,
    )

    it.scoped(
      "a compactor killed mid-call: its job is redelivered and another compactor completes it after the lease TTL",
      () =>
        live(
          Effect.gen(function* () {
            const root = TestNats.uniqueRoot()
            const options = { subjects: Subjects.make(root), config: QUEUE }
            yield* cleanup(options)
            const session = Fixture.fresh()
            yield* Fixture.storeSession("acme", session, Fixture.tauMessages(150))
            yield* WorkQueue.ensure(options)
            yield* WorkQueue.enqueue(options, job(session))
            server.control({ hangNext: 1 }) // the victim's call never returns

            const db = yield* Database.Database
            const lease = () =>
              db
                .query<{ owner: string; token: string; expires_at: Date; live: boolean }>(
                  `SELECT l.owner, l.token, l.expires_at, l.expires_at > clock_timestamp() AS live
                 FROM ctxd_compaction_leases l JOIN ctxd_sessions s ON s.id = l.session_id WHERE s.tenant = $1 AND s.session = $2`,
                  ["acme", session],
                )
                .pipe(Effect.map(({ rows }) => rows[0]))
            const child = yield* Effect.acquireRelease(
              Effect.sync(() =>
                spawn(process.execPath, [join(import.meta.dirname, "fixtures", "compactor-process.ts")], {
                  env: {
                    ...process.env,
                    CTXD_DB_SCHEMA: db.schema,
                    CTXD_SUBJECT_ROOT: root,
                    FAKE_PROVIDER_URL: server.url,
                    CTXD_WORKER_ID: "doomed",
                    NATS_URL: TestNats.url(),
                    DATABASE_URL: process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres",
                  },
                  stdio: ["ignore", "pipe", "pipe"],
                }),
              ),
              (p) => Effect.sync(() => p.exitCode === null && p.kill("SIGKILL")),
            )
            let output = ""
            child.stdout.on("data", (d: Buffer) => (output += d.toString()))
            child.stderr.on("data", (d: Buffer) => (output += d.toString()))
            const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
            const victim = (what: string) => () => new Error(`${what}; the victim's output:\n${output}`)
            // starting a process (and its warm-up) takes 30-40 s on a loaded 2-core machine; its first call does not
            yield* poll(
              Effect.sync(() => (output.includes("ready") ? true : child.exitCode === null ? undefined : false)),
              100_000,
            ).pipe(
              Effect.filterOrFail((ready) => ready, victim("the victim exited")),
              Effect.mapError(victim("the victim did not start")),
            )
            // the victim took the job, the lease, and is waiting on the provider
            yield* poll(
              Effect.sync(() => (providerCalls().length > 0 ? true : undefined)),
              20_000,
            ).pipe(Effect.mapError(victim("the victim never called the provider")))
            expect(
              providerCalls().map((r) => r.status),
              "the victim made one call, and it hangs",
            ).toEqual([null])
            expect(yield* lease(), "the victim holds the first lease of the session").toMatchObject({
              owner: "doomed",
              token: "1",
              live: true,
            })
            const probe = yield* Effect.flatMap(CompactionStore.CompactionStore, (s) => s.acquire("acme", session, "probe", 1_000)).pipe(
              Effect.map((l) => ({ _tag: "Acquired", owner: l.owner, token: String(l.token) })),
              Effect.merge,
            )
            expect(probe).toMatchObject({ _tag: "LockHeld", owner: "doomed" })
            child.kill("SIGKILL")
            yield* Effect.promise(() => exited)
            const killedAt = Date.now()
            // dead: whatever it renewed last is when its lease runs out
            const last = yield* lease()
            expect({ owner: last?.owner, token: last?.token }).toEqual({ owner: "doomed", token: "1" })

            const compactor = yield* Fixture.compactor({ owner: "survivor" }).pipe(Effect.provide(Fixture.summarizer(server)))
            // one job at a time: a stall past the ack wait must not make the survivor run the job twice
            yield* CompactEndpoint.serveJobs({ ...options, config: VICTIM.queue }).pipe(
              Effect.provideService(Compactor.Compactor, compactor),
            )
            const summary = yield* poll(latest(session), 40_000)
            // not before the victim's lease ran out (both times by the database clock); how soon after is
            // printed, not asserted: that is a latency (the redelivery comes one ack wait after the victim's
            // last beat, the lease runs out within its TTL), which a loaded machine stretches
            expect(summary.createdAt.getTime()).toBeGreaterThanOrEqual(last!.expires_at.getTime())
            console.log(`redelivered and compacted ${Date.now() - killedAt} ms after the kill`)
            expect({ coversFromSeq: summary.coversFromSeq, token: String(summary.token) }).toEqual({ coversFromSeq: 1, token: "2" })
            const audit = yield* Effect.flatMap(CompactionStore.CompactionStore, (s) => s.compactions("acme", session))
            const rows = audit.map((a) => ({ owner: a.owner, outcome: a.outcome, token: a.token === null ? null : String(a.token) }))
            // the survivor may have met the victim's lease first (lock_held); the victim died before recording anything
            expect(rows.filter((r) => r.outcome !== "lock_held")).toEqual([{ owner: "survivor", outcome: "ok", token: "2" }])
            expect(rows.filter((r) => r.owner !== "survivor")).toEqual([])
            expect(yield* poll(Effect.map(pending(options), (n) => (n === 0 ? n : undefined)))).toBe(0)
          }),
        ),
      180_000,
    )

    it.scoped("manual ctx.v1.compact.<tenant>.<session>: runs now and replies with the outcome", () =>
      live(
        Effect.gen(function* () {
          const subjects = Subjects.make(TestNats.uniqueRoot())
          const session = Fixture.fresh()
          // the longest bundled sessions first (tau-airline-17-3, 3-0): one fold leaves no boundary for a second
          yield* Fixture.storeSession("acme", session, Fixture.tauMessages(150, 6))
          const compactor = yield* Fixture.compactor().pipe(Effect.provide(Fixture.summarizer(server)))
          yield* CompactEndpoint.serve({ subjects }).pipe(Effect.provideService(Compactor.Compactor, compactor))
          const call = (subject: string, body: unknown) =>
            Request.request(subject, Json.encode(body), { timeoutMs: 10_000 }).pipe(
              Effect.map((m) => Either.getOrThrow(Json.decode(m.data))),
            )

          const reply = yield* call(subjects.compact("acme", session), { model: Fixture.MODEL, mode: "one_shot" })
          expect(reply).toMatchObject({ ok: true, outcome: "ok", coversFromSeq: 1, mode: "one_shot", depth: 1 })
          expect(Schema.is(Compact.CompactReply)(reply)).toBe(true)
          const again = yield* call(subjects.compact("acme", session), { model: Fixture.MODEL })
          expect(again).toMatchObject({ ok: true, outcome: "no_boundary", coversFromSeq: null })
          expect(yield* call(subjects.compact("acme", "nobody"), { model: Fixture.MODEL })).toMatchObject({
            ok: false,
            error: { code: "BadRequest" },
          })
          expect(yield* call(subjects.compact("acme", session), { model: { provider: "x" } })).toMatchObject({
            ok: false,
            error: { code: "BadRequest" },
          })
        }),
      ),
    )
  })
})
