/**
 * The store at scale (docs/data-lifecycle.md, "Scaling the store"): a throwaway schema with
 * the partitioned layout filled with `--messages N` messages (default
 * 1,000,000) of real agent history (tau-bench and SWE-agent messages,
 * normalized as the worker stores them; generated inside Postgres from a
 * corpus table with INSERT ... SELECT, so the client is not the bottleneck),
 * in sessions of `--session-length` messages plus one of 10,000, and
 * `--turns T` stored turns (default N / 10, at most 100,000) whose replies are real
 * compressed replies (a tau-bench request body, as bench/Store.ts), half
 * expired (created yesterday) and half today. Then:
 *
 * - bytes per message and per turn (table + indexes + TOAST over rows);
 * - cold load of the 10,000-message session (a new connection, pages not
 *   touched since they were written: cold for Postgres' buffer cache, the
 *   OS page cache is not dropped) and a warm one;
 * - commit latency (p50, p99) at a paced rate on existing sessions, and
 *   sustained commits/s in a closed loop;
 * - pruning expired turns by row deletes in batches (rows/s) with the
 *   commit latency meanwhile, then dropping what is left of the expired
 *   partition (`Partitions.dropBefore`: its time) with the commit latency
 *   meanwhile.
 */
import { Normalize } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import { Database, Migrations, Partitions, SessionStore } from "@ctxd/db"
import { TestDatabase, Workloads } from "@ctxd/testing"
import { Effect } from "effect"
import { cpus, loadavg } from "node:os"
import { argument } from "./Args.ts"
import { quantile, round, type Row } from "./Stats.ts"

export interface ScaleOutOptions {
  readonly messages: number
  readonly sessionLength: number
  readonly turns: number
  /** Offered load of the latency phases, commits per second. */
  readonly pacedRate: number
  /** Length of each measured phase. */
  readonly phaseSeconds: number
}

export const options = (): ScaleOutOptions => {
  const messages = Number(argument("messages") ?? 1_000_000)
  return {
    messages,
    sessionLength: Number(argument("session-length") ?? 200),
    turns: Number(argument("turns") ?? Math.min(100_000, Math.floor(messages / 10))),
    pacedRate: Number(argument("rate") ?? 50),
    phaseSeconds: Number(argument("seconds") ?? 10),
  }
}

const LONG = 10_000
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)))

