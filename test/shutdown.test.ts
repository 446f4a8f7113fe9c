// Graceful shutdown: SIGTERM stops taking turns, finishes those in flight,
// drains NATS and exits 0. The turns are in flight for certain when the
// signal comes: Postgres holds their commits (their sessions' rows inserted
// by a transaction the test keeps open) until after it.
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start()
})
afterAll(async () => {
  await h?.close()
})

const SESSIONS = 30

/** The worker's `ctxd_commits_waiting` gauge, from its metrics subject. */
const commitsWaiting = async () => {
  const json = await h.request(`${h.root}.v1.metrics`, {}, 5_000)
  const gauge = (json.metrics as ReadonlyArray<{ name: string; value?: number }>).find((m) => m.name === "ctxd_commits_waiting")
  return gauge?.value ?? 0
}

it("finishes the turns in flight when it gets SIGTERM, then exits 0", async () => {
  const held = await Harness.hold(h.url, h.schema, [
    {
      text: "INSERT INTO ctxd_sessions (tenant, session) SELECT 'shut', 's' || k FROM generate_series(0, $1::integer - 1) AS k",
      params: [SESSIONS],
    },
  ])
  try {
    const turns = Array.from({ length: SESSIONS }, (_, i) =>
      h.request(
        h.turnSubject("shut", `s${i}`),
        {
          turnId: "t1",
          format: "openai",
          model: { provider: "openai", name: "gpt-4o" },
          messages: [{ role: "user", content: `hello ${i} `.repeat(200) }],
        },
        15_000,
      ),
    )
    // every turn has done its work and waits for its commit, then the worker is asked to stop
    const deadline = Date.now() + 20_000
    while ((await commitsWaiting()) < SESSIONS) {
      if (Date.now() > deadline) throw new Error(`not every turn reached its commit: ${await commitsWaiting()} of ${SESSIONS}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const exit = h.worker.stop("SIGTERM")
    await h.worker.waitFor("shutting down", 10_000)
    await held.release()
    const replies = await Promise.all(turns)
    expect(replies.every((r) => r.ok === true)).toBe(true)
    expect(await exit).toBe(0)
  } finally {
    await held.release()
  }
  const stored = await h.sql<{ n: string }>("select count(*) as n from ctxd_messages")
  expect(Number(stored[0]!.n)).toBe(SESSIONS)
})
