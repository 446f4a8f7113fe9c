/**
 * A worker stops, as on SIGTERM, when the process that started it exits.
 *
 * `npm start` and `npx ctxd serve` run the worker under `sh -c`, which does
 * not pass signals on: a signal to npm ended npm and the shell and left the
 * worker running with parent 1. Watching the parent covers every launcher in
 * between (npm, npx, a shell, a test harness), and also one that was killed
 * with SIGKILL and could forward nothing. When the parent is such a `sh -c`
 * wrapper (npx's: it stays while npx is gone), the process that started the
 * wrapper is watched too (Linux, from /proc; elsewhere the parent only). A
 * user's own shell is never a wrapper, so `nohup npm start &` outlives it. A
 * worker started by init or as a container's PID 1 (parent 0 or 1) has
 * nothing to watch.
 */
import { Effect, Schedule } from "effect"
import { readFileSync } from "node:fs"

/** Whether a process whose parent was `initial` has lost it (now `current`). */
export const orphaned = (initial: number, current: number): boolean => initial > 1 && current !== initial

/** What the watch reads about other processes. */
export interface Processes {
  /** The parent of `pid`, `undefined` when it is gone or cannot be read. */
  readonly parentOf: (pid: number) => number | undefined
  /** The command line of `pid` (empty when it cannot be read). */
  readonly argv: (pid: number) => ReadonlyArray<string>
}

/** The processes as /proc shows them (Linux; elsewhere nothing can be read and only the parent is watched). */
export const proc: Processes = {
  parentOf: (pid) => {
    try {
      // `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so read after its last `)`
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      return Number.isInteger(ppid) ? ppid : undefined
    } catch {
      return undefined
    }
  },
  argv: (pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").slice(0, -1)
    } catch {
      return []
    }
  },
}

/** Whether `argv` is a shell running one command line (`sh -c ...`), as npm and npx start a command. */
export const isWrapper = (argv: ReadonlyArray<string>): boolean => /(^|\/)(sh|dash|bash|ash|zsh)$/.test(argv[0] ?? "") && argv[1] === "-c"

/**
 * The links to watch, `[child, its parent]`, from this process's `parent`
 * up through each `sh -c` wrapper to the process that started it (at most 4).
 */
export const links = (self: number, parent: number, processes: Processes = proc): Array<readonly [number, number]> => {
  const out: Array<readonly [number, number]> = [[self, parent]]
  let child = parent
  while (out.length < 5 && isWrapper(processes.argv(child))) {
    const up = processes.parentOf(child)
    if (up === undefined || up <= 1) break
    out.push([child, up])
    child = up
  }
  return out
}

/**
 * Checks the launchers every `interval` (default 1 s); once one of them is
 * gone it logs so and sends this process SIGTERM (the same graceful
 * shutdown). Runs until interrupted; returns at once when there is no parent
 * to watch.
 */
export const watch = (initial: number, interval: Schedule.Schedule<unknown> = Schedule.spaced("1 second"), processes: Processes = proc) => {
  if (initial <= 1) return Effect.void
  const watched = links(process.pid, initial, processes)
  let gone: readonly [number, number] | undefined
  const check = () =>
    (gone = watched.find(([child, parent]) =>
      child === process.pid ? orphaned(parent, process.ppid) : processes.parentOf(child) !== parent,
    ))
  return Effect.sync(check).pipe(
    Effect.repeat({ schedule: interval, while: (lost) => lost === undefined }),
    Effect.andThen(
      Effect.suspend(() =>
        Effect.logWarning(
          `the process that started this worker (pid ${gone?.[1]}) exited (its child ${gone?.[0]} now has parent ${gone === undefined ? "?" : (processes.parentOf(gone[0]) ?? "none")}): shutting down`,
        ),
      ),
    ),
    Effect.andThen(Effect.sync(() => process.kill(process.pid, "SIGTERM"))),
  )
}
