import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Scope, TestClock } from "effect"
import { SingleFlight } from "../src/index.ts"

describe("SingleFlight", () => {
  it.scoped("10 concurrent calls for one key run the work once and all get its result", () =>
    Effect.gen(function* () {
      const flights = yield* SingleFlight.make
      const gate = yield* Deferred.make<void>()
      let runs = 0
      const work = Effect.sync(() => ++runs).pipe(Effect.zipLeft(Deferred.await(gate)))
      const fibers = yield* Effect.forEach(Array.from({ length: 10 }), () => Effect.fork(flights.run("k", work)))
      yield* Effect.yieldNow()
      expect(flights.inFlight()).toBe(1)
      yield* Deferred.succeed(gate, undefined)
      const results = yield* Effect.forEach(fibers, Fiber.join)
      expect(results).toEqual(Array.from({ length: 10 }, () => 1))
      expect(runs).toBe(1)
      expect(flights.shared()).toBe(9)
      // the key is released: a later call runs again
      expect(flights.inFlight()).toBe(0)
      expect(
        yield* flights.run(
          "k",
          Effect.sync(() => ++runs),
        ),
      ).toBe(2)
    }),
  )

  it.scoped("different keys do not share; failures reach every waiter", () =>
    Effect.gen(function* () {
      const flights = yield* SingleFlight.make
      const [a, b] = yield* Effect.all([flights.run("a", Effect.succeed(1)), flights.run("b", Effect.succeed(2))], { concurrency: 2 })
      expect([a, b]).toEqual([1, 2])
      const gate = yield* Deferred.make<void>()
      const failing = Deferred.await(gate).pipe(Effect.zipRight(Effect.fail("down" as const)))
      const fibers = yield* Effect.forEach([1, 2, 3], () => Effect.fork(flights.run("f", failing)))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(gate, undefined)
      for (const fiber of fibers) expect(yield* Fiber.await(fiber)).toEqual(Exit.fail("down"))
    }),
  )

  it.scoped("a caller that gives up neither cancels the work nor strands the others", () =>
    Effect.gen(function* () {
      const flights = yield* SingleFlight.make
      const gate = yield* Deferred.make<void>()
      const work = Deferred.await(gate).pipe(Effect.as("done"))
      const first = yield* Effect.fork(flights.run("k", work))
      yield* Effect.yieldNow()
      const second = yield* Effect.fork(flights.run("k", work))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(first)
      expect(flights.inFlight()).toBe(1)
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(second)).toBe("done")
    }),
  )

  it.scoped("the work can be interrupted: its own timeout ends it, and so does closing the scope", () =>
    Effect.gen(function* () {
      const flights = yield* SingleFlight.make
      // a timeout inside the work (a hung call's) ends it when it fires: it does not wait for the work
      const timedOut = yield* Effect.fork(
        flights.run("hung", Effect.never.pipe(Effect.timeoutFail({ duration: "1 second", onTimeout: () => "timeout" as const }))),
      )
      yield* Effect.yieldNow().pipe(Effect.repeat({ until: () => flights.inFlight() === 1 }))
      yield* TestClock.sleeps().pipe(Effect.repeat({ until: (sleeps) => sleeps.length === 1 }))
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.await(timedOut)).toEqual(Exit.fail("timeout"))
      expect(flights.inFlight()).toBe(0)

      // closing the group's scope interrupts the work in flight and releases its waiters
      const scope = yield* Scope.make()
      const closing = yield* Scope.extend(SingleFlight.make, scope)
      const started = yield* Deferred.make<void>()
      const ended = yield* Deferred.make<boolean>()
      const hung = Deferred.succeed(started, undefined).pipe(
        Effect.zipRight(Effect.never),
        Effect.onInterrupt(() => Deferred.succeed(ended, true)),
      )
      const waiter = yield* Effect.fork(closing.run("k", hung))
      yield* Deferred.await(started)
      yield* Scope.close(scope, Exit.void)
      expect(yield* Deferred.await(ended)).toBe(true)
      expect(Exit.isInterrupted(yield* Fiber.await(waiter))).toBe(true)
      expect(closing.inFlight()).toBe(0)
    }),
  )
})
