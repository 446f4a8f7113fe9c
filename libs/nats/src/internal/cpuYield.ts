/** The CPU yield of a worker's turn loop: let socket reads in after a slice of CPU work. */
import { Effect } from "effect"

/** Resumes after the event loop's next check phase (after pending I/O callbacks, such as socket reads, ran). */
export const nextMacrotask: Effect.Effect<void> = Effect.async<void>((resume) => {
  const id = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(id))
})

/** When the event loop last ran its check phase (so had polled its sockets just before), as far as {@link yieldIfBusy} saw. */
let polledAt = performance.now()
let armed = false
const markPolled = () => {
  armed = false
  polledAt = performance.now()
}

/**
 * Resumes at once while the event loop polled its sockets less than
 * `sliceMs` ago, else one event-loop turn later. For CPU work that may run
 * back to back (a turn slot freed at a commit goes to the next turn at
 * once): a run of it longer than `sliceMs` lets the socket reads in (Busy
 * answers, the server's pending bytes for this client) before it goes on,
 * while short turns under a steady load do not pay an event-loop turn each
 * (each turn of the loop costs worker CPU, and NATS and Postgres then get
 * their messages one by one).
 * After an idle spell the first call waits one loop turn: no check phase
 * marked the polls meanwhile.
 */
export const yieldIfBusy = (sliceMs: number): Effect.Effect<void> =>
  Effect.suspend(() => {
    // the next check phase (after the next poll) tells when the loop last polled
    if (!armed) {
      armed = true
      setImmediate(markPolled)
    }
    return performance.now() - polledAt < sliceMs ? Effect.void : nextMacrotask
  })
