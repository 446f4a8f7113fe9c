// A worker cut off from Postgres (its connections go through a TCP proxy the
// test closes) stops serving its shards before its leases can expire, so no
// two workers ever serve a shard at once; the other worker takes the shards
// over once the leases have expired, and the session goes on there.
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Cluster from "./Cluster.ts"

const { TTL_MS } = Cluster
const TENANT = "part"

let c: Cluster.Cluster
let proxy: Awaited<ReturnType<typeof Cluster.postgresProxy>>
beforeAll(async () => {
  c = await Cluster.start()
  proxy = await Cluster.postgresProxy(c.url)
  await Promise.all([c.start("a"), c.start("b", { DATABASE_URL: proxy.url, CTXD_DB_CONNECT_TIMEOUT_MS: "500" })])
  await c.settled(["a", "b"], 4 * TTL_MS)
}, Cluster.SETUP_TIMEOUT_MS)
afterAll(async () => {
  proxy?.cut()
  await c?.close()
})

const encoder = new TextEncoder()

it("stops serving within the TTL when it cannot reach Postgres; another worker takes over after the TTL", async () => {
  const client = await c.client({ timeoutMs: 2_000, retryForMs: 20_000 })
  const shardsOfB = (await c.owners()).get("b") ?? []
  expect(shardsOfB.length).toBeGreaterThan(0)
  const session = Cluster.sessionIn(TENANT, shardsOfB, "p")
  await client.turn(TENANT, session, Cluster.turn(session, 0))
  expect((await c.health()).get("b")?.turns).toBe(1)

  proxy.cut()
  const cutAt = performance.now()
  // b's own subject, asked every 50 ms: Unavailable (Postgres is gone) or no answer, then NotOwner once b stopped serving
  const direct = `${c.root}.v1.worker.b.turn.${TENANT}.${session}`
  const codes: Array<string> = []
  const asked: Array<Promise<void>> = []
  let stoppedAt = 0
  while (stoppedAt === 0 && performance.now() - cutAt < 2 * TTL_MS) {
    asked.push(
      c.nc
        .request(direct, encoder.encode(JSON.stringify(Cluster.turn(session, 1))), { timeout: 1_000 })
        .then((msg) => msg.json<{ ok: boolean; error?: { code: string } }>())
        .catch(() => ({ ok: false, error: { code: "no answer" } }))
        .then((reply) => {
          const code = reply.ok ? "ok" : reply.error!.code
          if (!codes.includes(code)) codes.push(code)
          if (code === "NotOwner" && stoppedAt === 0) stoppedAt = performance.now()
        }),
    )
    await Cluster.sleep(50)
  }
  await Promise.all(asked)
  // ... while Postgres still has b's leases live: nobody else could serve them yet
  const stillB = (await c.owners()).get("b")?.length ?? 0
  console.log(`cut off: b answered ${codes.join(" → ")}; stopped after ${Math.round(stoppedAt - cutAt)} ms`)
  expect(codes).not.toContain("ok")
  expect(stoppedAt).toBeGreaterThan(0)
  expect(stoppedAt - cutAt).toBeLessThan(TTL_MS)
  expect(stillB).toBe(shardsOfB.length)

  // the session goes on at a, once b's leases expired (retried by the client meanwhile)
  const reply = await client.turn(TENANT, session, Cluster.turn(session, 1))
  const movedAfter = performance.now() - cutAt
  console.log(`the session was answered again ${Math.round(movedAfter)} ms after the cut`)
  expect(reply.turnId).toBe(`${session}-t1`)
  expect(movedAfter).toBeGreaterThan(TTL_MS - (2 * TTL_MS) / 3)
  // the takeover (within 2 × TTL), then at most the client's attempt in flight (its 2 s
  // timeout) and one backoff sleep (at most 1 s) before it asks again
  expect(movedAfter).toBeLessThan(2 * TTL_MS + 2_000 + 1_000)
  await c.settled(["a"], TTL_MS)
  expect(await Cluster.expectExactlyOnce(c, TENANT, [session], () => 2)).toEqual([])

  c.workers.get("b")!.child.kill("SIGKILL")
}, 60_000)
