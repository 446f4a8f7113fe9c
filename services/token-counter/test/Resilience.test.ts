/**
 * Failure tests: provider down at start, flapping, hanging, and one
 * provider sick while another is well. The exact backends are the real
 * Anthropic and OpenAI SDKs against the fake provider.
 *
 * Time is the TestClock's: the turns' deadlines, the calls' timeouts and the
 * breaker run on it, so "answers within the timeout" is checked as "still
 * waiting while the clock stands still, answered once it reaches the
 * deadline", and "answers at once" as "answers while the clock stands
 * still". No bound on wall time: a loaded machine stalls the event loop for
 * seconds. The SDK's own abort timer (same `timeoutMs`, real time) is set
 * long enough never to fire during a test.
 */
import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option, Redacted, TestClock, TestServices } from "effect"
import { createServer, type Server } from "node:net"
import { TokenCounter } from "../src/index.ts"
import * as FakeProviderHooks from "./FakeProviderHooks.ts"
import * as Replay from "./Replay.ts"

const fake = FakeProviderHooks.fakeProvider()

const countCalls = () =>
  fake()
    .requests()
    .filter((r) => r.endpoint === "count_tokens").length

/** The count calls' timeout in these tests: virtual for the deadlines, and never reached by the SDK's real-time abort timer. */
const TIMEOUT_MS = 60_000

/**
 * A provider that is down: it accepts each connection and drops it once a
 * request arrives on it, counting the requests. Not at accept: the HTTP
 * client sends a request it had not written yet when its connection closed
 * on a new connection (one call, several connections), and a loaded machine
 * makes that race likely.
 */
const droppingServer = (): Promise<{ readonly port: number; readonly requests: () => number; readonly server: Server }> =>
  new Promise((resolve, reject) => {
    let requests = 0
    const s = createServer((socket) => {
      socket.once("data", () => {
        requests++
        socket.destroy()
      })
      socket.on("error", () => socket.destroy())
    })
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const address = s.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resolve({ port, requests: () => requests, server: s })
    })
  })

const session = Replay.typical()
const turn = (messages: ReadonlyArray<Conversation.Message>): TokenCounter.CountTurnInput => ({
  model: Replay.MODEL,
  system: session.system,
  tools: session.tools,
  messages,
})
const openaiTurn = (messages: ReadonlyArray<Conversation.Message>): TokenCounter.CountTurnInput => ({
  ...turn(messages),
  model: Replay.OPENAI_MODEL,
})
const geminiTurn = (messages: ReadonlyArray<Conversation.Message>): TokenCounter.CountTurnInput => ({
  ...turn(messages),
  model: Replay.GEMINI_MODEL,
  format: "gemini",
})
const openaiCalls = () =>
  fake()
    .requests()
    .filter((r) => r.endpoint === "responses_input_tokens").length
/** Distinct new messages for turn `i`. */
const fresh = (i: number): ReadonlyArray<Conversation.Message> => [
  { role: "user", parts: [{ type: "text", text: `question number ${i}: where is my bag?` }] },
]

/**
 * `effect`, which must finish without the test clock moving: it dies when it
 * has not after `ms` of real time (room for a loaded machine; a turn that
 * waits on the provider or on a timer never finishes while the clock stands still).
 */
const unaided =
  (what: string, ms = 20_000) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.raceFirst(
      effect,
      TestServices.provideLive(Effect.sleep(ms)).pipe(
        Effect.zipRight(Effect.dieMessage(`${what}: not finished after ${ms} ms of real time`)),
      ),
    )

/** Polls `check` (on the test clock) every 10 ms of real time until it gives a value; dies after `ms` of real time. */
const eventually = <A>(what: string, check: Effect.Effect<A | undefined>, ms = 20_000): Effect.Effect<A> =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    for (;;) {
      const value = yield* check
      if (value !== undefined) return value
      if (Date.now() > deadline) return yield* Effect.dieMessage(`${what}: not after ${ms} ms of real time`)
      yield* TestServices.provideLive(Effect.sleep("10 millis"))
    }
  })

