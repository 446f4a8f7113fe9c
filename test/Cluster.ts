/**
 * Several real worker processes on one throwaway schema and subject root,
 * for the sticky-routing tests: start and stop workers by id, read what
 * each one reports (health, gathered from all of them), read the shard
 * leases from Postgres, drive sessions through `ContextClient`, and cut a
 * worker off from Postgres with a TCP proxy the test controls.
 */
import { ContextClient } from "@ctxd/client"
import type { Health } from "@ctxd/contracts"
import { Assignment, ShardId } from "@ctxd/sharding"
import { TestDatabase, TestNats, WorkerProcess } from "@ctxd/testing"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, Exit, Scope } from "effect"
import { randomBytes } from "node:crypto"
import { createServer, connect as tcpConnect, type Server, type Socket } from "node:net"
import pg from "pg"

/** The lease TTL of every cluster test: 3 s (refresh 1 s, safety margin 600 ms). */
export const TTL_MS = 3_000
/**
 * The limit of a cluster test's `beforeAll` that starts workers at once and
 * waits up to 4 × TTL for their leases: the workers' ready wait, the
 * settle, and room for the schema. Startup time is no product promise.
 */
export const SETUP_TIMEOUT_MS = WorkerProcess.READY_TIMEOUT_MS + 4 * TTL_MS + 15_000
/** Shards in every test cluster (the default). */
export const SHARDS = ShardId.DEFAULT_SHARDS

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)))

export interface Cluster {
  readonly root: string
  readonly schema: string
  readonly url: string
  readonly nc: NatsConnection
  readonly workers: Map<string, WorkerProcess.WorkerProcess>
  /** Starts worker `id` (`CTXD_WORKER_ID`) with the cluster's env plus `env`; `root`: another checkout's worker. */
  readonly start: (id: string, env?: Record<string, string>, root?: string) => Promise<WorkerProcess.WorkerProcess>
  /** Every worker's health reply (all answer `<root>.v1.health`), by worker id. */
  readonly health: () => Promise<Map<string, Health.HealthReply>>
  /** Live shard leases per owner, from Postgres. */
  readonly owners: () => Promise<Map<string, ReadonlyArray<number>>>
  /** Waits until the live leases are exactly the shared assignment over `ids`; resolves with the ms it took. */
  readonly settled: (ids: ReadonlyArray<string>, timeoutMs: number) => Promise<number>
  readonly client: (options?: ContextClient.ContextClientOptions) => Promise<ContextClient.PromiseClient>
  readonly sql: <R extends object = Record<string, unknown>>(text: string, params?: unknown[]) => Promise<R[]>
  readonly close: () => Promise<void>
}

export const start = async (env: Record<string, string> = {}): Promise<Cluster> => {
  const scope = Effect.runSync(Scope.make())
  const db = await Effect.runPromise(Scope.extend(TestDatabase.make, scope))
  const root = `t_${randomBytes(5).toString("hex")}`
  const servers = process.env.NATS_URL ?? "nats://127.0.0.1:4222"
  const baseEnv = {
    DATABASE_URL: db.url,
    CTXD_DB_SCHEMA: db.schema,
    CTXD_SUBJECT_ROOT: root,
    CTXD_LEASE_TTL_MS: String(TTL_MS),
    ...env,
  }
  const workers = new Map<string, WorkerProcess.WorkerProcess>()
  const clients: Array<ContextClient.PromiseClient> = []
  const nc = await connect({ servers })
  const pool = new pg.Pool({ connectionString: db.url, max: 2, options: `-c search_path=${db.schema}` })
  const sql = async <R extends object>(text: string, params?: unknown[]) => (await pool.query(text, params)).rows as R[]

  const owners = async () => {
    const rows = await sql<{ owner: string; shard: number }>(
      "SELECT owner, shard FROM ctxd_shard_leases WHERE owner IS NOT NULL AND expires_at > now() ORDER BY shard",
    )
    const result = new Map<string, Array<number>>()
    for (const row of rows) result.set(row.owner, [...(result.get(row.owner) ?? []), row.shard])
    return result
  }

  return {
    root,
    schema: db.schema,
    url: db.url,
    nc,
    workers,
    start: async (id, extra = {}, workerRoot) => {
      const worker = await WorkerProcess.start(
        { ...baseEnv, CTXD_WORKER_ID: id, ...extra },
        workerRoot === undefined ? {} : { root: workerRoot },
      )
      workers.set(id, worker)
      return worker
    },
    health: async () => {
      const replies = new Map<string, Health.HealthReply>()
      const live = [...workers.values()].filter((w) => w.child.exitCode === null && w.child.signalCode === null).length
      const stream = await nc.requestMany(`${root}.v1.health`, "{}", { strategy: "count", maxMessages: live, maxWait: 2_000 })
      for await (const msg of stream) {
        const reply = msg.json<Health.HealthReply>()
        replies.set(reply.worker, reply)
      }
      return replies
    },
    owners,
    settled: async (ids, timeoutMs) => {
      const expected = Assignment.assign(ids, SHARDS)
      const started = Date.now()
      for (;;) {
        const held = await owners()
        const ok = ids.every((id) => {
          const want = Assignment.shardsOf(expected, id)
          const have = held.get(id) ?? []
          return have.length === want.length && have.every((s, i) => s === want[i])
        })
        if (ok && [...held.keys()].every((id) => ids.includes(id))) return Date.now() - started
        if (Date.now() - started > timeoutMs) {
          const counts = [...held].map(([id, shards]) => `${id}: ${shards.length}`).join(", ")
          throw new Error(`leases did not settle on ${ids.join(", ")} within ${timeoutMs} ms (${counts})`)
        }
        await sleep(50)
      }
    },
    client: async (options = {}) => {
      const client = await ContextClient.connect({ servers, root, ...options })
      clients.push(client)
      return client
    },
    sql,
    close: async () => {
      await Promise.all(clients.map((c) => c.close()))
      await Promise.all([...workers.values()].map((w) => w.stop("SIGTERM", 15_000)))
      await TestNats.dropStreams(root)
      await nc.drain()
      await pool.end()
      await Effect.runPromise(Scope.close(scope, Exit.void))
    },
  }
}

