/**
 * The V8 flags a worker sets on itself as it starts, before the rest of it
 * is loaded (`main.ts` imports this module first), so they hold however it
 * is launched (`npm start`, the container, a test harness).
 *
 * `--external-memory-accounted-in-global-limit` (issue 18): a turn makes
 * ~60 KB of Buffers (the request read from NATS, the reply's UTF-8, its
 * Brotli form, the Postgres bind message, the NATS publish) that die with
 * it, yet V8 by default starts a full mark-compact of the whole heap each
 * time the memory outside the JS heap has grown by a fixed 64 MB, whatever
 * became garbage since: at ~800 turns/s that was 12 of the 17 mark-compacts
 * of a bench run (`--trace-incremental-marking`: "external memory
 * pressure"), one every ~2 s over a ~100 MB live heap. With the flag, that
 * memory counts toward the heap's own growing limit instead: 7
 * mark-compacts, none for external memory, and the worker's CPU per turn
 * fell ~8 % (e2e bench, alternating runs); its peak RSS under the burst
 * bench stayed the same (621 against 623 MiB).
 *
 * Node refuses V8 flags in `NODE_OPTIONS`; on the `node` command line, a
 * flag of this list given either way (`--no-…` to turn it off) is left as
 * given.
 */
import { setFlagsFromString } from "node:v8"

/** The flags set unless the command line names them. */
export const defaults: ReadonlyArray<string> = ["--external-memory-accounted-in-global-limit"]

/** A flag's name without its `--`/`--no-` prefix, with `_` read as `-` (V8 takes both). */
const nameOf = (arg: string): string =>
  arg
    .replace(/=.*$/, "")
    .replace(/^--(no-)?/, "")
    .replaceAll("_", "-")

/** The flags of {@link defaults} that `execArgv` (node's own command-line options) does not name. */
export const toSet = (execArgv: ReadonlyArray<string>): ReadonlyArray<string> => {
  const named = new Set(execArgv.filter((arg) => arg.startsWith("--")).map(nameOf))
  return defaults.filter((flag) => !named.has(nameOf(flag)))
}

/** The flags this process set (logged at start). */
export const applied: ReadonlyArray<string> = toSet(process.execArgv)
for (const flag of applied) setFlagsFromString(flag)
