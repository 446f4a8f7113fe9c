/**
 * Failure tests: provider down at start, flapping, hanging. The exact
 * backend is the real Anthropic SDK against the fake provider.
 */
import type { Conversation } from "@ctxd/contracts"
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@effect/vitest"
import { Effect, Redacted, Schedule, TestClock } from "effect"
import { createServer } from "node:net"
import { TokenCounter } from "../src/index.ts"
import * as Replay from "./Replay.ts"

let server: FakeProvider.FakeProviderServer
beforeAll(async () => {
  server = await FakeProvider.start()
})
afterAll(() => server.close())
beforeEach(() => server.reset())

const countCalls = () => server.requests().filter((r) => r.endpoint === "count_tokens").length

/** A port nobody listens on (bound, then released). */
const closedPort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const address = s.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      s.close(() => resolve(port))
    })
  })

const [SESSION] = Replay.tauBench(1)
const session = SESSION!
const turn = (messages: ReadonlyArray<Conversation.Message>): TokenCounter.CountTurnInput => ({
  model: Replay.MODEL,
  system: session.system,
  tools: session.tools,
  messages,
})
/** Distinct new messages for turn `i`. */
const fresh = (i: number): ReadonlyArray<Conversation.Message> => [{ role: "user", parts: [{ type: "text", text: `question number ${i}: where is my bag?` }] }]

const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const start = performance.now()
    const value = yield* effect
    return [value, performance.now() - start] as const
  })

