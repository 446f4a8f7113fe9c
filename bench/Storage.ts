/**
 * Storage per turn before and after the replies are pruned
 * (`CTXD_REPLY_RETENTION`): every session of the shared workloads (tau-bench
 * airline and SWE-agent, in the Anthropic format, turn by turn, as recorded)
 * replayed through one real worker, then the bytes of the session tables
 * (heap, TOAST and indexes of every partition, after `VACUUM FULL`) measured, every reply pruned
 * (`LifecycleStore.pruneReplies` in batches of 500, as the pruner does), and
 * measured again.
 */
import { connect } from "@nats-io/transport-node"
import { Database, LifecycleStore, Migrations } from "@ctxd/db"
import { TestDatabase, TestNats, Workloads, WorkerProcess } from "@ctxd/testing"
import { Effect, Layer } from "effect"
import { round, type Row } from "./Stats.ts"

const TABLES = ["ctxd_turns", "ctxd_messages", "ctxd_sessions", "ctxd_session_lengths", "ctxd_session_users"] as const

export const run = async (): Promise<Row[]> => {
  const sessions = [...Workloads.tauBenchSessions(Workloads.fullDataDir()), ...Workloads.sweAgentSessions(Workloads.fullDataDir())].map(
    (s) => Workloads.inFormat(s, "anthropic"),
  )
  const root = `bench_${Date.now().toString(36)}`
  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const schema = yield* TestDatabase.make
        const worker = yield* Effect.promise(() =>
          WorkerProcess.start({ DATABASE_URL: schema.url, CTXD_DB_SCHEMA: schema.schema, CTXD_SUBJECT_ROOT: root }),
        )
        yield* Effect.addFinalizer(() => Effect.promise(() => worker.stop().then(() => TestNats.dropStreams(root))))
        const nc = yield* Effect.promise(() => connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222" }))
        yield* Effect.addFinalizer(() => Effect.promise(() => nc.drain()))
        const encoder = new TextEncoder()
        // 8 sessions at once, each turn after the last one's reply
        let next = 0
        let turns = 0
        const lane = async () => {
          for (let i = next++; i < sessions.length; i = next++) {
            const s = sessions[i]!
            for (let k = 0; k < s.turns.length; k++) {
              const body = { turnId: `t${k}`, model: s.model, system: s.system, ...s.turns[k]! }
              const reply = (
                await nc.request(`${root}.v1.turn.bench.s${i}`, encoder.encode(JSON.stringify(body)), { timeout: 30_000 })
              ).json<{ ok: boolean; error?: unknown }>()
              if (!reply.ok) throw new Error(`session ${s.id} turn ${k}: ${JSON.stringify(reply.error)}`)
              turns++
            }
          }
        }
        yield* Effect.promise(() => Promise.all(Array.from({ length: 8 }, lane)))

        const db = yield* Database.make({ url: schema.url, schema: schema.schema, poolMax: 2 })
        const sizes = Effect.gen(function* () {
          for (const table of TABLES) yield* db.query(`VACUUM FULL ${table}`)
          const out: Record<string, number> = {}
          for (const table of TABLES) {
            // a partitioned table's own size is 0: its partitions' (for a plain table, its own)
            const { rows } = yield* db.query<{ n: string }>(
              `SELECT sum(pg_total_relation_size(relid)) AS n FROM pg_partition_tree($1::regclass)`,
              [table],
            )
            out[table] = Number(rows[0]!.n)
          }
          return out
        })
        const before = yield* sizes
        const lifecycle = yield* LifecycleStore.LifecycleStore.pipe(
          Effect.provide(LifecycleStore.layer.pipe(Layer.provide(Migrations.layer), Layer.provide(Layer.succeed(Database.Database, db)))),
        )
        const started = performance.now()
        let pruned = 0
        for (;;) {
          const n = yield* lifecycle.pruneReplies(0, 500)
          pruned += n
          if (n < 500) break
        }
        const seconds = (performance.now() - started) / 1000
        const after = yield* sizes
        const total = (s: Record<string, number>) => Object.values(s).reduce((a, b) => a + b, 0)
        const perTurn = (bytes: number) => round(bytes / turns, 0)
        const bench = `storage, ${sessions.length} replayed sessions, ${turns} turns`
        return [
          { bench, metric: "turns table per turn, replies kept", value: perTurn(before.ctxd_turns!), unit: "B" },
          { bench, metric: "turns table per turn, replies pruned", value: perTurn(after.ctxd_turns!), unit: "B" },
          { bench, metric: "messages table per turn", value: perTurn(before.ctxd_messages!), unit: "B" },
          { bench, metric: "session tables per turn, replies kept", value: perTurn(total(before)), unit: "B" },
          { bench, metric: "session tables per turn, replies pruned", value: perTurn(total(after)), unit: "B" },
          { bench, metric: "replies pruned per second (batches of 500)", value: round(pruned / seconds, 0), unit: "rows/s" },
        ]
      }),
    ),
  )
}
