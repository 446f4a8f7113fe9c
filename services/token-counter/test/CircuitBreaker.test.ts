import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Either, Fiber, TestClock } from "effect"
import { CircuitBreaker } from "../src/index.ts"

const boom = Effect.fail("boom" as const)
const ok = Effect.succeed("ok" as const)

/** Runs `n` failing calls through the breaker. */
const fail = (breaker: CircuitBreaker.CircuitBreaker, n: number) =>
  Effect.forEach(Array.from({ length: n }), () => Effect.either(breaker.run(boom)), { discard: true })

describe("CircuitBreaker", () => {
  it.effect("opens after 3 consecutive failures and rejects without running the effect", () =>
    Effect.gen(function* () {
      const breaker = yield* CircuitBreaker.make()
      yield* fail(breaker, 2)
      expect(yield* breaker.state).toBe("closed")
      // a success resets the count
      expect(yield* breaker.run(ok)).toBe("ok")
      yield* fail(breaker, 2)
      expect(yield* breaker.state).toBe("closed")
      expect(yield* breaker.hasOpened).toBe(false)
      yield* fail(breaker, 1)
      expect(yield* breaker.state).toBe("open")
      expect(yield* breaker.hasOpened).toBe(true)

      let ran = 0
      const result = yield* Effect.either(breaker.run(Effect.sync(() => ++ran)))
      expect(ran).toBe(0)
      expect(Either.isLeft(result) && result.left).toBeInstanceOf(CircuitBreaker.CircuitOpen)
      expect(Either.isLeft(result) && result.left._tag === "CircuitOpen" && result.left.retryAfterMs).toBe(30_000)
    }),
  )

  it.effect("open → half open after 30 s → closed after a successful probe; hasOpened stays true", () =>
    Effect.gen(function* () {
      const breaker = yield* CircuitBreaker.make({ failureThreshold: 3, openFor: "30 seconds", maxOpenFor: "300 seconds" })
      yield* fail(breaker, 3)
      yield* TestClock.adjust("29 seconds")
      expect(yield* breaker.state).toBe("open")
      expect(Either.isLeft(yield* Effect.either(breaker.run(ok)))).toBe(true)
      yield* TestClock.adjust("1 second")
      expect(yield* breaker.state).toBe("half_open")
      expect(yield* breaker.run(ok)).toBe("ok")
      expect(yield* breaker.state).toBe("closed")
      expect(yield* breaker.hasOpened).toBe(true)
      // closed again: the count starts from zero
      yield* fail(breaker, 2)
      expect(yield* breaker.state).toBe("closed")
    }),
  )

  it.effect("a failed probe doubles the open period up to 300 s; a success resets it to 30 s", () =>
    Effect.gen(function* () {
      const breaker = yield* CircuitBreaker.make()
      yield* fail(breaker, 3)
      const periods: Array<number> = []
      for (let i = 0; i < 6; i++) {
        const { openForMs } = yield* breaker.snapshot
        periods.push(openForMs)
        yield* TestClock.adjust(openForMs - 1)
        expect(yield* breaker.state).toBe("open")
        yield* TestClock.adjust(1)
        expect(yield* breaker.state).toBe("half_open")
        yield* fail(breaker, 1) // the probe fails
        expect(yield* breaker.state).toBe("open")
      }
      expect(periods).toEqual([30_000, 60_000, 120_000, 240_000, 300_000, 300_000])
      expect((yield* breaker.snapshot).openForMs).toBe(300_000)
      yield* TestClock.adjust("300 seconds")
      expect(yield* breaker.run(ok)).toBe("ok")
      const after = yield* breaker.snapshot
      expect(after).toMatchObject({ status: "closed", openForMs: 30_000, openings: 7, hasOpened: true })
      // the next opening starts at 30 s again
      yield* fail(breaker, 3)
      expect((yield* breaker.snapshot).retryAfterMs).toBe(30_000)
    }),
  )

  it.effect("lets exactly one probe through; the others get CircuitOpen at once", () =>
    Effect.gen(function* () {
      const breaker = yield* CircuitBreaker.make()
      yield* fail(breaker, 3)
      yield* TestClock.adjust("30 seconds")
      const gate = yield* Deferred.make<void>()
      const probe = yield* Effect.fork(breaker.run(Deferred.await(gate).pipe(Effect.as("probed"))))
      yield* Effect.yieldNow()
      let ran = 0
      const others = yield* Effect.forEach(Array.from({ length: 5 }), () => Effect.either(breaker.run(Effect.sync(() => ++ran))))
      expect(ran).toBe(0)
      expect(others.every((r) => Either.isLeft(r) && r.left._tag === "CircuitOpen" && r.left.retryAfterMs === 0)).toBe(true)
      expect(yield* breaker.state).toBe("half_open")
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(probe)).toBe("probed")
      expect(yield* breaker.state).toBe("closed")
    }),
  )

  it.effect("an interrupted probe lets the next caller probe", () =>
    Effect.gen(function* () {
      const breaker = yield* CircuitBreaker.make()
      yield* fail(breaker, 3)
      yield* TestClock.adjust("30 seconds")
      const probe = yield* Effect.fork(breaker.run(Effect.never))
      yield* Effect.yieldNow()
      expect(Either.isLeft(yield* Effect.either(breaker.run(ok)))).toBe(true)
      yield* Fiber.interrupt(probe)
      expect(yield* breaker.run(ok)).toBe("ok")
      expect(yield* breaker.state).toBe("closed")
    }),
  )

  it.effect("errors that are not the dependency's fault do not count; defects do", () =>
    Effect.gen(function* () {
      const breaker = yield* CircuitBreaker.make({ isFailure: (e) => e !== "bad request" })
      for (let i = 0; i < 5; i++) yield* Effect.either(breaker.run(Effect.fail("bad request")))
      expect(yield* breaker.state).toBe("closed")
      for (let i = 0; i < 3; i++) yield* Effect.exit(breaker.run(Effect.die("crash")))
      expect(yield* breaker.state).toBe("open")
    }),
  )
})