describe("TokenCounter failures", () => {
  it.scopedLive("provider down at start: turns answer locally at once with exact false", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(closedPort)
      const service = yield* TokenCounter.make({ anthropic: { baseURL: `http://127.0.0.1:${port}`, apiKey: Redacted.make("test") } })
      // each turn answers at once, locally; refused connections count until the breaker opens
      // (a turn falls back at its first failed call, so it may take up to 3 turns)
      const reasons: Array<string | undefined> = []
      for (const messages of session.turns.slice(0, 5)) {
        const [count, elapsed] = yield* timed(service.countTurn(turn(messages)))
        expect(count).toMatchObject({ backend: "tiktoken", exact: false })
        expect(count.messageTokens.every((n) => n > 0)).toBe(true)
        expect(elapsed).toBeLessThan(2_000)
        reasons.push(count.fallback)
      }
      const opened = reasons.indexOf("circuit_open")
      expect(opened).toBeGreaterThan(0)
      expect(opened).toBeLessThanOrEqual(3)
      expect(reasons.slice(0, opened).every((r) => r === "connection")).toBe(true)
      expect(reasons.slice(opened).every((r) => r === "circuit_open")).toBe(true)
      const metrics = yield* service.metrics
      expect(metrics).toMatchObject({ exactEver: false, breaker: { status: "open", hasOpened: true }, exactTurns: 0 })
      expect(metrics.fallbacks).toEqual({ connection: opened, circuit_open: 5 - opened })
    }),
  )

  it.scoped("flapping: 3 failures open the breaker; open → half open → closed with TestClock; exact stays false", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({ anthropic: { baseURL: server.url, apiKey: Redacted.make("test") } })
      expect(yield* service.countTurn(turn(fresh(0)))).toMatchObject({ backend: "anthropic_api", exact: true })

      server.control({ failNext: 3, errorStatus: 529 })
      for (let i = 1; i <= 3; i++) {
        expect(yield* service.countTurn(turn(fresh(i)))).toMatchObject({ backend: "tiktoken", exact: false, fallback: "server" })
      }
      expect((yield* service.metrics).breaker.status).toBe("open")

      // open: no call at all
      const before = countCalls()
      expect(yield* service.countTurn(turn(fresh(4)))).toMatchObject({ backend: "tiktoken", fallback: "circuit_open" })
      expect(countCalls()).toBe(before)

      // a failed probe doubles the open period
      yield* TestClock.adjust("30 seconds")
      expect((yield* service.metrics).breaker.status).toBe("half_open")
      server.control({ failNext: 1 })
      expect(yield* service.countTurn(turn(fresh(5)))).toMatchObject({ fallback: "server" })
      expect((yield* service.metrics).breaker).toMatchObject({ status: "open", openForMs: 60_000 })
      yield* TestClock.adjust("30 seconds")
      expect(yield* service.countTurn(turn(fresh(6)))).toMatchObject({ fallback: "circuit_open" })
      yield* TestClock.adjust("30 seconds")

      // a successful probe closes it; the provider answers again, but never "exact" again
      const probe = yield* service.countTurn(turn(fresh(7)))
      expect(probe).toMatchObject({ backend: "anthropic_api", exact: false, calibration: 1 })
      expect(probe.fallback).toBeUndefined()
      expect(yield* service.countTurn(turn(fresh(8)))).toMatchObject({ backend: "anthropic_api", exact: false })
      const metrics = yield* service.metrics
      expect(metrics).toMatchObject({ exactEver: false, exactTurns: 1, breaker: { status: "closed", openings: 2, openForMs: 30_000 } })
    }),
  )

  it.scopedLive("hanging provider: every turn answers within the timeout and waiting calls do not pile up", () =>
    Effect.gen(function* () {
      const timeoutMs = 300
      const service = yield* TokenCounter.make({
        anthropic: { baseURL: server.url, apiKey: Redacted.make("test") },
        timeoutMs,
        maxInFlight: 4,
      })
      expect(yield* service.countTurn(turn(fresh(0)))).toMatchObject({ exact: true })
      server.control({ hang: true })
      const before = countCalls()

      // 12 turns at once, each with its own new messages
      const burst = yield* Effect.all(
        Array.from({ length: 12 }, (_, i) => timed(service.countTurn(turn(fresh(100 + i))))),
        { concurrency: "unbounded" },
      )
      for (const [count, elapsed] of burst) {
        expect(count).toMatchObject({ backend: "tiktoken", exact: false })
        expect(elapsed).toBeLessThan(timeoutMs + 500)
      }
      const reasons = burst.map(([c]) => c.fallback)
      expect(reasons.filter((r) => r === "timeout")).toHaveLength(4)
      expect(reasons.filter((r) => r === "saturated")).toHaveLength(8)
      // only as many calls as the bulkhead allows ever reached the provider
      expect(countCalls() - before).toBe(4)

      // the hung calls time out on their own clock (a few ms after the turns' deadline),
      // are aborted, and open the breaker
      yield* service.metrics.pipe(
        Effect.repeat({ until: (m) => m.inFlight === 0, schedule: Schedule.spaced("10 millis") }),
        Effect.timeout("1 second"),
      )
      const metrics = yield* service.metrics
      expect(metrics.inFlight).toBe(0)
      expect(metrics.breaker.status).toBe("open")

      // from now on turns do not wait at all, and nothing reaches the provider
      for (let i = 0; i < 10; i++) {
        const [count, elapsed] = yield* timed(service.countTurn(turn(fresh(200 + i))))
        expect(count).toMatchObject({ backend: "tiktoken", exact: false, fallback: "circuit_open" })
        expect(elapsed).toBeLessThan(100)
      }
      expect(countCalls() - before).toBe(4)
    }),
  )

  it.scopedLive("a hanging cold start answers within the timeout too", () =>
    Effect.gen(function* () {
      server.control({ hang: true })
      const service = yield* TokenCounter.make({ anthropic: { baseURL: server.url, apiKey: Redacted.make("test") }, timeoutMs: 200 })
      const [count, elapsed] = yield* timed(service.countTurn(turn(session.turns[0]!)))
      expect(count).toMatchObject({ backend: "tiktoken", exact: false, fallback: "timeout" })
      expect(elapsed).toBeLessThan(700)
    }),
  )
})
