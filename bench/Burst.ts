/**
 * `npm run bench -- burst`: memory stays bounded under a burst. One worker
 * started with `NODE_OPTIONS=--max-old-space-size=1024` gets 10,000
 * concurrent 60 KB turns (10,000 sessions, one turn each) from a separate
 * NATS connection, all sent at once. Reported: whether the worker stayed up,
 * the replies (ok / Busy / other / missing within the client timeout), how
 * fast `Busy` came back, the worker's peak RSS (VmHWM) and request bytes in
 * flight (its health reply), the ok replies that came after the client
 * timeout (the bench keeps listening until the worker is idle, at most 60 s
 * more), and the turns stored in Postgres whose `ok` reply was never sent
 * (must be 0). Bounded: one burst, a 60 s client timeout, loopback only.
 */
import { connect } from "@nats-io/transport-node"
import { TestDatabase, TestNats, Workloads, WorkerProcess } from "@ctxd/testing"
import { Effect } from "effect"
import { readFileSync, writeFileSync } from "node:fs"
import pg from "pg"
import { quantile, round, type Row } from "./Stats.ts"

export interface BurstOptions {
  readonly turns: number
  readonly bytes: number
  readonly timeoutMs: number
  readonly heapMb: number
}

const defaults: BurstOptions = {
  turns: Number(process.env.BENCH_BURST_TURNS ?? 10_000),
  bytes: 60_000,
  timeoutMs: 60_000,
  heapMb: 1024,
}

/** Peak resident set (VmHWM) of a process in bytes, or undefined once it is gone. */
const peakRss = (pid: number): number | undefined => {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("VmHWM:"))
    return line === undefined ? undefined : Number(line.split(/\s+/)[1]) * 1024
  } catch {
    return undefined
  }
}

