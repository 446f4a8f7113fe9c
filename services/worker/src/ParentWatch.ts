/**
 * A worker stops, as on SIGTERM, when the process that started it exits.
 *
 * `npm start` and `npx ctxd serve` run the worker under `sh -c`, which does
 * not pass signals on: a signal to npm ended npm and the shell and left the
 * worker running with parent 1. Watching the parent covers every launcher in
 * between (npm, npx, a shell, a test harness), and also one that was killed
 * with SIGKILL and could forward nothing. A worker started by init or as a
 * container's PID 1 (parent 0 or 1) has nothing to watch.
 */
import { Effect, Schedule } from "effect"

/** Whether a process whose parent was `initial` has lost it (now `current`). */
export const orphaned = (initial: number, current: number): boolean => initial > 1 && current !== initial

/**
 * Checks the parent every `interval` (default 1 s); once `initial` is gone it
 * logs so and sends this process SIGTERM (the same graceful shutdown).
 * Runs until interrupted; returns at once when there is no parent to watch.
 */
export const watch = (initial: number, interval: Schedule.Schedule<unknown> = Schedule.spaced("1 second")) =>
  initial <= 1
    ? Effect.void
    : Effect.sync(() => process.ppid).pipe(
        Effect.repeat({ schedule: interval, while: (current) => !orphaned(initial, current) }),
        Effect.andThen(
          Effect.suspend(() =>
            Effect.logWarning(`the process that started this worker (pid ${initial}) exited (parent now ${process.ppid}): shutting down`),
          ),
        ),
        Effect.andThen(Effect.sync(() => process.kill(process.pid, "SIGTERM"))),
      )
