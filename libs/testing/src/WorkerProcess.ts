/**
 * Starts real `ctxd` worker processes (`node services/worker/src/main.ts`)
 * for integration tests, the demo and the benchmarks, and stops them with a
 * signal. Output is kept so a failing test can show it.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { join } from "node:path"

/** The repository root (this file is libs/testing/src/WorkerProcess.ts). */
export const repoRoot = join(import.meta.dirname, "..", "..", "..")

export interface WorkerProcess {
  readonly child: ChildProcess
  /** Everything the process wrote so far (stdout and stderr). */
  readonly output: () => string
  /** Resolves when a line containing `text` has been written. */
  readonly waitFor: (text: string, timeoutMs?: number) => Promise<void>
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
  const waiters = new Set<{ needle: string; resolve: () => void }>()
  const onData = (chunk: Buffer) => {
    text += chunk.toString("utf8")
    for (const waiter of waiters) {
      if (text.includes(waiter.needle)) {
        waiters.delete(waiter)
        waiter.resolve()
      }
    }
  }
  child.stdout.on("data", onData)
  child.stderr.on("data", onData)
  const exited = new Promise<number | string>((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal ?? "unknown")))

  const waitFor = (needle: string, timeoutMs = 15_000) =>
    new Promise<void>((resolve, reject) => {
      if (text.includes(needle)) return resolve()
      const waiter = { needle, resolve: () => (clearTimeout(timer), resolve()) }
      const timer = setTimeout(() => {
        waiters.delete(waiter)
        reject(new Error(`worker did not print ${JSON.stringify(needle)} within ${timeoutMs} ms:\n${text}`))
      }, timeoutMs)
      waiters.add(waiter)
      void exited.then((code) => {
        if (!waiters.has(waiter)) return
        waiters.delete(waiter)
        clearTimeout(timer)
        reject(new Error(`worker exited (${code}) before printing ${JSON.stringify(needle)}:\n${text}`))
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
    await waitFor("worker ready", options.readyTimeoutMs ?? 30_000)
  } catch (error) {
    await stop("SIGKILL")
    throw error
  }
  return { child, output: () => text, waitFor, stop }
}
