// Turns waiting for Postgres do not hold back the turns behind them: a turn
// gives its turn slot back once only its commit remains, and the turn
// endpoints take, beyond the turns waiting for a slot, a batch of commits per
// statement in flight and one more gathering. With the commit path locked in
// Postgres, every turn sent does its work and waits at its commit
// (`ctxd_commits_waiting`), far more than the worker's turn slots and the
// endpoint's 16 requests at once; once the lock goes, they commit together
// in one statement. (Before, 16 requests at once per subject left the rest
// unread while the first ones waited for Postgres: batches stayed small and
// the CPUs idle.)
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"
import { eventually, freePort, parseExposition } from "./Observability.ts"

const SESSIONS = 40

describe("turns waiting for their commit", () => {
  let h: Harness.Harness
  let base = ""
  const metrics = async () => parseExposition(await (await fetch(`${base}/metrics`)).text())
  // the first turn of a tau-bench session, sent as the first turn of each session
  const first = Harness.tauTurns(0)(0)

  beforeAll(async () => {
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    // one turn slot, one commit statement at a time, up to 64 turns in it: each turn subject takes
    // 16 requests at once plus (1 + 1) × 64 waiting for their commit
    h = await Harness.start({
      CTXD_HTTP_PORT: String(port),
      CTXD_HTTP_HOST: "127.0.0.1",
      CTXD_MAX_CONCURRENT: "1",
      CTXD_COMMIT_STATEMENTS: "1",
      CTXD_COMMIT_BATCH: "64",
    })
  })
  afterAll(async () => {
    await h?.close()
  })

  it("do their work while Postgres holds the commits, then commit together", async () => {
    const locker = new pg.Client({ connectionString: h.url, options: `-c search_path=${h.schema}` })
    await locker.connect()
    try {
      // the commits write ctxd_sessions: they wait for this lock (reads do not)
      await locker.query("BEGIN")
      await locker.query("LOCK TABLE ctxd_sessions IN SHARE ROW EXCLUSIVE MODE")
      const replies = Array.from({ length: SESSIONS }, (_, k) => h.request(h.turnSubject("cw", `s${k}`), first, 60_000))
      // every turn reaches its commit: one in the locked statement, the others queued behind it
      const waiting = await eventually(
        "all turns waiting for their commit",
        async () => {
          const v = (await metrics()).value("ctxd_commits_waiting")
          return v === SESSIONS ? v : undefined
        },
        20_000,
      )
      expect(waiting).toBe(SESSIONS)
      const before = await metrics()
      expect(before.value("ctxd_commit_batch_turns_count")).toBe(0)
      await locker.query("ROLLBACK")
      const answered = await Promise.all(replies)
      expect(answered.map((r) => r.ok)).toEqual(Array(SESSIONS).fill(true))
      // the first turn alone (it went out at once and waited for the lock), the other 39 in one statement
      const after = await metrics()
      expect(after.value("ctxd_commit_batch_turns_sum")).toBe(SESSIONS)
      expect(after.value("ctxd_commit_batch_turns_count")).toBe(2)
      expect(after.value("ctxd_commits_waiting")).toBe(0)
      const stored = await h.sql<{ n: string }>("SELECT count(*) AS n FROM ctxd_turns")
      expect(Number(stored[0]!.n)).toBe(SESSIONS)
    } finally {
      await locker.end()
    }
  })
})
