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
 * A permit held as a {@link Slot} (`withSlot`) may be given back before its
 * effect ends, once, by the code holding it (`Slot.release`): the router's
 * turn slots bound the turns' CPU work, and a turn whose rest is only its
 * commit's wait hands its slot to the next turn.
 */
import { Deferred, Effect, Exit, FiberId } from "effect"

/**
 * A permit its holder may give back before its effect ends: `release` hands
 * it to the next waiter now; it is idempotent (a second call, and the end of
 * the effect after it, return nothing more). For work whose rest only waits
 * (a commit to Postgres): the permit bounds what runs, not what waits.
 */
export interface Slot {
  readonly release: Effect.Effect<void>
}

/** A slot that holds nothing (its `release` does nothing): for a caller running outside any permit. */
export const noSlot: Slot = { release: Effect.void }

export interface Permits {
  /** Runs `self` holding one permit, after the fibers already waiting for one. */
  readonly withPermit: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** As `withPermit`, handing `self` the permit as a {@link Slot} it may give back before it ends. */
  readonly withSlot: <A, E, R>(self: (slot: Slot) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Permits held now. */
  readonly taken: () => number
  /** Fibers waiting for a permit. */
  readonly waiting: () => number
}

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

  const acquire = <A, E, R>(
    self: Effect.Effect<A, E, R>,
    hold: <B, X, Y>(held: Effect.Effect<B, X, Y>) => Effect.Effect<B, X, Y>,
  ): Effect.Effect<A, E, R> =>
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
  // the permit returned once: by its holder (the slot's release) or at the end, whichever comes first
  const withSlot = <A, E, R>(self: (slot: Slot) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      // held from the moment the permit is taken: a release before that (a slot leaked out) gives nothing
      let held = false
      const giveBack = () => {
        if (held) {
          held = false
          release()
        }
      }
      const slot: Slot = { release: Effect.sync(giveBack) }
      return acquire(self(slot), (run) =>
        Effect.suspend(() => {
          held = true
          return Effect.flatMap(Effect.exit(run), (exit) => {
            giveBack()
            return exit
          })
        }),
      )
    })

  return { withPermit, withSlot, taken: () => taken, waiting: () => waiters.length }
}

/** {@link unsafeMake} as an effect. */
export const make = (permits: number): Effect.Effect<Permits> => Effect.sync(() => unsafeMake(permits))