describe("TokenCounter failures", () => {
  it.scoped("provider down at start: turns answer locally at once with exact false", () =>
    Effect.gen(function* () {
      const down = yield* Effect.acquireRelease(Effect.promise(droppingServer), ({ server }) => Effect.sync(() => server.close()))
      const service = yield* TokenCounter.make({ anthropic: { baseURL: `http://127.0.0.1:${down.port}`, apiKey: Redacted.make("test") } })
      // each turn answers at once, locally (the clock never moves: not by a deadline, no backoff);
      // dropped requests count until the breaker opens (a turn falls back at its first failed
      // call, so it may take up to 3 turns)
      const reasons: Array<string | undefined> = []
      for (const [i, messages] of session.turns.slice(0, 5).entries()) {
        const count = yield* service.countTurn(turn(messages)).pipe(unaided(`turn ${i}`))
        expect(count).toMatchObject({ backend: "tiktoken", exact: false })
        expect(count.messageTokens.every((n) => n > 0)).toBe(true)
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
      // one request per call: a failed call is not retried (the SDK's retries would wait and send it again)
      yield* eventually(
        "the calls finished",
        Effect.map(service.metrics, (m) => (m.inFlight === 0 ? true : undefined)),
      )
      expect(metrics.calls).toBeGreaterThan(0)
      expect({ requests: down.requests(), failed: (yield* service.metrics).callFailures }).toEqual({
        requests: metrics.calls,
        failed: metrics.calls,
      })
    }),
  )

  it.scoped("flapping: 3 failures open the breaker; open → half open → closed with TestClock; exact stays false", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({ anthropic: { baseURL: fake().url, apiKey: Redacted.make("test") }, timeoutMs: TIMEOUT_MS })
      expect(yield* service.countTurn(turn(fresh(0)))).toMatchObject({ backend: "anthropic_api", exact: true })

      fake().control({ failNext: 3, errorStatus: 529 })
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
      fake().control({ failNext: 1 })
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

  it.scoped("hanging provider: every turn answers at its deadline and waiting calls do not pile up", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({
        anthropic: { baseURL: fake().url, apiKey: Redacted.make("test") },
        timeoutMs: TIMEOUT_MS,
        maxInFlight: 4,
      })
      expect(yield* service.countTurn(turn(fresh(0)))).toMatchObject({ exact: true })
      fake().control({ hang: true })
      const before = countCalls()

      // 12 turns at once, each with its own new messages (one call each: the rest of the prompt is cached)
      const burst = yield* Effect.forEach(
        Array.from({ length: 12 }, (_, i) => service.countTurn(turn(fresh(100 + i)))),
        (t) => Effect.fork(t),
      )
      const done = () => Effect.map(Effect.forEach(burst, Fiber.poll), (polls) => polls.filter(Option.isSome).length)
      // the bulkhead refuses 8 at once; 4 calls reach the provider, which never answers...
      yield* eventually(
        "8 turns answered and 4 calls reached the provider",
        Effect.flatMap(done(), (n) => Effect.sync(() => (n === 8 && countCalls() - before === 4 ? true : undefined))),
      )
      // ...and their turns wait on the clock: 1 ms short of their deadline they still wait...
      yield* TestClock.adjust(TIMEOUT_MS - 1)
      expect(yield* done()).toBe(8)
      // ...until it reaches it
      yield* TestClock.adjust(1)
      const counts = yield* Effect.forEach(burst, Fiber.join).pipe(unaided("the burst after the deadline"))
      for (const count of counts) expect(count).toMatchObject({ backend: "tiktoken", exact: false })
      const reasons = counts.map((c) => c.fallback)
      expect(reasons.filter((r) => r === "timeout")).toHaveLength(4)
      expect(reasons.filter((r) => r === "saturated")).toHaveLength(8)
      // only as many calls as the bulkhead allows ever reached the provider
      expect(countCalls() - before).toBe(4)

      // the hung calls time out on their own clock (at the turns' deadline), are aborted, and open the breaker
      const metrics = yield* eventually(
        "the hung calls ended",
        Effect.map(service.metrics, (m) => (m.inFlight === 0 ? m : undefined)),
      )
      expect(metrics.breaker.status).toBe("open")

      // from now on turns do not wait at all (the clock stands still), and nothing reaches the provider
      for (let i = 0; i < 10; i++) {
        const count = yield* service.countTurn(turn(fresh(200 + i))).pipe(unaided(`circuit-open turn ${i}`))
        expect(count).toMatchObject({ backend: "tiktoken", exact: false, fallback: "circuit_open" })
      }
      expect(countCalls() - before).toBe(4)
    }),
  )

  it.scoped("per provider: a failing OpenAI opens its own breaker and answers locally; Anthropic stays exact", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({
        anthropic: { baseURL: fake().url, apiKey: Redacted.make("test") },
        openai: { baseURL: `${fake().url}/v1`, apiKey: Redacted.make("test") },
        timeoutMs: TIMEOUT_MS,
      })
      expect(yield* service.countTurn(openaiTurn(fresh(0)))).toMatchObject({ backend: "openai_api", encoding: "openai", exact: true })
      expect(yield* service.countTurn(turn(fresh(0)))).toMatchObject({ backend: "anthropic_api", exact: true })

      // only OpenAI's count endpoint fails
      fake().control({ failNext: 3, errorStatus: 500, faultEndpoints: ["responses_input_tokens"] })
      for (let i = 1; i <= 3; i++) {
        const count = yield* service.countTurn(openaiTurn(fresh(i)))
        // the local fallback of the OpenAI family: o200k for gpt-5
        expect(count).toMatchObject({ backend: "tiktoken", encoding: "o200k_base", exact: false, fallback: "server" })
        expect(count.messageTokens.every((n) => n > 0)).toBe(true)
      }
      const before = openaiCalls()
      expect(yield* service.countTurn(openaiTurn(fresh(4)))).toMatchObject({ backend: "tiktoken", exact: false, fallback: "circuit_open" })
      expect(openaiCalls()).toBe(before)

      // Anthropic's breaker never saw those failures: still closed, still exact
      const claude = yield* service.countTurn(turn(fresh(5)))
      expect(claude).toMatchObject({ backend: "anthropic_api", exact: true })
      expect(claude.fallback).toBeUndefined()
      const metrics = yield* service.metrics
      expect(metrics.providers["openai"]).toMatchObject({ backend: "openai_api", breaker: { status: "open", hasOpened: true } })
      expect(metrics.providers["anthropic"]).toMatchObject({
        backend: "anthropic_api",
        breaker: { status: "closed", hasOpened: false, failures: 0 },
      })
      // the summary breaker is the least healthy one
      expect(metrics).toMatchObject({ breaker: { status: "open" }, exactEver: false })

      // the count endpoint answers for OpenAI locally too, with the reason
      const reply = yield* service.countRequest({ model: Replay.OPENAI_MODEL, body: Replay.renderResponses(session, fresh(6)) })
      expect(reply).toMatchObject({ backend: "tiktoken", exact: false, fallback: "circuit_open" })
    }),
  )

  it.scoped("per provider: a hanging OpenAI times out at the deadline, then its breaker is open; Anthropic is untouched", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({
        anthropic: { baseURL: fake().url, apiKey: Redacted.make("test") },
        openai: { baseURL: `${fake().url}/v1`, apiKey: Redacted.make("test") },
        timeoutMs: TIMEOUT_MS,
      })
      expect(yield* service.countTurn(openaiTurn(fresh(0)))).toMatchObject({ backend: "openai_api", exact: true })
      fake().control({ hang: true, faultEndpoints: ["responses_input_tokens"] })
      for (let i = 1; i <= 3; i++) {
        const before = openaiCalls()
        const waiting = yield* Effect.fork(service.countTurn(openaiTurn(fresh(i))))
        yield* eventually(
          `call ${i} reached the provider`,
          Effect.sync(() => (openaiCalls() > before ? true : undefined)),
        )
        yield* TestClock.adjust(TIMEOUT_MS)
        expect(yield* Fiber.join(waiting).pipe(unaided(`turn ${i} after the deadline`))).toMatchObject({
          backend: "tiktoken",
          exact: false,
          fallback: "timeout",
        })
        yield* eventually(
          `call ${i} ended`,
          Effect.map(service.metrics, (m) => (m.providers["openai"]!.inFlight === 0 ? true : undefined)),
        )
      }
      const open = yield* service.countTurn(openaiTurn(fresh(9))).pipe(unaided("circuit-open turn"))
      expect(open).toMatchObject({ backend: "tiktoken", exact: false, fallback: "circuit_open" })
      expect(yield* service.countTurn(turn(fresh(9))).pipe(unaided("anthropic turn"))).toMatchObject({
        backend: "anthropic_api",
        exact: true,
      })
      expect((yield* service.metrics).providers["anthropic"]!.breaker).toMatchObject({ status: "closed", hasOpened: false })
    }),
  )

  it.scoped("per provider: a failing Gemini opens its own breaker; OpenAI and Anthropic stay exact", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({
        anthropic: { baseURL: fake().url, apiKey: Redacted.make("test") },
        openai: { baseURL: `${fake().url}/v1`, apiKey: Redacted.make("test") },
        google: { baseURL: fake().url, apiKey: Redacted.make("test") },
        timeoutMs: TIMEOUT_MS,
      })
      expect(yield* service.countTurn(geminiTurn(fresh(0)))).toMatchObject({ backend: "google_api", exact: true })
      fake().control({ failNext: 3, errorStatus: 503, faultEndpoints: ["gemini_count_tokens"] })
      for (let i = 1; i <= 3; i++) {
        expect(yield* service.countTurn(geminiTurn(fresh(i)))).toMatchObject({
          backend: "tiktoken",
          encoding: "cl100k_base",
          exact: false,
          fallback: "server",
        })
      }
      expect(yield* service.countTurn(geminiTurn(fresh(4)))).toMatchObject({ backend: "tiktoken", exact: false, fallback: "circuit_open" })
      expect(yield* service.countTurn(openaiTurn(fresh(4)))).toMatchObject({ backend: "openai_api", exact: true })
      expect(yield* service.countTurn(turn(fresh(4)))).toMatchObject({ backend: "anthropic_api", exact: true })
      const { providers } = yield* service.metrics
      expect(Object.fromEntries(Object.entries(providers).map(([p, m]) => [p, m.breaker.status]))).toEqual({
        anthropic: "closed",
        openai: "closed",
        google: "open",
      })
    }),
  )

  it.scoped("a hanging cold start answers at its deadline too", () =>
    Effect.gen(function* () {
      fake().control({ hang: true })
      const service = yield* TokenCounter.make({ anthropic: { baseURL: fake().url, apiKey: Redacted.make("test") }, timeoutMs: TIMEOUT_MS })
      const cold = yield* Effect.fork(service.countTurn(turn(session.turns[0]!)))
      // the turn's deadline runs before its first call reaches the provider
      yield* eventually(
        "a call reached the provider",
        Effect.sync(() => (countCalls() > 0 ? true : undefined)),
      )
      yield* TestClock.adjust(TIMEOUT_MS - 1)
      expect(Option.isNone(yield* Fiber.poll(cold)), "the turn waits on the clock until its deadline").toBe(true)
      yield* TestClock.adjust(1)
      const count = yield* Fiber.join(cold).pipe(unaided("the cold turn after the deadline"))
      expect(count).toMatchObject({ backend: "tiktoken", exact: false, fallback: "timeout" })
    }),
  )
})
