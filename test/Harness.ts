/**
 * Shared setup of the end-to-end tests: a throwaway Postgres schema, a
 * unique subject root, a real worker process on both, and a plain NATS
 * connection that speaks the documented JSON (as a client in any language
 * would).
 */
import { TestDatabase, TestNats, WorkerProcess, Workloads } from "@ctxd/testing"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, Exit, Scope } from "effect"
import pg from "pg"
import { randomBytes } from "node:crypto"

export interface Harness {
  readonly root: string
  readonly schema: string
  /** The database's URL (the schema is {@link schema}). */
  readonly url: string
  readonly nc: NatsConnection
  readonly worker: WorkerProcess.WorkerProcess
  /** Starts another worker on the same schema and root. */
  readonly startWorker: (env?: Record<string, string>) => Promise<WorkerProcess.WorkerProcess>
  /** Sends raw bytes (or a JSON value) to a turn subject and parses the reply. */
  readonly request: (subject: string, body: unknown, timeoutMs?: number) => Promise<any> // eslint-disable-line @typescript-eslint/no-explicit-any
  readonly turnSubject: (tenant: string, session: string) => string
  /** Runs SQL against the test schema. */
  readonly sql: <R extends object = Record<string, unknown>>(text: string, params?: unknown[]) => Promise<R[]>
  readonly close: () => Promise<void>
}

export const start = async (env: Record<string, string> = {}): Promise<Harness> => {
  const scope = Effect.runSync(Scope.make())
  const db = await Effect.runPromise(Scope.extend(TestDatabase.make, scope))
  const root = `t_${randomBytes(5).toString("hex")}`
  const baseEnv = { DATABASE_URL: db.url, CTXD_DB_SCHEMA: db.schema, CTXD_SUBJECT_ROOT: root, ...env }
  const workers: WorkerProcess.WorkerProcess[] = []
  const startWorker = async (extra: Record<string, string> = {}) => {
    const worker = await WorkerProcess.start({ ...baseEnv, ...extra })
    workers.push(worker)
    return worker
  }
  const worker = await startWorker()
  const nc = await connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222" })
  const pool = new pg.Pool({ connectionString: db.url, max: 2, options: `-c search_path=${db.schema}` })
  const encoder = new TextEncoder()
  return {
    root,
    schema: db.schema,
    url: db.url,
    nc,
    worker,
    startWorker,
    turnSubject: (tenant, session) => `${root}.v1.turn.${tenant}.${session}`,
    request: async (subject, body, timeoutMs = 10_000) => {
      const data = body instanceof Uint8Array ? body : encoder.encode(typeof body === "string" ? body : JSON.stringify(body))
      const reply = await nc.request(subject, data, { timeout: timeoutMs })
      return reply.json()
    },
    sql: async (text, params) => (await pool.query(text, params)).rows,
    close: async () => {
      await Promise.all(workers.map((w) => w.stop()))
      await nc.drain()
      await TestNats.dropStreams(root)
      await pool.end()
      await Effect.runPromise(Scope.close(scope, Exit.void))
    },
  }
}

/** A transaction a test holds open in Postgres, for the worker's statements to wait behind. */
export interface Hold {
  /** The worker's statements waiting for it now (Postgres backends it blocks). */
  readonly blocked: () => Promise<number>
  /** Resolves once at least `n` statements wait for it (throws after `timeoutMs`). */
  readonly untilBlocked: (n?: number, timeoutMs?: number) => Promise<void>
  /** Rolls it back: what waited goes on. */
  readonly release: () => Promise<void>
}

/**
 * Opens a transaction on `url`'s `schema` and runs `statements` in it, held
 * until {@link Hold.release}: e.g. an `INSERT INTO ctxd_sessions` of a session
 * not stored yet, or a `SELECT … FOR UPDATE` of stored ones, holds every
 * commit of those sessions (their turns stay in flight, the others commit).
 */
export const hold = async (
  url: string,
  schema: string,
  statements: ReadonlyArray<{ readonly text: string; readonly params?: ReadonlyArray<unknown> }>,
): Promise<Hold> => {
  const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` })
  await client.connect()
  const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid
  await client.query("BEGIN")
  for (const s of statements) await client.query(s.text, s.params === undefined ? [] : [...s.params])
  // a second connection asks who waits: the holding one stays idle in its transaction
  const watcher = new pg.Client({ connectionString: url })
  await watcher.connect()
  const blocked = async () =>
    Number(
      (
        await watcher.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE $1::integer = ANY (pg_blocking_pids(pid))", [
          pid,
        ])
      ).rows[0]!.n,
    )
  let released = false
  return {
    blocked,
    untilBlocked: async (n = 1, timeoutMs = 20_000) => {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const now = await blocked()
        if (now >= n) return
        if (Date.now() > deadline) throw new Error(`${now} statement(s) waiting for the held transaction, not ${n}, after ${timeoutMs} ms`)
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    },
    release: async () => {
      if (released) return
      released = true
      try {
        await client.query("ROLLBACK")
      } finally {
        await Promise.all([client.end(), watcher.end()])
      }
    },
  }
}

/** Turn `k` of the bundled tau-bench session `source` (its index in `Workloads.tauBenchSessions()`) as an Anthropic turn request (turn ids `t<k>`). */
export const tauTurns = (source: number) => {
  const session = Workloads.toAnthropic(Workloads.tauBenchSessions()[source]!)
  return (k: number) => ({
    turnId: `t${k}`,
    format: "anthropic",
    model: { provider: "anthropic", name: "claude-sonnet-4-5" },
    system: session.system,
    tools: session.tools,
    messages: session.turns[k]!.messages,
  })
}
