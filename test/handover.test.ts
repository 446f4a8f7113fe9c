// Scaling out and in under load: a second worker takes its fair share of the
// shards and serves turns, a graceful stop hands its shards back (released by
// the time it has exited, not left to expire), and no turn fails or is stored
// twice. Each phase waits for what it needs (every session sending turns, b
// serving some), not for a span of wall time; how long the moves take is
// printed and left to the failover benchmark (bench/Scaling.ts). The one
// bound kept is the documented one: a new worker owns its share within two
// lease rounds, checked as 4 x TTL (12 lease rounds) for a loaded machine.
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Cluster from "./Cluster.ts"

const { TTL_MS } = Cluster
const TENANT = "scale"
const SESSIONS = 40

let c: Cluster.Cluster
beforeAll(async () => {
  c = await Cluster.start()
  await c.start("a")
  await c.settled(["a"], 2 * TTL_MS)
}, Cluster.SETUP_TIMEOUT_MS)
afterAll(async () => {
  await c?.close()
})

it("a new worker takes its share and serves, a graceful stop hands it back, without failing a turn", async () => {
  const client = await c.client({ timeoutMs: 3_000, retryForMs: 20_000 })
  const sessions = Array.from({ length: SESSIONS }, (_, i) => `h${i}`)
  const sent = new Map(sessions.map((s) => [s, 0]))
  const failures: Array<string> = []
  let running = true
  // every session sends a turn every 100 ms or so, until stopped
  const load = Promise.all(
    sessions.map(async (session) => {
      while (running) {
        const i = sent.get(session)!
        try {
          await client.turn(TENANT, session, Cluster.turn(session, i))
          sent.set(session, i + 1)
        } catch (error) {
          failures.push(`${session} turn ${i}: ${String(error)}`)
          return
        }
        await Cluster.sleep(100)
      }
    }),
  )
  const handled = async (id: string) => (await c.health()).get(id)?.turns ?? 0
  /**
   * Resolves once every session has had two more turns answered than at `since` (a copy of `sent`):
   * the second was sent after `since`, not in flight then. Fails on a failed turn.
   */
  const everySessionSince = async (since: ReadonlyMap<string, number>, what: string) => {
    const deadline = Date.now() + 30_000
    while (sessions.some((s) => sent.get(s)! < since.get(s)! + 2)) {
      if (failures.length > 0 || Date.now() > deadline)
        throw new Error(`not every session had a turn answered ${what}: ${failures.join("; ")}`)
      await Cluster.sleep(50)
    }
  }
  await everySessionSince(new Map(sessions.map((s) => [s, 0])), "with a alone")

  // scale out: b joins and gets its half of the shards, and serves turns
  await c.start("b")
  const joined = await c.settled(["a", "b"], 4 * TTL_MS)
  console.log(`scale out: b owns its share ${joined} ms after it was ready`)
  const owned = (await c.owners()).get("b")?.length ?? 0
  expect(Math.abs(owned - Cluster.SHARDS / 2)).toBeLessThanOrEqual(Cluster.SHARDS / 8)
  const servedBefore = await handled("b")
  const afterJoin = new Map(sent)
  await everySessionSince(afterJoin, "after b joined")
  // every session sent a turn after b owned its shards, and some sessions are on them
  expect(await handled("b")).toBeGreaterThan(servedBefore)

  // scale in: SIGTERM to b; it finishes its turns, releases its leases, exits 0; a takes over
  const stoppedAt = performance.now()
  const exit = c.workers.get("b")!.stop("SIGTERM")
  expect(await exit).toBe(0)
  // released, not left to expire: none of b's leases is live once it has exited
  expect((await c.owners()).get("b") ?? []).toEqual([])
  expect(c.workers.get("b")!.output()).toContain("released")
  const back = await c.settled(["a"], 4 * TTL_MS)
  console.log(
    `scale in: a owns every shard ${Math.round(performance.now() - stoppedAt)} ms after b got SIGTERM (${back} ms after b exited)`,
  )
  await everySessionSince(new Map(sent), "after b stopped")

  running = false
  await load
  expect(failures).toEqual([])
  expect(await Cluster.expectExactlyOnce(c, TENANT, sessions, (s) => sent.get(s)!)).toEqual([])
}, 180_000)