/** Starts the workers `ids` at once; if one fails, the error is thrown once all have started or failed (none is left behind). */
export const startAll = async (cluster: Cluster, ids: ReadonlyArray<string>, env?: Record<string, string>) => {
  const started = await Promise.allSettled(ids.map((id) => cluster.start(id, env)))
  const failed = started.find((s) => s.status === "rejected")
  if (failed !== undefined) throw failed.reason
}

/** One user turn of a scripted session: its message says which turn it is, so order is checkable in the store. */
export const turn = (session: string, index: number) => ({
  turnId: `${session}-t${index}`,
  format: "openai" as const,
  model: { provider: "openai" as const, name: "gpt-4o-mini" },
  system: "You are a test agent.",
  messages: [{ role: "user" as const, content: `turn ${index} of ${session}` }],
})

/** Per session of `tenant`: stored turns, and the turn indexes its messages carry in seq order. */
export const stored = async (cluster: Cluster, tenant: string) => {
  const rows = await cluster.sql<{ session: string; seqs: number[]; texts: string[]; turns: string }>(
    `SELECT s.session,
            array_agg(m.seq ORDER BY m.seq) AS seqs,
            array_agg(m.content -> 'parts' -> 0 ->> 'text' ORDER BY m.seq) AS texts,
            (SELECT count(*) FROM ctxd_turns t WHERE t.session_id = s.id) AS turns
     FROM ctxd_sessions s JOIN ctxd_messages m ON m.session_id = s.id
     WHERE s.tenant = $1 GROUP BY s.id, s.session`,
    [tenant],
  )
  return new Map(
    rows.map((r) => [
      r.session,
      { seqs: r.seqs, indexes: r.texts.map((t) => Number(/^turn (\d+) of /.exec(t)?.[1] ?? -1)), turns: Number(r.turns) },
    ]),
  )
}

/** Checks every session of `tenant` stored turns 0..n-1 exactly once, as seqs 1..n, in send order. */
export const expectExactlyOnce = async (
  cluster: Cluster,
  tenant: string,
  sessions: ReadonlyArray<string>,
  turnsOf: (session: string) => number,
) => {
  const got = await stored(cluster, tenant)
  const problems: Array<string> = []
  for (const session of sessions) {
    const n = turnsOf(session)
    const row = got.get(session)
    const want = Array.from({ length: n }, (_, i) => i)
    if (row === undefined) {
      if (n > 0) problems.push(`${session}: nothing stored`)
      continue
    }
    if (JSON.stringify(row.seqs) !== JSON.stringify(want.map((i) => i + 1))) problems.push(`${session}: seqs ${row.seqs.join(",")}`)
    if (JSON.stringify(row.indexes) !== JSON.stringify(want)) problems.push(`${session}: turn order ${row.indexes.join(",")}`)
    if (row.turns !== n) problems.push(`${session}: ${row.turns} turns stored, ${n} sent`)
  }
  return problems
}

/** A TCP proxy to `target` that the test can cut (as if NATS were gone) and restore on the same port. */
export const tcpProxy = async (targetPort: number, targetHost = "127.0.0.1") => {
  const sockets = new Set<Socket>()
  let server: Server | undefined
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const s = createServer((client) => {
        const upstream = tcpConnect(targetPort, targetHost)
        sockets.add(client)
        sockets.add(upstream)
        const close = () => {
          client.destroy()
          upstream.destroy()
          sockets.delete(client)
          sockets.delete(upstream)
        }
        for (const socket of [client, upstream]) {
          socket.on("error", close)
          socket.on("close", close)
        }
        client.pipe(upstream)
        upstream.pipe(client)
      })
      s.once("error", reject)
      s.listen(port, "127.0.0.1", () => {
        server = s
        const address = s.address()
        resolve(typeof address === "object" && address !== null ? address.port : port)
      })
    })
  const port = await listen(0)
  const cut = async () => {
    const s = server
    server = undefined
    for (const socket of sockets) socket.destroy()
    sockets.clear()
    if (s !== undefined) await new Promise<void>((resolve) => s.close(() => resolve()))
  }
  return { port, cut, restore: () => listen(port).then(() => undefined), close: cut }
}

/** A TCP proxy to `url`'s Postgres that the test can cut: every connection through it breaks at once, new ones are refused. */
export const postgresProxy = async (url: string) => {
  const target = new URL(url)
  const proxy = await tcpProxy(Number(target.port || 5432), target.hostname)
  const proxied = new URL(url)
  proxied.host = `127.0.0.1:${proxy.port}`
  return { url: proxied.toString(), cut: () => void proxy.cut() }
}

/** A session name of `tenant` whose shard is in `shards`, not in `exclude`. */
export const sessionIn = (tenant: string, shards: ReadonlyArray<number>, prefix: string, exclude: ReadonlySet<string> = new Set()) => {
  const wanted = new Set(shards)
  for (let i = 0; ; i++) {
    const name = `${prefix}${i}`
    if (!exclude.has(name) && wanted.has(ShardId.of(tenant, name, SHARDS))) return name
  }
}
