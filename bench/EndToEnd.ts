/**
 * End-to-end turn latency and throughput over NATS + Postgres: one real
 * worker process, 50 concurrent sessions sending turns back to back (closed
 * loop), each turn carrying a realistic assistant reply and user message,
 * in the OpenAI Chat Completions format or that of `--format`.
 */
import { connect } from "@nats-io/transport-node"
import { TestDatabase, TestNats, Workloads, WorkerProcess } from "@ctxd/testing"
import { Effect } from "effect"
import type { OpenAI, Turn } from "@ctxd/contracts"
import { formats } from "./Args.ts"
import { quantile, round, type Row } from "./Stats.ts"

export interface EndToEndOptions {
  readonly sessions: number
  readonly turnsPerSession: number
  readonly workers: number
  /** Offered load of the latency phase, turns per second over all sessions. */
  readonly pacedRate: number
  /** The request format (default OpenAI Chat Completions). */
  readonly format?: Turn.Format | undefined
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)))

const defaults: EndToEndOptions = { sessions: 50, turnsPerSession: 40, workers: 1, pacedRate: 100 }

/** The bench once per format of `--format` (default: OpenAI Chat Completions). */
export const runFormats = async (options: EndToEndOptions = defaults): Promise<Row[]> => {
  const rows: Row[] = []
  for (const format of formats(["openai"])) rows.push(...(await run({ ...options, format })))
  return rows
}

export const run = async (options: EndToEndOptions = defaults): Promise<Row[]> => {
  const [tau] = Workloads.tauBenchSessions()
  const format = options.format ?? "openai"
  const sample = tau!.turns.flatMap((t) => t.messages).filter((m) => m.role === "user" || m.role === "assistant")
  const root = `bench_${Date.now().toString(36)}`
  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const db = yield* TestDatabase.make
        const workers = yield* Effect.promise(() =>
          Promise.all(
            Array.from({ length: options.workers }, () =>
              WorkerProcess.start({ DATABASE_URL: db.url, CTXD_DB_SCHEMA: db.schema, CTXD_SUBJECT_ROOT: root, ...(process.env.BENCH_WORKER_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_WORKER_NODE_OPTIONS } : {}) }),
            ),
          ),
        )
        yield* Effect.addFinalizer(() =>
          Effect.promise(() => Promise.all(workers.map((w) => w.stop())).then(() => TestNats.dropStreams(root))),
        )
        const nc = yield* Effect.promise(() => connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222" }))
        yield* Effect.addFinalizer(() => Effect.promise(() => nc.drain()))
        const encoder = new TextEncoder()
        const send = async (session: string, turn: number) => {
          const messages =
            turn === 0
              ? [{ role: "user", content: sample[0]!.content }]
              : [sample[(2 * turn - 1) % sample.length], { role: "user", content: `turn ${turn}: ${String(sample[(2 * turn) % sample.length]!.content)}` }]
          // the turn in `format` (the session's tools and this turn's plain messages)
          const [fields] = Workloads.inFormat(
            { id: session, format: "openai", system: tau!.system, tools: tau!.tools, turns: [{ messages: messages.map((m) => (m!.role === "assistant" ? { role: "assistant", content: String(m!.content ?? "ok") } : m) as OpenAI.Message) }] },
            format,
          ).turns
          const body = { turnId: `t${turn}`, model: Workloads.defaultModel(format), system: tau!.system, ...fields }
          const started = performance.now()
          const reply = await nc.request(`${root}.v1.turn.bench.${session}`, encoder.encode(JSON.stringify(body)), { timeout: 10_000 })
          const elapsed = performance.now() - started
          const parsed = reply.json<{ ok: boolean; error?: unknown }>()
          if (!parsed.ok) throw new Error(`turn failed: ${JSON.stringify(parsed.error)}`)
          return elapsed
        }
        // Warm-up: first turn of every session (cold sessions, connection pools).
        const ids = Array.from({ length: options.sessions }, (_, i) => `s${i}`)
        yield* Effect.promise(() => Promise.all(ids.map((id) => send(id, 0))))
        let nextTurn = 1
        // Latency: open loop at `pacedRate` turns/s spread over the sessions
        // (each session still sends its turns in order), so the numbers are
        // latencies under load, not queueing behind 50 outstanding requests.
        const latencies: number[] = []
        const perSession = Math.max(1, Math.floor(options.turnsPerSession / 2))
        const interval = (1000 * options.sessions) / options.pacedRate
        yield* Effect.promise(() =>
          Promise.all(
            ids.map(async (id, i) => {
              await sleep((interval * i) / options.sessions)
              for (let k = 0; k < perSession; k++) {
                const due = performance.now() + interval
                latencies.push(await send(id, nextTurn + k))
                await sleep(due - performance.now())
              }
            }),
          ),
        )
        nextTurn += perSession
        // Throughput: closed loop, every session sends its next turn as soon as the last is answered.
        let done = 0
        const started = performance.now()
        yield* Effect.promise(() =>
          Promise.all(
            ids.map(async (id) => {
              for (let k = 0; k < perSession; k++) {
                await send(id, nextTurn + k)
                done++
              }
            }),
          ),
        )
        const seconds = (performance.now() - started) / 1000
        const label = `e2e ${options.workers} worker${options.workers > 1 ? "s" : ""}, ${options.sessions} sessions${format === "openai" ? "" : `, ${format}`}`
        const p50 = quantile(latencies, 0.5)
        const throughput = done / seconds
        return [
          { bench: label, metric: `turn latency p50 at ${options.pacedRate}/s`, value: round(p50), unit: "ms", target: "≤ 5", met: p50 <= 5 },
          { bench: label, metric: `turn latency p99 at ${options.pacedRate}/s`, value: round(quantile(latencies, 0.99)), unit: "ms" },
          { bench: label, metric: "throughput (closed loop)", value: round(throughput, 0), unit: "turns/s", target: "≥ 1000", met: throughput >= 1000 },
        ]
      }),
    ),
  )
}
