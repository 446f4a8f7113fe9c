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
import { cleanup, pending, QUEUE } from "./Queue.ts"

let server: FakeProvider.FakeProviderServer
beforeAll(async () => {
  server = await FakeProvider.start()
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
    it.scoped("jobs are deduplicated per session and live summary; a job is acked once its outcome is recorded", () =>
      live(
        Effect.gen(function* () {
          const options = { subjects: Subjects.make(TestNats.uniqueRoot()), settings: QUEUE }
          yield* cleanup(options)
          const session = Fixture.fresh()
          yield* Fixture.storeSession("acme", session, Fixture.tauMessages(150))
          yield* WorkQueue.ensure(options)
          expect(yield* WorkQueue.enqueue(options, job(session))).toMatchObject({ duplicate: false })
          expect(yield* WorkQueue.enqueue(options, job(session))).toMatchObject({ duplicate: true })
          expect(yield* pending(options)).toBe(1)
          const compactor = yield* Fixture.compactor({ owner: "worker-1" }).pipe(Effect.provide(Fixture.summarizer(server)))
          yield* CompactEndpoint.serveJobs(options).pipe(Effect.provideService(Compactor.Compactor, compactor))
          const summary = yield* poll(latest(session))
          expect(summary).toMatchObject({ coversFromSeq: 1, mode: "rolling" })
          expect(yield* poll(Effect.map(pending(options), (n) => (n === 0 ? n : undefined)))).toBe(0)
          expect(providerCalls()).toHaveLength(1)
          // the next job for this session is keyed by the new live summary
          expect(yield* WorkQueue.enqueue(options, { ...job(session), afterSeq: summary.coversToSeq })).toMatchObject({ duplicate: false })
          // below the soft threshold now: not needed, not audited, acked
          expect(yield* poll(Effect.map(pending(options), (n) => (n === 0 ? n : undefined)))).toBe(0)
          const audit = yield* Effect.flatMap(CompactionStore.CompactionStore, (s) => s.compactions("acme", session))
          expect(audit.map((a) => a.outcome)).toEqual(["ok"])
          expect(providerCalls()).toHaveLength(1)
        }),
      ),
    )

    it.scoped("a compactor killed mid-call: its job is redelivered and another compactor completes it after the lease TTL", () =>
      live(
        Effect.gen(function* () {
          const root = TestNats.uniqueRoot()
          const options = { subjects: Subjects.make(root), settings: QUEUE }
          yield* cleanup(options)
          const session = Fixture.fresh()
          yield* Fixture.storeSession("acme", session, Fixture.tauMessages(150))
          yield* WorkQueue.ensure(options)
          yield* WorkQueue.enqueue(options, job(session))
          server.control({ hangNext: 1 }) // the victim's call never returns

          const db = yield* Database.Database
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
          // the victim took the job, the lease, and is waiting on the provider
          yield* poll(Effect.sync(() => (providerCalls().length === 1 ? true : undefined)), 20_000).pipe(
            Effect.mapError(() => new Error(`the victim never called the provider:\n${output}`)),
          )
          const held = yield* Effect.flip(Effect.flatMap(CompactionStore.CompactionStore, (s) => s.acquire("acme", session, "probe", 1_000)))
          expect(held).toMatchObject({ _tag: "LockHeld", owner: "doomed" })
          child.kill("SIGKILL")
          const killedAt = Date.now()

          const compactor = yield* Fixture.compactor({ owner: "survivor" }).pipe(Effect.provide(Fixture.summarizer(server)))
          yield* CompactEndpoint.serveJobs(options).pipe(Effect.provideService(Compactor.Compactor, compactor))
          const summary = yield* poll(latest(session), 20_000)
          const elapsed = Date.now() - killedAt
          expect(elapsed).toBeGreaterThan(1_000) // not before the victim's lease ran out
          expect(elapsed).toBeLessThan(15_000)
          expect(summary).toMatchObject({ coversFromSeq: 1, token: 2n })
          const audit = yield* Effect.flatMap(CompactionStore.CompactionStore, (s) => s.compactions("acme", session))
          expect(audit.find((a) => a.outcome === "ok")).toMatchObject({ owner: "survivor", token: 2n })
          expect(audit.some((a) => a.owner === "doomed")).toBe(false) // it died before recording anything
          expect(yield* poll(Effect.map(pending(options), (n) => (n === 0 ? n : undefined)))).toBe(0)
        }),
      ),
      60_000,
    )

    it.scoped("manual ctx.v1.compact.<tenant>.<session>: runs now and replies with the outcome", () =>
      live(
        Effect.gen(function* () {
          const subjects = Subjects.make(TestNats.uniqueRoot())
          const session = Fixture.fresh()
          yield* Fixture.storeSession("acme", session, Fixture.tauMessages(150))
          const compactor = yield* Fixture.compactor().pipe(Effect.provide(Fixture.summarizer(server)))
          yield* CompactEndpoint.serve({ subjects }).pipe(Effect.provideService(Compactor.Compactor, compactor))
          const call = (subject: string, body: unknown) =>
            Request.request(subject, Json.encode(body), { timeoutMs: 10_000 }).pipe(Effect.map((m) => Either.getOrThrow(Json.decode(m.data))))

          const reply = yield* call(subjects.compact("acme", session), { model: Fixture.MODEL, mode: "one_shot" })
          expect(reply).toMatchObject({ ok: true, outcome: "ok", coversFromSeq: 1, mode: "one_shot", depth: 1 })
          expect(Schema.is(Compact.CompactReply)(reply)).toBe(true)
          const again = yield* call(subjects.compact("acme", session), { model: Fixture.MODEL })
          expect(again).toMatchObject({ ok: true, outcome: "no_boundary", coversFromSeq: null })
          expect(yield* call(subjects.compact("acme", "nobody"), { model: Fixture.MODEL })).toMatchObject({ ok: false, error: { code: "BadRequest" } })
          expect(yield* call(subjects.compact("acme", session), { model: { provider: "x" } })).toMatchObject({ ok: false, error: { code: "BadRequest" } })
        }),
      ),
    )
  })
})

