// Fair share per tenant (CTXD_TENANT_BYTES_PERCENT, CTXD_TENANT_TURNS_PERCENT):
// tenant A floods one worker with many concurrent large turns (from a client
// of its own, in a worker thread: FairShareFlood.ts; it retries Busy with
// ContextClient's backoff) while tenant B sends its turns one at a time, as
// an agent does. A's turns are held in flight: Postgres holds every commit of
// A's sessions (their rows inserted by a transaction the test keeps open), as
// a slow store or a stuck tenant would. A holds its share and no more: every
// other turn of A is answered Busy, and B is never Busy and gets every answer
// while A's turns are held. Without the share, A's held turns would fill the
// worker's commit statements and B's commits would wait behind them; once
// Postgres lets A's commits go, A is served within its share.
//
// The worker runs with CTXD_TENANT_TURNS_PERCENT=25 (one turn per tenant of
// its 4 slots; the default is no limit). The byte share is covered by
// libs/nats/test/Admission.test.ts (with one turn in flight a tenant never
// holds two requests). How B's latency fares under A's flood is measured by
// the benchmarks, not asserted here.
import { Worker } from "node:worker_threads"
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

const A_CONCURRENCY = 48
const A_TEXT_BYTES = 64 * 1024
const B_TURNS = 30
const TENANT_A = "tenant-a"

interface Counts {
  readonly ok: number
  readonly busy: number
  readonly other: number
  readonly messages: ReadonlyArray<string>
}

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start({ CTXD_TENANT_TURNS_PERCENT: "25" })
})
afterAll(async () => {
  await h?.close()
})

const small = (i: number) => ({
  turnId: "t1",
  format: "openai",
  model: { provider: "openai", name: "gpt-4o" },
  messages: [{ role: "user", content: `What is the status of order ${i}? Please answer briefly.` }],
})

/** Asks the flood thread and waits for its answer. */
const ask = <A>(flood: Worker, what: string) =>
  new Promise<A>((resolve) => {
    flood.once("message", resolve)
    flood.postMessage(what)
  })

/** Polls the flood's counts until `done` holds of them. */
const until = async (flood: Worker, what: string, done: (counts: Counts) => boolean, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const counts = await ask<Counts>(flood, "stats")
    if (done(counts)) return counts
    if (Date.now() > deadline) throw new Error(`tenant A's flood: not ${what} within ${timeoutMs} ms (${JSON.stringify(counts)})`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

it("tenant A's turns held in flight leave tenant B never Busy and answered; A gets Busy over its share", { timeout: 120_000 }, async () => {
  // every session A's flood sends on (FairShareFlood: a-<sender>), inserted by a transaction held open:
  // A's turns do their work and wait for Postgres at their commit, in flight
  const held = await Harness.hold(h.url, h.schema, [
    {
      text: "INSERT INTO ctxd_sessions (tenant, session) SELECT $1, 'a-' || k FROM generate_series(0, $2::integer - 1) AS k",
      params: [TENANT_A, A_CONCURRENCY],
    },
  ])
  const flood = new Worker(new URL("./FairShareFlood.ts", import.meta.url), {
    workerData: {
      servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222",
      prefix: `${h.root}.v1.turn.${TENANT_A}.`,
      concurrency: A_CONCURRENCY,
      textBytes: A_TEXT_BYTES,
    },
  })
  try {
    await new Promise((resolve, reject) => {
      flood.once("message", resolve)
      flood.once("error", reject)
    })
    // A holds its share (one turn, waiting at its commit) and every other sender of it was refused
    await held.untilBlocked(1)
    await until(flood, "refused on every other sender", (c) => c.busy >= A_CONCURRENCY - 1)

    // B, one turn at a time on new sessions, while A's flood goes on against its held share
    for (let i = 0; i < B_TURNS; i++) {
      const reply = await h.request(h.turnSubject("tenant-b", `b-${i}`), small(i), 15_000)
      expect(reply.ok, JSON.stringify(reply.error)).toBe(true)
    }
    const during = await ask<Counts>(flood, "stats")
    // A was never served past its share: its one turn in flight is still held
    expect(during.ok).toBe(0)
    expect(await held.blocked()).toBeGreaterThanOrEqual(1)

    // once Postgres lets A's commits go, A is served within its share
    await held.release()
    await until(flood, "served after the hold", (c) => c.ok >= 2)
    const a = await ask<Counts>(flood, "stop")
    expect(a.other).toBe(0)
    expect(a.busy).toBeGreaterThanOrEqual(A_CONCURRENCY - 1)
    expect(a.messages.every((m) => m.startsWith(`tenant ${TENANT_A} holds its share of this worker's turns in flight`))).toBe(true)
  } finally {
    await held.release()
    await flood.terminate()
  }

  // the refusals are counted by tenant; B has none
  const json = await h.request(`${h.root}.v1.metrics`, {}, 5_000)
  const series = (json.metrics as ReadonlyArray<{ name: string; tags: Record<string, string> }>).filter(
    (m) => m.name === "ctxd_tenant_busy_total",
  )
  expect(series.map((m) => `${m.tags.tenant}/${m.tags.limit}`)).toEqual([`${TENANT_A}/turns`])
})
