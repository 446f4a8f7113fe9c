/**
 * `SessionStore.commitTurn` alone against Postgres: 50 sessions, each turn
 * appending a real assistant reply and user message and storing a ~30 KB
 * reply (an OpenAI request body with the tau-bench system prompt, tools and
 * up to 60 history messages). Latency under a paced load, throughput in a
 * closed loop, and what a commit costs in CPU (this process, and the whole
 * machine, Postgres included) and in stored bytes.
 */
import { Database, Migrations, SessionStore } from "@ctxd/db"
import type { Conversation } from "@ctxd/contracts"
import { TestDatabase, Workloads } from "@ctxd/testing"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { quantile, round, type Row } from "./Stats.ts"

export interface StoreOptions {
  readonly sessions: number
  readonly turnsPerSession: number
  /** Offered load of the latency phase, commits per second over all sessions. */
  readonly pacedRate: number
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)))

/** Busy and total jiffies of the machine (Linux), or undefined elsewhere. */
const machineTicks = (): { busy: number; total: number } | undefined => {
  try {
    const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
    const idle = cpu[3]! + (cpu[4] ?? 0)
    const total = cpu.reduce((sum, n) => sum + n, 0)
    return { busy: total - idle, total }
  } catch {
    return undefined
  }
}

export const run = async (options: StoreOptions = { sessions: 50, turnsPerSession: 40, pacedRate: 500 }): Promise<Row[]> => {
  const [tau] = Workloads.tauBenchSessions(Workloads.fullDataDir())
  const history = Workloads.tauBenchSessions(Workloads.fullDataDir()).flatMap((s) => s.turns.flatMap((t) => t.messages))
  const sample = history.filter((m) => m.role === "user" || m.role === "assistant")
  const text = (role: "user" | "assistant", i: number): Conversation.Message => ({
    role,
    parts: [{ type: "text", text: String(sample[i % sample.length]!.content ?? "ok") }],
  })
  // Shaped like the assembler's reply: the provider request body and a report.
  const reply = (turnId: string, turn: number) => ({
    ok: true,
    turnId,
    request: {
      model: "gpt-4o",
      // 40 real messages (tool calls and results included) after the system prompt
      messages: [{ role: "system", content: tau!.system }, ...history.slice(3 * turn, 3 * turn + 40)],
      tools: tau!.tools,
    },
    report: { tokens: { system: 1_000, tools: 2_500, history: 20 * turn, total: 3_500 + 20 * turn }, kept: 2 * turn + 1 },
  })

  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const { url, schema } = yield* TestDatabase.make
        const db = yield* Database.make({ url, schema })
        yield* Migrations.run.pipe(Effect.provideService(Database.Database, db))
        const store = yield* SessionStore.SessionStore.pipe(
          Effect.provide(SessionStore.layer),
          Effect.provideService(Database.Database, db),
        )
        const lastSeq = new Map<string, number>()
        const commit = async (session: string, turn: number) => {
          const expectedLastSeq = lastSeq.get(session) ?? 0
          const messages = turn === 0 ? [text("user", 0)] : [text("assistant", 2 * turn - 1), text("user", 2 * turn)]
          const body = reply(`t${turn}`, turn)
          const started = performance.now()
          const committed = await Effect.runPromise(
            store.commitTurn({
              tenant: "bench",
              session,
              turnId: `t${turn}`,
              requestHash: `h${turn}`,
              expectedLastSeq,
              messages: messages.map((message) => ({ message, tokens: 50, encoding: "o200k_base" })),
              reply: body,
            }),
          )
          const elapsed = performance.now() - started
          lastSeq.set(session, committed.lastSeq)
          return elapsed
        }
        const ids = Array.from({ length: options.sessions }, (_, i) => `s${i}`)
        yield* Effect.promise(() => Promise.all(ids.map((id) => commit(id, 0))))
        const perSession = Math.max(1, Math.floor(options.turnsPerSession / 2))
        // Latency: open loop at pacedRate over the sessions, each in order.
        const latencies: number[] = []
        const interval = (1000 * options.sessions) / options.pacedRate
        yield* Effect.promise(() =>
          Promise.all(
            ids.map(async (id, i) => {
              await sleep((interval * i) / options.sessions)
              for (let k = 1; k <= perSession; k++) {
                const due = performance.now() + interval
                latencies.push(await commit(id, k))
                await sleep(due - performance.now())
              }
            }),
          ),
        )
        // Throughput: closed loop.
        let done = 0
        const cpu = process.cpuUsage()
        const ticks = machineTicks()
        const started = performance.now()
        yield* Effect.promise(() =>
          Promise.all(
            ids.map(async (id) => {
              for (let k = perSession + 1; k <= 2 * perSession; k++) {
                await commit(id, k)
                done++
              }
            }),
          ),
        )
        const seconds = (performance.now() - started) / 1000
        const used = process.cpuUsage(cpu)
        const after = machineTicks()
        const { rows } = yield* db.query<{ bytes: string; turns: string }>(
          // summed over its partitions when it has some (a partitioned table has no storage of its own)
          `SELECT COALESCE((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('ctxd_turns')),
                           pg_total_relation_size('ctxd_turns'))::text AS bytes,
                  (SELECT count(*) FROM ctxd_turns)::text AS turns`,
        )
        const label = `store commitTurn, ${options.sessions} sessions, ~30 KB replies`
        const turns = Array.from({ length: 2 * perSession + 1 }, (_, k) => k)
        const replySize = turns.reduce((sum, k) => sum + Buffer.byteLength(JSON.stringify(reply(`t${k}`, k))), 0) / turns.length
        const result: Row[] = [
          { bench: label, metric: "reply JSON size (mean)", value: round(replySize / 1024, 1), unit: "KiB" },
          { bench: label, metric: `commit latency p50 at ${options.pacedRate}/s`, value: round(quantile(latencies, 0.5)), unit: "ms" },
          { bench: label, metric: `commit latency p99 at ${options.pacedRate}/s`, value: round(quantile(latencies, 0.99)), unit: "ms" },
          { bench: label, metric: "throughput (closed loop)", value: round(done / seconds, 0), unit: "commits/s" },
          { bench: label, metric: "CPU per commit, this process", value: round((used.user + used.system) / done, 0), unit: "µs" },
        ]
        if (ticks !== undefined && after !== undefined) {
          // jiffies are 1/100 s on Linux
          const machine = ((after.busy - ticks.busy) * 10_000) / done
          result.push({ bench: label, metric: "CPU per commit, whole machine", value: round(machine, 0), unit: "µs" })
        }
        result.push({
          bench: label,
          metric: "ctxd_turns size per turn",
          value: round(Number(rows[0]!.bytes) / Number(rows[0]!.turns) / 1024, 1),
          unit: "KiB",
        })
        return result
      }),
    ),
  )
}
