// The endpoints' and the turn router's semaphore: strict FIFO hand-over, one
// waiter woken per release, and no permit lost or doubled whatever happens
// to a waiter or a holder (interrupted while waiting, interrupted as it is
// handed a permit, failing, dying).
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { Deferred, Effect, Exit, Fiber, FiberId } from "effect"
import { Permits } from "../src/index.ts"

/** Lets the forked fibers run until they block. */
const settle = Effect.yieldNow().pipe(Effect.repeatN(20))

describe("Permits", () => {
  it.effect("runs at most `permits` at once and hands freed permits over in arrival order", () =>
    Effect.gen(function* () {
      const permits = Permits.unsafeMake(2)
      const order: number[] = []
      const gates = Array.from({ length: 6 }, () => Deferred.unsafeMake<void>(FiberId.none))
      const fibers = yield* Effect.forEach(gates, (gate, i) =>
        Effect.fork(
          permits.withPermit(
            Effect.zipRight(
              Effect.sync(() => order.push(i)),
              Deferred.await(gate),
            ),
          ),
        ),
      )
      yield* settle
      expect(order).toEqual([0, 1])
      expect(permits.taken()).toBe(2)
      expect(permits.waiting()).toBe(4)
      // freed out of order: the waiters still get their turn in arrival order
      yield* Deferred.succeed(gates[1]!, undefined)
      yield* settle
      expect(order).toEqual([0, 1, 2])
      yield* Deferred.succeed(gates[0]!, undefined)
      yield* Deferred.succeed(gates[2]!, undefined)
      yield* settle
      expect(order).toEqual([0, 1, 2, 3, 4])
      expect(permits.waiting()).toBe(1)
      for (const gate of gates) yield* Deferred.succeed(gate, undefined)
      yield* Fiber.joinAll(fibers)
      expect(order).toEqual([0, 1, 2, 3, 4, 5])
      expect(permits.taken()).toBe(0)
    }),
  )

  it.effect("a release wakes one waiter, not all of them", () =>
    Effect.gen(function* () {
      const permits = Permits.unsafeMake(1)
      const gate = yield* Deferred.make<void>()
      let starts = 0
      const holder = yield* Effect.fork(permits.withPermit(Deferred.await(gate)))
      yield* settle
      const waiters = yield* Effect.forEach(Array.from({ length: 50 }), () =>
        Effect.fork(permits.withPermit(Effect.sync(() => void starts++).pipe(Effect.zipRight(Effect.never)))),
      )
      yield* settle
      expect(permits.waiting()).toBe(50)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      yield* settle
      // exactly one waiter holds the permit; the other 49 still wait, queued once each
      expect(starts).toBe(1)
      expect(permits.waiting()).toBe(49)
      expect(permits.taken()).toBe(1)
      yield* Fiber.interruptAll(waiters)
      expect(permits.taken()).toBe(0)
      expect(permits.waiting()).toBe(0)
    }),
  )

  it.effect("a holder that fails or dies returns its permit", () =>
    Effect.gen(function* () {
      const permits = Permits.unsafeMake(1)
      const failed = yield* Effect.exit(permits.withPermit(Effect.fail("no")))
      expect(Exit.isFailure(failed)).toBe(true)
      const died = yield* Effect.exit(permits.withPermit(Effect.die("boom")))
      expect(Exit.isFailure(died)).toBe(true)
      expect(permits.taken()).toBe(0)
      expect(yield* permits.withPermit(Effect.succeed(7))).toBe(7)
    }),
  )

  it.effect("an interrupted waiter leaves the queue; one handed a permit as it is interrupted passes it on", () =>
    Effect.gen(function* () {
      const permits = Permits.unsafeMake(1)
      const gate = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(permits.withPermit(Deferred.await(gate)))
      yield* settle
      const first = yield* Effect.fork(permits.withPermit(Effect.never))
      const second = yield* Effect.fork(permits.withPermit(Effect.succeed("second")))
      yield* settle
      expect(permits.waiting()).toBe(2)
      // the permit is handed to `first` and `first` is interrupted before it runs
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.interrupt(first)
      yield* Fiber.join(holder)
      expect(yield* Fiber.join(second)).toBe("second")
      expect(permits.taken()).toBe(0)
      expect(permits.waiting()).toBe(0)
    }),
  )

  it.effect("property: any mix of holders that finish, fail or are interrupted ends with no permit held", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 4 }),
          fc.array(fc.constantFrom("ok", "fail", "interrupt-waiting", "interrupt-running"), { minLength: 1, maxLength: 30 }),
          async (size, plan) => {
            const permits = Permits.unsafeMake(size)
            let running = 0
            let most = 0
            await Effect.runPromise(
              Effect.gen(function* () {
                const fibers = yield* Effect.forEach(plan, (kind) =>
                  Effect.fork(
                    permits.withPermit(
                      Effect.suspend(() => {
                        running++
                        most = Math.max(most, running)
                        return Effect.zipRight(
                          Effect.yieldNow(),
                          kind === "fail" ? Effect.fail("failed") : kind === "interrupt-running" ? Effect.never : Effect.void,
                        ).pipe(Effect.ensuring(Effect.sync(() => void running--)))
                      }),
                    ),
                  ),
                )
                yield* Effect.forEach(plan, (kind, i) => (kind.startsWith("interrupt") ? Fiber.interrupt(fibers[i]!) : Effect.void))
                yield* Effect.forEach(fibers, (fiber) => Fiber.await(fiber))
              }),
            )
            expect(most).toBeLessThanOrEqual(size)
            expect(permits.taken()).toBe(0)
            expect(permits.waiting()).toBe(0)
          },
        ),
        { numRuns: 200 },
      ),
    ),
  )
  it.effect("a slot's release hands the permit on while its holder still runs, once", () =>
    Effect.gen(function* () {
      const permits = Permits.unsafeMake(1)
      const released = Deferred.unsafeMake<void>(FiberId.none)
      const finish = Deferred.unsafeMake<void>(FiberId.none)
      const order: string[] = []
      const holder = yield* Effect.fork(
        permits.withSlot((slot) =>
          Effect.gen(function* () {
            order.push("a runs")
            yield* slot.release
            // a second call returns nothing more
            yield* slot.release
            yield* Deferred.succeed(released, undefined)
            yield* Deferred.await(finish)
            order.push("a ends")
          }),
        ),
      )
      yield* Deferred.await(released)
      const next = yield* Effect.fork(permits.withPermit(Effect.sync(() => void order.push("b runs"))))
      const third = yield* Effect.fork(permits.withPermit(Effect.sync(() => void order.push("c runs"))))
      yield* settle
      // b got a's permit while a still runs; c waits for b's
      expect(order).toEqual(["a runs", "b runs", "c runs"])
      yield* Deferred.succeed(finish, undefined)
      yield* Fiber.joinAll([holder, next, third])
      expect(order).toEqual(["a runs", "b runs", "c runs", "a ends"])
      // a's end returned no second permit
      expect(permits.taken()).toBe(0)
      // noSlot releases nothing: a plain permit stays held
      const plain = yield* Effect.fork(permits.withPermit(Effect.zipRight(Permits.noSlot.release, Effect.never)))
      yield* settle
      expect(permits.taken()).toBe(1)
      const blocked = yield* Effect.fork(permits.withPermit(Effect.void))
      yield* settle
      expect(permits.waiting()).toBe(1)
      yield* Fiber.interrupt(plain)
      yield* Fiber.join(blocked)
      expect(permits.taken()).toBe(0)
    }),
  )

  it.effect("a slot is returned once whatever its holder's end (failure, interruption after releasing early)", () =>
    Effect.gen(function* () {
      const permits = Permits.unsafeMake(1)
      expect(yield* Effect.exit(permits.withSlot(() => Effect.fail("boom")))).toEqual(Exit.fail("boom"))
      expect(permits.taken()).toBe(0)
      const holder = yield* Effect.fork(permits.withSlot((slot) => Effect.zipRight(slot.release, Effect.never)))
      yield* settle
      expect(permits.taken()).toBe(0)
      yield* Fiber.interrupt(holder)
      expect(permits.taken()).toBe(0)
      yield* permits.withPermit(Effect.void)
      expect(permits.taken()).toBe(0)
    }),
  )

  it.effect("a slot released while still waiting for its permit gives nothing back", () =>
    Effect.gen(function* () {
      const permits = Permits.unsafeMake(1)
      const gate = Deferred.unsafeMake<void>(FiberId.none)
      const first = yield* Effect.fork(permits.withPermit(Deferred.await(gate)))
      yield* settle
      let leaked: Permits.Slot | undefined
      const waiter = yield* Effect.fork(
        permits.withSlot((slot) => {
          leaked = slot
          return Effect.void
        }),
      )
      yield* settle
      expect(permits.waiting()).toBe(1)
      yield* leaked!.release
      // still one taken (the first holder's), the waiter still waiting
      expect(permits.taken()).toBe(1)
      expect(permits.waiting()).toBe(1)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.joinAll([first, waiter])
      expect(permits.taken()).toBe(0)
    }),
  )
})
