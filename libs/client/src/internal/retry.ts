/**
 * The client's retry policy: transient failures again with exponential
 * backoff until a deadline. Apart from `ContextClient.ts` because it needs
 * nothing of the client but how long to keep trying.
 */
import { Clock, Duration, Effect, Schedule } from "effect"
import type * as ClientError from "../ClientError.ts"

/**
 * `self` again while it fails with a retryable error and `retryForMs` have
 * not passed since the first attempt: exponential backoff (50 ms doubling,
 * at most 1 s, jittered), never sleeping past the deadline. `what` names the
 * call in the debug log of each retry.
 */
export const retrying =
  (retryForMs: number) =>
  <A>(self: Effect.Effect<A, ClientError.ClientError>, what: string): Effect.Effect<A, ClientError.ClientError> =>
    Effect.flatMap(Clock.currentTimeMillis, (start) => {
      const deadline = start + retryForMs
      const remaining = Effect.map(Clock.currentTimeMillis, (now) => Math.max(0, deadline - now))
      const schedule = Schedule.exponential(Duration.millis(50), 2).pipe(
        Schedule.union(Schedule.spaced(Duration.seconds(1))),
        Schedule.jittered,
        Schedule.modifyDelayEffect((_, delay) => Effect.map(remaining, (left) => Duration.min(delay, Duration.millis(left)))),
      )
      return self.pipe(
        Effect.tapError((error) =>
          error.retryable ? Effect.logDebug(`${what}: ${error.code} (${error.message}); retrying`) : Effect.void,
        ),
        Effect.retry({
          schedule,
          while: (error) => Effect.map(remaining, (left) => error.retryable && left > 0),
        }),
      )
    })
