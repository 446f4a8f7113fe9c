/**
 * Starts real `ctxd` worker processes (`node services/worker/src/main.ts`)
 * for integration tests, the demo and the benchmarks, and stops them with a
 * signal. Output is kept so a failing test can show it.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { join } from "node:path"

/** The repository root (this file is libs/testing/src/WorkerProcess.ts). */
export const repoRoot = join(import.meta.dirname, "..", "..", "..")

/**
 * How long {@link start} waits for `worker ready` by default: 60 s. Startup
 * time is no product promise, and several workers starting at once on a
 * loaded machine take many times their usual second or two; a worker that
 * exits fails the wait at once, so only one that hangs waits this long.
 */
export const READY_TIMEOUT_MS = 60_000

/** What {@link WorkerProcess.waitFor} waits for: a text anywhere in the output, or a whole line that passes a test. */
export type Needle = string | ((line: string) => boolean)

export interface WorkerProcess {
  readonly child: ChildProcess
  /** Everything the process wrote so far (stdout and stderr). */
  readonly output: () => string
  /** Resolves when a line containing `needle` (a string), or a whole line `needle` accepts (a function), has been written. */
  readonly waitFor: (needle: Needle, timeoutMs?: number) => Promise<void>
  /** Sends `signal` and resolves with the exit code (or the signal name). */
  readonly stop: (signal?: NodeJS.Signals, timeoutMs?: number) => Promise<number | string>
}

/**
 * Spawns a worker with `env` added to this process's environment and waits
 * until it is ready. Its HTTP server is off (`CTXD_HTTP_PORT=0`) unless
 * `env` sets a port.
 */
export const start = async (
  env: Record<string, string>,
  options: {
    /** Default {@link READY_TIMEOUT_MS}. */
    readyTimeoutMs?: number
    /** False: return once spawned (the caller waits for what it needs with `waitFor`); default true: once `worker ready`. */
    ready?: boolean
    /** The checkout to run the worker of (default this one), e.g. an earlier release's for rolling-upgrade tests. */
    root?: string
    /** Options for `node` itself, before the script (e.g. V8 flags, which `NODE_OPTIONS` refuses). */
    nodeArgs?: ReadonlyArray<string>
  } = {},
): Promise<WorkerProcess> => {
  const root = options.root ?? repoRoot
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), join(root, "services/worker/src/main.ts")], {
    cwd: root,
    // no HTTP port unless asked for: tests run many workers at once on one host
    env: { ...process.env, LOG_LEVEL: "info", CTXD_HTTP_PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  })
  let text = ""
  const waiters = new Set<{ needle: Needle; resolve: () => void }>()
  /** Whether the output so far has `needle`; a line test sees only lines ended by a newline. */
  const found = (needle: Needle) =>
    typeof needle === "string"
      ? text.includes(needle)
      : text
          .split("\n")
          .slice(0, -1)
          .some((line) => needle(line))
  const onData = (chunk: Buffer) => {
    text += chunk.toString("utf8")
    for (const waiter of waiters) {
      if (found(waiter.needle)) {
        waiters.delete(waiter)
        waiter.resolve()
      }
    }
  }
  child.stdout.on("data", onData)
  child.stderr.on("data", onData)
  const exited = new Promise<number | string>((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal ?? "unknown")))

  const describe = (needle: Needle) => (typeof needle === "string" ? JSON.stringify(needle) : "a line that passes its test")
  const waitFor = (needle: Needle, timeoutMs = 15_000) =>
    new Promise<void>((resolve, reject) => {
      if (found(needle)) return resolve()
      const waiter = { needle, resolve: () => (clearTimeout(timer), resolve()) }
      const timer = setTimeout(() => {
        waiters.delete(waiter)
        reject(new Error(`worker did not print ${describe(needle)} within ${timeoutMs} ms:\n${text}`))
      }, timeoutMs)
      waiters.add(waiter)
      void exited.then((code) => {
        if (!waiters.has(waiter)) return
        waiters.delete(waiter)
        clearTimeout(timer)
        reject(new Error(`worker exited (${code}) before printing ${describe(needle)}:\n${text}`))
      })
    })

  const stop = async (signal: NodeJS.Signals = "SIGTERM", timeoutMs = 20_000) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal)
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    try {
      return await exited
    } finally {
      clearTimeout(timer)
    }
  }

  if (options.ready === false) return { child, output: () => text, waitFor, stop }
  try {
    await waitFor("worker ready", options.readyTimeoutMs ?? READY_TIMEOUT_MS)
  } catch (error) {
    await stop("SIGKILL")
    throw error
  }
  return { child, output: () => text, waitFor, stop }
}
