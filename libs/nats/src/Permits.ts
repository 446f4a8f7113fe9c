/**
 * A counting semaphore that hands each freed permit to the longest waiting
 * fiber, and wakes only that one.
 *
 * Effect's `Semaphore` wakes every waiter on each release and lets them race
 * for the permit (the losers queue again): with hundreds of requests waiting
 * for a handler slot under load, each finished request cost as many fiber
 * wake-ups. Here a release is O(1) and the order is strict FIFO.
 *
 * Interruption: a waiter interrupted before its turn leaves the queue; one
 * interrupted just as a permit was handed to it passes the permit on; a
 * holder's permit is returned however its effect ends.
 *
 * A releasable permit (`withReleasablePermit`) may be given back before its
 * effect ends, once ({@link releaseEarly}): the router's turn slots bound the
 * turns' CPU work, and a turn whose rest is only its commit's wait gives its
 * slot to the next turn.
 */
import { Deferred, Effect, Exit, FiberId, FiberRef } from "effect"

export interface Permits {
  /** Runs `self` holding one permit, after the fibers already waiting for one. */
  readonly withPermit: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** As `withPermit`, and `self` may give its permit back before it ends ({@link releaseEarly}). */
  readonly withReleasablePermit: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Permits held now. */
  readonly taken: () => number
  /** Fibers waiting for a permit. */
  readonly waiting: () => number
}

/** What gives back the permit of the innermost `withReleasablePermit` running (a no-op outside one). */
const currentRelease = FiberRef.unsafeMake<Effect.Effect<void>>(Effect.void)

/**
 * Gives back the permit the running `withReleasablePermit` holds, now, to the
 * next waiter (once: the end of its effect then returns nothing). For work
 * whose rest only waits (a commit to Postgres): the permit bounds what runs,
 * not what waits. A no-op outside one.
 */
export const releaseEarly: Effect.Effect<void> = Effect.flatten(FiberRef.get(currentRelease))

/** A semaphore of `permits` (at least 1). */
export const unsafeMake = (permits: number): Permits => {
  const size = Math.max(1, Math.floor(permits))
  let taken = 0
  const waiters: Array<Deferred.Deferred<void>> = []

  /** Returns a permit: to the first waiter if any (it stays taken), else to the pool. */
  const release = () => {
    const next = waiters.shift()
    if (next === undefined) taken--
    else Deferred.unsafeDone(next, Exit.void)
  }
  // inside the uninterruptible region: the exit taken, the permit returned, the exit passed on (fewer steps than `ensuring`)
  const holding = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(Effect.exit(self), (exit) => {
      release()
      return exit
    })

  // the permit returned once: early (releaseEarly) or at the end, whichever comes first
  const releasable = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      let held = true
      const giveBack = () => {
        if (held) {
          held = false
          release()
        }
      }
      return Effect.flatMap(Effect.exit(Effect.locally(self, currentRelease, Effect.sync(giveBack))), (exit) => {
        giveBack()
        return exit
      })
    })

  const acquire = <A, E, R>(self: Effect.Effect<A, E, R>, hold: <B, X, Y>(held: Effect.Effect<B, X, Y>) => Effect.Effect<B, X, Y>): Effect.Effect<A, E, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        if (taken < size) {
          taken++
          return hold(restore(self))
        }
        const turn = Deferred.unsafeMake<void>(FiberId.none)
        waiters.push(turn)
        const wait = restore(Deferred.await(turn)).pipe(
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              const at = waiters.indexOf(turn)
              if (at >= 0) waiters.splice(at, 1)
              // handed a permit as we were interrupted: pass it on
              else release()
            }),
          ),
        )
        return Effect.zipRight(wait, hold(restore(self)))
      }),
    )

  const withPermit = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => acquire(self, holding)
  const withReleasablePermit = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => acquire(self, releasable)

  return { withPermit, withReleasablePermit, taken: () => taken, waiting: () => waiters.length }
}

/** {@link unsafeMake} as an effect. */
export const make = (permits: number): Effect.Effect<Permits> => Effect.sync(() => unsafeMake(permits))
