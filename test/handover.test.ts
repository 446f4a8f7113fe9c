// Scaling out and in under load: a second worker takes its fair share of the
// shards within 2 × TTL, a graceful stop hands its shards back at once (well
// before a lease could expire), and no turn fails or is stored twice.
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

it("a new worker takes its share within 2 × TTL and a graceful stop hands it back at once, without failing a turn", async () => {
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
  await Cluster.sleep(1_000)

  // scale out: b joins and gets its half of the shards, and serves turns
  await c.start("b")
  const joined = await c.settled(["a", "b"], 2 * TTL_MS)
  console.log(`scale out: b owns its share ${joined} ms after it was ready`)
  expect(joined).toBeLessThan(2 * TTL_MS)
  const owned = (await c.owners()).get("b")?.length ?? 0
  expect(Math.abs(owned - Cluster.SHARDS / 2)).toBeLessThanOrEqual(Cluster.SHARDS / 8)
  const servedBefore = await handled("b")
  await Cluster.sleep(1_000)
  expect(await handled("b")).toBeGreaterThan(servedBefore)

  // scale in: SIGTERM to b; it finishes its turns, releases its leases, exits 0; a takes over at once
  const stoppedAt = performance.now()
  const exit = c.workers.get("b")!.stop("SIGTERM")
  const back = await c.settled(["a"], 2 * TTL_MS)
  const handover = performance.now() - stoppedAt
  expect(await exit).toBe(0)
  console.log(`scale in: a owns every shard ${Math.round(handover)} ms after b got SIGTERM`)
  // a crashed worker's leases would have to expire first (TTL − refresh at least)
  expect(back).toBeLessThan(TTL_MS)
  expect(c.workers.get("b")!.output()).toContain("released")

  await Cluster.sleep(500)
  running = false
  await load
  expect(failures).toEqual([])
  expect([...sent.values()].every((n) => n > 5)).toBe(true)
  expect(await Cluster.expectExactlyOnce(c, TENANT, sessions, (s) => sent.get(s)!)).toEqual([])
}, 90_000)
