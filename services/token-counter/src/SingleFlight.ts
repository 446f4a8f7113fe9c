/**
 * Single-flight: concurrent requests for the same key share one run of the
 * work. The first caller starts the work in a fiber owned by the
 * single-flight's scope (not by the caller), so a caller that gives up (its
 * deadline passed, it was interrupted) neither cancels the work for the others
 * nor leaves them waiting forever: the work finishes on its own terms (bound
 * it with a timeout) and every waiter gets its result. The key is released
 * when the work ends, so later calls start afresh (cache the result yourself).
 */
import { Deferred, Effect, type Scope } from "effect"

/** A single-flight group. */
export interface SingleFlight {
  /** Runs `effect` for `key`, or joins the run already in flight for `key`. */
  readonly run: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Keys with work in flight now. */
  readonly inFlight: () => number
  /** Calls that joined a run already in flight instead of starting one. */
  readonly shared: () => number
}

/** A single-flight group whose work runs in the current scope (interrupted when it closes). */
export const make: Effect.Effect<SingleFlight, never, Scope.Scope> = Effect.gen(function* () {
  const scope = yield* Effect.scope
  const pending = new Map<string, Deferred.Deferred<unknown, unknown>>()
  let shared = 0

  const run = <A, E, R>(key: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.uninterruptibleMask((restore) =>
      // check and register in one synchronous step: no other fiber can slip in between
      Effect.fiberIdWith((fiberId) => {
        const existing = pending.get(key) as Deferred.Deferred<A, E> | undefined
        if (existing !== undefined) {
          shared++
          return restore(Deferred.await(existing))
        }
        const deferred = Deferred.unsafeMake<A, E>(fiberId)
        pending.set(key, deferred as Deferred.Deferred<unknown, unknown>)
        // The fiber is forked inside the mask and would inherit it: only the exit
        // hook stays uninterruptible, the work itself can be interrupted (by its own
        // timeout, and by the scope closing), or a hung call could outlast both.
        const work = Effect.interruptible(effect).pipe(
          Effect.onExit((exit) =>
            Effect.suspend(() => {
              if (pending.get(key) === deferred) pending.delete(key)
              return Deferred.done(deferred, exit)
            }),
          ),
        )
        // The waiters get the failure through the deferred; the fiber itself ends
        // with its exit as a value, so the runtime does not log it as unhandled
        // (with the whole cause, a provider's error included).
        return Effect.forkIn(Effect.exit(work), scope).pipe(Effect.zipRight(restore(Deferred.await(deferred))))
      }),
    )

  return { run, inFlight: () => pending.size, shared: () => shared }
})