export const run = async (options: BurstOptions = defaults): Promise<Row[]> => {
  const root = `bench_burst_${Date.now().toString(36)}`
  const servers = process.env.NATS_URL ?? "nats://127.0.0.1:4222"
  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const db = yield* TestDatabase.make
        const worker = yield* Effect.promise(() =>
          WorkerProcess.start({
            DATABASE_URL: db.url,
            CTXD_DB_SCHEMA: db.schema,
            CTXD_SUBJECT_ROOT: root,
            NODE_OPTIONS: `--max-old-space-size=${options.heapMb} ${process.env.BENCH_BURST_NODE_OPTIONS ?? ""}`.trim(),
          }),
        )
        yield* Effect.addFinalizer(() => Effect.promise(() => worker.stop().then(() => TestNats.dropStreams(root))))
        const pid = worker.child.pid!
        let exited: string | undefined
        worker.child.on("exit", (code, signal) => (exited = String(code ?? signal)))
        const nc = yield* Effect.promise(() => connect({ servers, name: "ctxd-bench-burst" }))
        yield* Effect.addFinalizer(() => Effect.promise(() => nc.close()))
        const probe = yield* Effect.promise(() => connect({ servers, name: "ctxd-bench-burst-probe" }))
        yield* Effect.addFinalizer(() => Effect.promise(() => probe.close()))

        let rss = peakRss(pid) ?? 0
        let bytesInFlight = 0
        let healthFailures = 0
        const sampler = setInterval(() => {
          rss = Math.max(rss, peakRss(pid) ?? 0)
          probe
            .request(`${root}.v1.health`, "{}", { timeout: 2_000 })
            .then((m) => (bytesInFlight = Math.max(bytesInFlight, m.json<{ inFlightBytes?: number }>().inFlightBytes ?? 0)))
            .catch(() => healthFailures++)
        }, 250)

        // 60 KB of real agent text per turn (SWE-agent tool outputs and messages), behind a unique
        // prefix so every message is counted anew
        const corpus = Workloads.sweAgentSessions(Workloads.fullDataDir())
          .flatMap((session) => session.turns.flatMap((turn) => turn.messages))
          .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "")))
          .join("\n")
        const filler = corpus.slice(0, options.bytes)
        const encoder = new TextEncoder()
        const body = (i: number) =>
          encoder.encode(
            JSON.stringify({
              turnId: `burst-${i}`,
              format: "openai",
              model: { provider: "openai", name: "gpt-4o" },
              messages: [{ role: "user", content: `request ${i}: ${filler}` }],
            }),
          )
        const counts = { ok: 0, busy: 0, other: 0, missing: 0, late: 0 }
        const answered = new Set<number>()
        const busyMs: number[] = []
        const otherCodes = new Map<string, number>()
        // one inbox per turn under a prefix of our own, so replies arriving after the client timeout
        // are still seen (counted late: sent by the worker, but too late for the caller)
        const inbox = `_INBOX.burst_${Date.now().toString(36)}`
        const pending = new Map<number, { readonly sent: number; readonly done: (late: boolean) => void }>()
        const decoder = new TextDecoder()
        const sub = nc.subscribe(`${inbox}.*`, {
          callback: (_err, msg) => {
            const i = Number(msg.subject.slice(inbox.length + 1))
            // a NATS status (no data; e.g. 503: nobody subscribed on the subject when it was sent) is an error too
            const reply: { ok: boolean; error?: { code: string } } =
              msg.data.length === 0
                ? { ok: false, error: { code: `nats ${msg.headers?.code ?? "?"} ${msg.headers?.description ?? ""}`.trim() } }
                : (JSON.parse(decoder.decode(msg.data)) as { ok: boolean; error?: { code: string } })
            const waiting = pending.get(i)
            if (reply.ok) {
              answered.add(i)
              if (waiting === undefined) counts.late++
              else counts.ok++
            } else if (waiting !== undefined && reply.error?.code === "Busy") {
              counts.busy++
              busyMs.push(performance.now() - waiting.sent)
            } else if (waiting !== undefined) {
              counts.other++
              const code = reply.error?.code ?? "?"
              otherCodes.set(code, (otherCodes.get(code) ?? 0) + 1)
            }
            if (waiting !== undefined) {
              pending.delete(i)
              waiting.done(false)
            }
          },
        })
        yield* Effect.addFinalizer(() => Effect.sync(() => sub.unsubscribe()))
        const started = performance.now()
        yield* Effect.promise(() =>
          Promise.all(
            Array.from(
              { length: options.turns },
              (_, i) =>
                new Promise<void>((resolve) => {
                  const timer = setTimeout(() => {
                    if (!pending.delete(i)) return
                    counts.missing++
                    resolve()
                  }, options.timeoutMs)
                  pending.set(i, { sent: performance.now(), done: () => (clearTimeout(timer), resolve()) })
                  nc.publish(`${root}.v1.turn.bench.s${i}`, body(i), { reply: `${inbox}.${i}` })
                }),
            ),
          ),
        )
        const seconds = (performance.now() - started) / 1000
        // let the worker finish what it accepted (replies now count as late), bounded
        const graceUntil = Date.now() + 60_000
        while (Date.now() < graceUntil) {
          const health = yield* Effect.promise(() =>
            probe.request(`${root}.v1.health`, "{}", { timeout: 2_000 }).then(
              (m) => m.json<{ inFlight: number }>().inFlight,
              () => -1,
            ),
          )
          if (health === 0) break
          yield* Effect.sleep("500 millis")
        }
        yield* Effect.sleep("500 millis")
        clearInterval(sampler)
        rss = Math.max(rss, peakRss(pid) ?? 0)
        const up = exited === undefined && worker.child.exitCode === null

        const pool = new pg.Pool({ connectionString: db.url, max: 1, options: `-c search_path=${db.schema}` })
        const stored = yield* Effect.promise(() =>
          pool
            .query<{ session: string }>("select s.session from ctxd_turns t join ctxd_sessions s on s.id = t.session_id")
            .finally(() => pool.end()),
        )
        const unanswered = stored.rows.filter((r) => !answered.has(Number(r.session.slice(1)))).length
        if (otherCodes.size > 0) console.log(`burst: other replies ${JSON.stringify(Object.fromEntries(otherCodes))}`)
        if (process.env.BENCH_BURST_LOG) writeFileSync(process.env.BENCH_BURST_LOG, worker.output())
        if (!up) console.log(`burst: the worker exited (${exited}):\n${worker.output().slice(-3_000)}`)
        console.log(`burst: ${options.turns} turns settled in ${round(seconds, 1)} s; ${healthFailures} health probes unanswered`)

        const bench = `burst ${options.turns} × ${options.bytes / 1000} KB turns, 1 worker (heap ${options.heapMb} MiB)`
        const mib = rss / (1024 * 1024)
        return [
          { bench, metric: "worker stayed up (1 = yes)", value: up ? 1 : 0, unit: "", target: "= 1", met: up },
          { bench, metric: "replies ok", value: counts.ok, unit: "turns" },
          { bench, metric: "replies Busy", value: counts.busy, unit: "turns" },
          { bench, metric: "replies other error", value: counts.other, unit: "turns" },
          {
            bench,
            metric: `replies missing within ${options.timeoutMs / 1000} s`,
            value: counts.missing,
            unit: "turns",
            target: "= 0",
            met: counts.missing === 0,
          },
          {
            bench,
            metric: "Busy reply latency p50 / max",
            value: round(quantile(busyMs, 0.5), 1),
            unit: `ms / ${round(busyMs.length === 0 ? Number.NaN : Math.max(...busyMs), 0)} ms`,
          },
          { bench, metric: "peak worker RSS", value: round(mib, 0), unit: "MiB", target: "≤ 1536", met: mib <= 1536 },
          { bench, metric: "peak request bytes in flight (health)", value: round(bytesInFlight / (1024 * 1024), 1), unit: "MiB" },
          { bench, metric: "ok replies after the client timeout (sent late)", value: counts.late, unit: "turns" },
          {
            bench,
            metric: "turns stored without their ok reply sent",
            value: unanswered,
            unit: "turns",
            target: "= 0",
            met: unanswered === 0,
          },
        ]
      }),
    ),
  )
}
