/**
 * Horizontal scaling over real worker processes, NATS and Postgres, driven
 * through `ContextClient` (sticky routing: after a session's first turn the
 * client sends to the owner's direct subject):
 *
 * - throughput with 1 and with 2 workers: `sessions` sessions send tau-bench
 *   turns back to back (closed loop);
 * - latency during a failover: 2 workers with a 3 s lease TTL, every session
 *   sends a turn every `paceMs`; one worker is killed with SIGKILL; the
 *   latency of every turn sent from the kill until 2 × TTL later (retries
 *   included), and when the dead worker's shards were owned again.
 *
 * On a machine with fewer cores than workers (plus NATS, Postgres and this
 * process), two workers cannot be faster than one: compare on real hardware.
 */
import { ContextClient } from "@ctxd/client"
import { TestDatabase, TestNats, Workloads, WorkerProcess } from "@ctxd/testing"
import { Effect, Exit, Scope } from "effect"
import pg from "pg"
import { quantile, round, type Row } from "./Stats.ts"

export interface ScalingOptions {
  readonly sessions: number
  readonly turnsPerSession: number
  /** Sessions of the failover run (paced, well below capacity). */
  readonly failoverSessions: number
  /** Lease TTL of the failover run, ms. */
  readonly ttlMs: number
  /** Each session's interval between turns in the failover run, ms. */
  readonly paceMs: number
}

const DEFAULTS: ScalingOptions = { sessions: 100, turnsPerSession: 20, failoverSessions: 50, ttlMs: 3_000, paceMs: 500 }

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)))
const servers = process.env.NATS_URL ?? "nats://127.0.0.1:4222"

/** A turn of a tau-bench-like session: the policy and tools every time, a user message and an assistant reply. */
const turnMaker = () => {
  const [tau] = Workloads.tauBenchSessions(Workloads.fullDataDir())
  const texts = tau!.turns
    .flatMap((t) => t.messages)
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map((m) => String(m.content ?? "ok"))
  return (session: string, i: number): ContextClient.TurnInput => ({
    turnId: `${session}-t${i}`,
    format: "openai",
    model: { provider: "openai", name: "gpt-4o" },
    system: tau!.system,
    tools: tau!.tools as never,
    messages:
      i === 0
        ? [{ role: "user", content: texts[0]! }]
        : [
            { role: "assistant", content: texts[(2 * i - 1) % texts.length]! },
            { role: "user", content: `turn ${i}: ${texts[(2 * i) % texts.length]!}` },
          ],
  })
}

