/**
 * Group commit: items submitted while `statements` statements are in flight
 * wait, and go out together, up to `maxBatch` in one statement (one round
 * trip, one transaction, one WAL flush for them all) as soon as a statement
 * returns. Under a light load an item goes out at once, alone; under a heavy
 * one the batches grow by themselves, with no timer.
 *
 * A batch that fails as a whole (one item Postgres refuses rolls back the
 * statement, and so the others) is run again item by item, so each item gets
 * its own outcome. An item whose submitter is interrupted before its
 * statement went out is dropped; once sent, it lands or not with the others.
 * The queue holds what the callers hold already: the turns waiting for their
 * commit (bounded by the worker's turn endpoints, which take a batch per
 * statement in flight and one more gathering behind them: `FlowControl`'s
 * commit waits, derived from the options it hands the store).
 */
import { Effect, Exit, Runtime } from "effect"

/** How commits are grouped. */
export interface Options {
  /** Items per statement at most; 1: every item alone. */
  readonly maxBatch: number
  /** Statements in flight at once, at least 1. */
  readonly statements: number
}

/** How items run: alone, and many in one statement (one outcome per item, in order). */
export interface Run<I, O, E> {
  readonly one: (item: I) => Effect.Effect<O, E>
  readonly many: (items: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<O>, E>
}

/** What the caller learns of the statements (for its metrics). */
export interface Observer {
  /** A statement went through carrying `items` (1: an item alone). */
  readonly committed: (items: number) => void
  /** A batch failed as a whole: its items run again one by one. */
  readonly split: () => void
  /** The items submitted and not resumed yet (waiting or in a statement) are `items` now. */
  readonly waiting: (items: number) => void
}

/**
 * `options` as the group commit runs them: each at least 1, whole (the
 * worker's come normalized so already, by `FlowControl.derive`; this keeps a
 * direct caller's options safe).
 */
export const normalize = (options: Options): Options => ({
  maxBatch: Math.max(1, Math.floor(options.maxBatch)),
  statements: Math.max(1, Math.floor(options.statements)),
})

export interface GroupCommit<I, O, E> {
  /** Runs `item` with the others waiting now; its own outcome. */
  readonly submit: (item: I) => Effect.Effect<O, E>
}

interface Entry<I, O, E> {
  readonly item: I
  readonly resume: (exit: Exit.Exit<O, E>) => void
}

export const make = <I, O, E>(
  options: Options,
  run: Run<I, O, E>,
  runtime: Runtime.Runtime<never>,
  observer?: Observer,
): GroupCommit<I, O, E> => {
  const { maxBatch, statements } = normalize(options)
  const queue: Array<Entry<I, O, E>> = []
  let inFlight = 0
  /** Items submitted and not resumed yet. */
  let pending = 0
  const settled = (entry: Entry<I, O, E>, exit: Exit.Exit<O, E>) => {
    observer?.waiting(--pending)
    entry.resume(exit)
  }
  // runs an effect, then a callback with its exit (never throws: a defect is an exit too)
  const launch = Runtime.runCallback(runtime)

  const alone = (entry: Entry<I, O, E>, done: () => void) =>
    launch(run.one(entry.item), {
      onExit: (exit) => {
        if (Exit.isSuccess(exit)) observer?.committed(1)
        settled(entry, exit)
        done()
      },
    })

  const together = (batch: ReadonlyArray<Entry<I, O, E>>, done: () => void) =>
    launch(run.many(batch.map((e) => e.item)), {
      onExit: (exit) => {
        if (Exit.isSuccess(exit) && exit.value.length === batch.length) {
          observer?.committed(batch.length)
          batch.forEach((e, i) => settled(e, Exit.succeed(exit.value[i]!)))
          return done()
        }
        // rolled back whole: each item alone, for its own outcome
        observer?.split()
        let left = batch.length
        for (const entry of batch) alone(entry, () => --left === 0 && done())
      },
    })

  const pump = (): void => {
    while (inFlight < statements && queue.length > 0) {
      const batch = queue.splice(0, maxBatch)
      inFlight++
      const done = () => {
        inFlight--
        pump()
      }
      if (batch.length === 1) alone(batch[0]!, done)
      else together(batch, done)
    }
  }

  const submit = (item: I): Effect.Effect<O, E> =>
    Effect.async<O, E>((resume) => {
      const entry: Entry<I, O, E> = { item, resume }
      queue.push(entry)
      observer?.waiting(++pending)
      pump()
      // interrupted while waiting: not sent, dropped (once sent, it is no longer queued)
      return Effect.sync(() => {
        const at = queue.indexOf(entry)
        if (at < 0) return
        queue.splice(at, 1)
        observer?.waiting(--pending)
      })
    })

  return { submit }
}