export const run = async (opts: ScaleOutOptions = options()): Promise<Row[]> => {
  const tau = Workloads.tauBenchSessions(Workloads.fullDataDir())
  const swe = Workloads.sweAgentSessions(Workloads.fullDataDir())
  const corpus = [...tau, ...swe].flatMap((s) => Normalize.fromOpenAI(s.turns.flatMap((t) => t.messages)))
  const history = tau.flatMap((s) => s.turns.flatMap((t) => t.messages))
  // Shaped like the assembler's reply: the provider request body and a report (as bench/Store.ts).
  const reply = (turn: number) => ({
    ok: true,
    request: {
      model: "gpt-4o",
      messages: [{ role: "system", content: tau[0]!.system }, ...history.slice(3 * turn, 3 * turn + 40)],
      tools: tau[0]!.tools,
    },
    report: { tokens: { system: 1_000, tools: 2_500, history: 20 * turn, total: 3_500 + 20 * turn }, kept: 2 * turn + 1 },
  })
  const label = `store at scale, ${opts.messages.toLocaleString("en")} messages`

  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const { url, schema } = yield* TestDatabase.make
        const db = yield* Database.make({ url, schema, statementTimeoutMs: 0, poolMax: 40 })
        const provide = Effect.provideService(Database.Database, db)
        yield* Migrations.run.pipe(provide)
        const store = yield* SessionStore.SessionStore.pipe(Effect.provide(SessionStore.layer), provide)
        const log = (text: string) => Effect.sync(() => console.log(`  scaleout: ${text}`))
        // this machine is shared: its load says how much of it the numbers below had
        const rows: Row[] = [
          {
            bench: label,
            metric: "machine load average (1 min) at start",
            value: round(loadavg()[0]!, 1),
            unit: `(${cpus().length} CPUs)`,
          },
        ]

        // --- generate -------------------------------------------------------
        const started = performance.now()
        yield* db.query(
          "CREATE TABLE bench_corpus (i integer PRIMARY KEY, role text NOT NULL, content jsonb NOT NULL, tokens integer NOT NULL)",
        )
        yield* db.query(
          `INSERT INTO bench_corpus SELECT (n - 1)::integer, e ->> 'role', e, greatest(1, length(e::text) / 4)
           FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS x (e, n)`,
          [JSON.stringify(corpus)],
        )
        const size = corpus.length
        const sessions = Math.max(1, Math.floor((opts.messages - LONG) / opts.sessionLength))
        yield* db.query(
          `INSERT INTO ctxd_sessions (tenant, session, last_seq)
           SELECT 'bench', 'b' || g, $1::integer FROM generate_series(1, $2::integer) g`,
          [opts.sessionLength, sessions],
        )
        yield* db.query(`INSERT INTO ctxd_sessions (tenant, session, last_seq) VALUES ('bench', 'long', ${LONG})`)
        const fill = (from: number, to: number, length: number) =>
          db.query(
            `INSERT INTO ctxd_messages (session_id, seq, role, content, tokens, encoding, turn_id)
             SELECT s.id, g.seq, c.role, c.content, c.tokens, 'o200k_base', 't' || ((g.seq + 1) / 2)
             FROM ctxd_sessions s CROSS JOIN generate_series(1, $3::integer) g (seq)
             JOIN bench_corpus c ON c.i = ((s.id * 7919 + g.seq) % $4::integer)
             WHERE s.id BETWEEN $1::bigint AND $2::bigint`,
            [from, to, length, size],
          )
        // the long session first: by the time it is loaded, a whole database was written after it
        const long = (yield* db.query<{ id: string }>("SELECT id FROM ctxd_sessions WHERE session = 'long'")).rows[0]!.id
        yield* fill(Number(long), Number(long), LONG)
        const chunk = Math.max(1, Math.floor(200_000 / opts.sessionLength))
        const fills: Array<Effect.Effect<unknown, unknown>> = []
        for (let from = 1; from <= sessions; from += chunk) fills.push(fill(from, Math.min(sessions, from + chunk - 1), opts.sessionLength))
        let done = 0
        yield* Effect.forEach(
          fills,
          (f) =>
            Effect.flatMap(f, () => {
              done++
              return done % 10 === 0 ? log(`${Math.round((100 * done) / fills.length)} % of messages`) : Effect.void
            }),
          { concurrency: 2, discard: true },
        )
        const messageSeconds = (performance.now() - started) / 1000
        yield* log(`messages written in ${messageSeconds.toFixed(0)} s`)

        // real compressed replies: commit a few turns, then copy their reply_z into the bulk turns
        const byRole = { user: corpus.filter((m) => m.role === "user"), assistant: corpus.filter((m) => m.role === "assistant") }
        const seedText = (role: "user" | "assistant", i: number): Conversation.Message => byRole[role][i % byRole[role].length]!
        for (let k = 0; k < 20; k++) {
          yield* store.commitTurn({
            tenant: "seed",
            session: `seed${k}`,
            turnId: "t1",
            requestHash: "h",
            expectedLastSeq: 0,
            messages: [{ message: seedText("user", k), tokens: 50, encoding: "o200k_base" }],
            reply: reply(k),
          })
        }
        const turnsStarted = performance.now()
        const expiredAt = new Date(Date.now() - 86_400_000)
        const half = Math.floor(opts.turns / 2)
        const fillTurns = (count: number, at: Date | null, tag: string) =>
          db.query(
            `INSERT INTO ctxd_turns (session_id, turn_id, request_hash, first_seq, last_seq, reply_z, created_at)
             SELECT 1 + (g % $2::integer), '${tag}' || g, 'h', 1, 2, r.reply_z, COALESCE($3::timestamptz, now())
             FROM generate_series(1, $1::integer) g
             JOIN (SELECT row_number() OVER () - 1 AS k, t.reply_z FROM ctxd_turns t JOIN ctxd_sessions s ON s.id = t.session_id
                   WHERE s.tenant = 'seed') r ON r.k = g % 20`,
            [count, sessions, at],
          )
        for (let from = 0; from < half; from += 50_000) {
          yield* fillTurns(Math.min(50_000, half - from), expiredAt, `x${from}_`)
          yield* fillTurns(Math.min(50_000, half - from), null, `n${from}_`)
        }
        yield* db.query("ANALYZE")
        const turnSeconds = (performance.now() - turnsStarted) / 1000
        yield* log(`turns written in ${turnSeconds.toFixed(0)} s`)

        const { rows: sizes } = yield* db.query<{ messages: number; turns: number; n_turns: number; raw: number }>(
          `SELECT (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
                   WHERE c.relnamespace = current_schema()::regnamespace AND c.relname LIKE 'ctxd_messages%' AND c.relkind = 'r')::float8 AS messages,
                  (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
                   WHERE c.relnamespace = current_schema()::regnamespace AND c.relname LIKE 'ctxd_turns%' AND c.relkind = 'r')::float8 AS turns,
                  (SELECT count(*) FROM ctxd_turns)::float8 AS n_turns,
                  (SELECT avg(octet_length(reply_z)) FROM ctxd_turns t JOIN ctxd_sessions s ON s.id = t.session_id WHERE s.tenant = 'seed')::float8 AS raw`,
        )
        const totalMessages = sessions * opts.sessionLength + LONG + 20
        rows.push(
          {
            bench: label,
            metric: "generated (messages, INSERT ... SELECT)",
            value: round(totalMessages / messageSeconds, 0),
            unit: "messages/s",
          },
          { bench: label, metric: "stored bytes per message", value: round(sizes[0]!.messages / totalMessages, 0), unit: "B" },
          { bench: label, metric: "compressed reply (reply_z) per turn", value: round(sizes[0]!.raw, 0), unit: "B" },
          { bench: label, metric: "stored bytes per turn", value: round(sizes[0]!.turns / sizes[0]!.n_turns, 0), unit: "B" },
          { bench: label, metric: "database size", value: round((sizes[0]!.messages + sizes[0]!.turns) / 2 ** 30, 2), unit: "GiB" },
        )

        // --- cold load of the 10,000-message session --------------------------
        const cold = yield* Database.make({ url, schema, poolMax: 1 })
        yield* cold.query("SELECT 1")
        const coldStore = yield* SessionStore.SessionStore.pipe(
          Effect.provide(SessionStore.layer),
          Effect.provideService(Database.Database, cold),
        )
        const t0 = performance.now()
        const loaded = yield* coldStore.loadMessages("bench", "long", 0)
        const coldMs = performance.now() - t0
        const t1 = performance.now()
        yield* coldStore.loadMessages("bench", "long", 0)
        const warmMs = performance.now() - t1
        if (loaded.length !== LONG) throw new Error(`loaded ${loaded.length} messages of the long session`)
        rows.push(
          { bench: label, metric: `cold load of a ${LONG.toLocaleString("en")}-message session`, value: round(coldMs, 1), unit: "ms" },
          { bench: label, metric: `warm load of a ${LONG.toLocaleString("en")}-message session`, value: round(warmMs, 1), unit: "ms" },
        )

        // --- commits -----------------------------------------------------------
        const lastSeq = new Map<string, number>()
        let turn = 0
        const commit = async (session: string) => {
          const expectedLastSeq = lastSeq.get(session) ?? opts.sessionLength
          const k = turn++
          const t = performance.now()
          await Effect.runPromise(
            store.commitTurn({
              tenant: "bench",
              session,
              turnId: `live${k}`,
              requestHash: "h",
              expectedLastSeq,
              messages: [seedText("assistant", k), seedText("user", k)].map((message) => ({ message, tokens: 50, encoding: "o200k_base" })),
              reply: reply(k % 100),
            }),
          )
          lastSeq.set(session, expectedLastSeq + 2)
          return performance.now() - t
        }
        let pick = 0
        const nextSession = () => `b${1 + ((pick++ * 7919) % sessions)}`
        /** Paced commits (open loop) for `seconds`; one session per commit, never two at once on a session. */
        const paced = async (seconds: number) => {
          const latencies: number[] = []
          const interval = 1000 / opts.pacedRate
          const until = performance.now() + seconds * 1000
          const inFlight: Array<Promise<void>> = []
          for (let due = performance.now(); due < until; due += interval) {
            await sleep(due - performance.now())
            inFlight.push(commit(nextSession()).then((ms) => void latencies.push(ms)))
          }
          await Promise.all(inFlight)
          return latencies
        }
        const baseline = yield* Effect.promise(() => paced(opts.phaseSeconds))
        rows.push(
          { bench: label, metric: `commit p50 at ${opts.pacedRate}/s`, value: round(quantile(baseline, 0.5)), unit: "ms" },
          { bench: label, metric: `commit p99 at ${opts.pacedRate}/s`, value: round(quantile(baseline, 0.99)), unit: "ms" },
        )
        // closed loop: 32 sessions committing back to back
        let commits = 0
        const closedUntil = performance.now() + opts.phaseSeconds * 1000
        const closedStart = performance.now()
        yield* Effect.promise(() =>
          Promise.all(
            Array.from({ length: 32 }, async () => {
              const session = nextSession()
              while (performance.now() < closedUntil) {
                await commit(session)
                commits++
              }
            }),
          ),
        )
        rows.push({
          bench: label,
          metric: "sustained commits (closed loop, 32 sessions)",
          value: round(commits / ((performance.now() - closedStart) / 1000), 0),
          unit: "commits/s",
        })

        // --- pruning by row deletes, commits meanwhile --------------------------
        const todayStart = new Date()
        todayStart.setUTCHours(0, 0, 0, 0)
        // row deletes take half of the expired turns at most; the partition drop takes the rest
        const { rows: expired } = yield* db.query<{ n: string }>("SELECT count(*) AS n FROM ctxd_turns WHERE created_at < $1", [todayStart])
        const budget = Math.floor(Number(expired[0]!.n) / 2)
        let deleted = 0
        let pruning = true
        const pruneStart = performance.now()
        const pruner = (async () => {
          while (pruning && deleted < budget) {
            const result = await Effect.runPromise(
              db.query(
                `DELETE FROM ctxd_turns WHERE (session_id, turn_id, created_at) IN (
                   SELECT session_id, turn_id, created_at FROM ctxd_turns WHERE created_at < $1 LIMIT 1000)`,
                [todayStart],
              ),
            )
            deleted += result.rowCount ?? 0
            if ((result.rowCount ?? 0) === 0) break
          }
        })()
        const duringPrune = yield* Effect.promise(() => paced(opts.phaseSeconds))
        pruning = false
        yield* Effect.promise(() => pruner)
        const pruneSeconds = (performance.now() - pruneStart) / 1000
        rows.push(
          { bench: label, metric: "prune by DELETE, batches of 1,000", value: round(deleted / pruneSeconds, 0), unit: "rows/s" },
          { bench: label, metric: `commit p50 while pruning (${opts.pacedRate}/s)`, value: round(quantile(duringPrune, 0.5)), unit: "ms" },
          { bench: label, metric: `commit p99 while pruning (${opts.pacedRate}/s)`, value: round(quantile(duringPrune, 0.99)), unit: "ms" },
        )

        // --- dropping the rest of the expired partition, commits meanwhile -------
        const { rows: left } = yield* db.query<{ n: string }>("SELECT count(*) AS n FROM ctxd_turns WHERE created_at < $1", [todayStart])
        let dropMs = 0
        const dropper = (async () => {
          await sleep(1_000)
          const t = performance.now()
          const dropped = await Effect.runPromise(Partitions.dropBefore(todayStart).pipe(provide))
          dropMs = performance.now() - t
          if (dropped.length === 0) throw new Error("no partition dropped")
        })()
        const duringDrop = yield* Effect.promise(() => paced(Math.max(3, opts.phaseSeconds / 2)))
        yield* Effect.promise(() => dropper)
        rows.push(
          {
            bench: label,
            metric: `drop the expired partition (${Number(left[0]!.n).toLocaleString("en")} turns)`,
            value: round(dropMs, 1),
            unit: "ms",
          },
          { bench: label, metric: "expiry by partition drop", value: round(Number(left[0]!.n) / (dropMs / 1000), 0), unit: "rows/s" },
          { bench: label, metric: `commit p50 around the drop (${opts.pacedRate}/s)`, value: round(quantile(duringDrop, 0.5)), unit: "ms" },
          { bench: label, metric: `commit max around the drop (${opts.pacedRate}/s)`, value: round(quantile(duringDrop, 1)), unit: "ms" },
        )
        return rows
      }),
    ),
  )
}