/** `workers` workers on a fresh schema and root; `f` runs with a client; everything is stopped afterwards. */
const withCluster = async <A>(
  workers: number,
  env: Record<string, string>,
  f: (cluster: {
    readonly client: ContextClient.PromiseClient
    readonly workers: ReadonlyArray<WorkerProcess.WorkerProcess>
    readonly sql: (text: string) => Promise<Array<Record<string, unknown>>>
  }) => Promise<A>,
  clientOptions: ContextClient.ContextClientOptions = {},
): Promise<A> => {
  const scope = Effect.runSync(Scope.make())
  const db = await Effect.runPromise(Scope.extend(TestDatabase.make, scope))
  const root = `bench_${Math.random().toString(36).slice(2, 10)}`
  const started = await Promise.allSettled(
    Array.from({ length: workers }, (_, i) =>
      WorkerProcess.start({
        DATABASE_URL: db.url,
        CTXD_DB_SCHEMA: db.schema,
        CTXD_SUBJECT_ROOT: root,
        CTXD_WORKER_ID: `bench-w${i + 1}`,
        LOG_LEVEL: "info",
        ...env,
      }),
    ),
  )
  const procs = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []))
  const pool = new pg.Pool({ connectionString: db.url, max: 1, options: `-c search_path=${db.schema}` })
  const client = await ContextClient.connect({ servers, root, ...clientOptions })
  try {
    const failed = started.find((s) => s.status === "rejected")
    if (failed !== undefined) throw failed.reason
    // every shard owned by its assigned worker before the clock starts
    for (let waited = 0; waited < 20_000; waited += 100) {
      const rows = (await pool.query<{ n: string }>("SELECT count(DISTINCT owner) AS n FROM ctxd_shard_leases WHERE expires_at > now()"))
        .rows
      const free = (
        await pool.query<{ n: string }>("SELECT count(*) AS n FROM ctxd_shard_leases WHERE owner IS NULL OR expires_at <= now()")
      ).rows
      if (Number(rows[0]!.n) === workers && Number(free[0]!.n) === 0) break
      await sleep(100)
    }
    return await f({ client, workers: procs, sql: async (text) => (await pool.query<Record<string, unknown>>(text)).rows })
  } finally {
    await client.close()
    await Promise.all(procs.map((w) => w.stop("SIGTERM", 15_000)))
    await TestNats.dropStreams(root)
    await pool.end()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

const throughput = async (workers: number, options: ScalingOptions): Promise<Row> => {
  const make = turnMaker()
  const value = await withCluster(workers, {}, async ({ client }) => {
    const sessions = Array.from({ length: options.sessions }, (_, i) => `s${i}`)
    // warm-up: the first turn of every session (cold sessions, pools, routes)
    await Promise.all(sessions.map((s) => client.turn("bench", s, make(s, 0))))
    const started = performance.now()
    await Promise.all(
      sessions.map(async (s) => {
        for (let i = 1; i < options.turnsPerSession; i++) await client.turn("bench", s, make(s, i))
      }),
    )
    return (options.sessions * (options.turnsPerSession - 1)) / ((performance.now() - started) / 1000)
  })
  return {
    bench: `scaling, ${options.sessions} sessions (closed loop)`,
    metric: `throughput, ${workers} worker${workers > 1 ? "s" : ""}`,
    value: round(value, 0),
    unit: "turns/s",
  }
}

const failover = async (options: ScalingOptions): Promise<Row[]> => {
  const make = turnMaker()
  const ttl = options.ttlMs
  return withCluster(
    2,
    { CTXD_LEASE_TTL_MS: String(ttl) },
    async ({ client, workers, sql }) => {
      const sessions = Array.from({ length: options.failoverSessions }, (_, i) => `f${i}`)
      const latencies: Array<{ readonly sentAt: number; readonly ms: number }> = []
      let killedAt = Number.POSITIVE_INFINITY
      let running = true
      const load = Promise.all(
        sessions.map(async (s, k) => {
          await sleep((options.paceMs * k) / sessions.length)
          for (let i = 0; running; i++) {
            const due = performance.now() + options.paceMs
            const sentAt = performance.now()
            await client.turn("bench", s, make(s, i))
            latencies.push({ sentAt, ms: performance.now() - sentAt })
            await sleep(due - performance.now())
          }
        }),
      )
      await sleep(3_000)
      const victim = workers[1]!
      const owned = async () =>
        Number((await sql("SELECT count(*) AS n FROM ctxd_shard_leases WHERE owner = 'bench-w1' AND expires_at > now()"))[0]!.n)
      killedAt = performance.now()
      victim.child.kill("SIGKILL")
      let takeover = Number.NaN
      while (performance.now() - killedAt < 4 * ttl) {
        if ((await owned()) === 256) {
          takeover = performance.now() - killedAt
          break
        }
        await sleep(50)
      }
      await sleep(Math.max(0, killedAt + 2 * ttl - performance.now()) + 1_000)
      running = false
      await load
      const window = latencies.filter((l) => l.sentAt >= killedAt && l.sentAt < killedAt + 2 * ttl).map((l) => l.ms)
      // the second before the kill, well after the cold first turns
      const steady = latencies.filter((l) => l.sentAt >= killedAt - 1_500 && l.sentAt < killedAt - 500).map((l) => l.ms)
      const bench = `scaling, failover: 2 workers, SIGKILL one, TTL ${ttl / 1000} s, ${options.failoverSessions} sessions × 1 turn / ${options.paceMs} ms`
      return [
        { bench, metric: "turn latency p99 before the kill", value: round(quantile(steady, 0.99)), unit: "ms" },
        { bench, metric: "turn latency p50 during failover", value: round(quantile(window, 0.5)), unit: "ms" },
        { bench, metric: "turn latency p99 during failover", value: round(quantile(window, 0.99)), unit: "ms" },
        { bench, metric: "turn latency max during failover", value: round(Math.max(...window)), unit: "ms" },
        {
          bench,
          metric: "shards owned again after the kill",
          value: round(takeover, 0),
          unit: "ms",
          target: `< ${2 * ttl}`,
          met: takeover < 2 * ttl,
        },
      ]
    },
    { timeoutMs: 1_000, retryForMs: 30_000 },
  )
}

/** The scaling rows: throughput with 1 and 2 workers, latency during a failover. */
export const run = async (options: ScalingOptions = DEFAULTS): Promise<Row[]> => [
  await throughput(1, options),
  await throughput(2, options),
  ...(await failover(options)),
]
