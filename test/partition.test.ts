// A worker cut off from Postgres (its connections go through a TCP proxy the
// test closes) stops serving its shards before its leases can expire, so no
// two workers ever serve a shard at once; the other worker takes the shards
// over once the leases have expired, and the session goes on there.
//
// The cut-off worker runs with a long TTL and a wide safety margin (it stops
// serving 3 s after its last renewal, its leases expire 6 s after that), so
// "stopped while its leases are live" is read off the database with seconds
// to spare rather than within a 600 ms margin that a loaded machine eats.
// The comparisons are with the leases' expiry on the database clock (same
// host); how long each step took is printed, not asserted.
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Cluster from "./Cluster.ts"

const { TTL_MS } = Cluster
const TENANT = "part"
/** b's leases: TTL 9 s, renewed every 1 s, served until 6 s before they could expire. */
const B_TTL_MS = 9_000
const B_MARGIN_MS = 6_000

let c: Cluster.Cluster
let proxy: Awaited<ReturnType<typeof Cluster.postgresProxy>>
beforeAll(async () => {
  c = await Cluster.start()
  proxy = await Cluster.postgresProxy(c.url)
  await Promise.all([
    c.start("a"),
    c.start("b", {
      DATABASE_URL: proxy.url,
      CTXD_DB_CONNECT_TIMEOUT_MS: "500",
      CTXD_LEASE_TTL_MS: String(B_TTL_MS),
      CTXD_LEASE_REFRESH_MS: "1000",
      CTXD_LEASE_MARGIN_MS: String(B_MARGIN_MS),
    }),
  ])
  await c.settled(["a", "b"], 4 * TTL_MS)
}, Cluster.SETUP_TIMEOUT_MS)
afterAll(async () => {
  proxy?.cut()
  await c?.close()
})

const encoder = new TextEncoder()

it("stops serving before its leases expire when it cannot reach Postgres; another worker takes over after they did", async () => {
  const client = await c.client({ timeoutMs: 2_000, retryForMs: 30_000 })
  const shardsOfB = (await c.owners()).get("b") ?? []
  expect(shardsOfB.length).toBeGreaterThan(0)
  const session = Cluster.sessionIn(TENANT, shardsOfB, "p")
  await client.turn(TENANT, session, Cluster.turn(session, 0))
  expect((await c.health()).get("b")?.turns).toBe(1)

  proxy.cut()
  const cutAt = Date.now()
  // b can renew no more: when its leases expire is final (until a takes them over, after that)
  const leases = await c.sql<{ expires: Date }>("SELECT min(expires_at) AS expires FROM ctxd_shard_leases WHERE owner = 'b'")
  const expiresAt = leases[0]!.expires.getTime()
  // b's own subject, asked every 50 ms: Unavailable (Postgres is gone) or no answer, then NotOwner once b stopped serving
  const direct = `${c.root}.v1.worker.b.turn.${TENANT}.${session}`
  const codes: Array<string> = []
  const asked: Array<Promise<void>> = []
  let stoppedAt = 0
  while (stoppedAt === 0 && Date.now() < expiresAt) {
    asked.push(
      c.nc
        .request(direct, encoder.encode(JSON.stringify(Cluster.turn(session, 1))), { timeout: 1_000 })
        .then((msg) => msg.json<{ ok: boolean; error?: { code: string } }>())
        .catch(() => ({ ok: false, error: { code: "no answer" } }))
        .then((reply) => {
          const code = reply.ok ? "ok" : reply.error!.code
          if (!codes.includes(code)) codes.push(code)
          if (code === "NotOwner" && stoppedAt === 0) stoppedAt = Date.now()
        }),
    )
    await Cluster.sleep(50)
  }
  // b said NotOwner while Postgres still had its leases live: nobody else could serve them yet
  const stillB = (await c.owners()).get("b")?.length ?? 0
  await Promise.all(asked)
  const when =
    stoppedAt === 0
      ? "did not stop"
      : `stopped ${stoppedAt - cutAt} ms after the cut, ${expiresAt - stoppedAt} ms before its leases expired`
  console.log(`cut off: b answered ${codes.join(" → ")}; ${when}`)
  expect(codes).not.toContain("ok")
  expect(stoppedAt).toBeGreaterThan(0)
  expect(stoppedAt).toBeLessThan(expiresAt)
  expect(stillB).toBe(shardsOfB.length)

  // the session goes on at a, once b's leases expired (retried by the client meanwhile)
  const reply = await client.turn(TENANT, session, Cluster.turn(session, 1))
  const movedAt = Date.now()
  console.log(`the session was answered again ${movedAt - cutAt} ms after the cut, ${movedAt - expiresAt} ms after b's leases expired`)
  expect(reply.turnId).toBe(`${session}-t1`)
  expect(movedAt).toBeGreaterThanOrEqual(expiresAt)
  await c.settled(["a"], 4 * TTL_MS)
  expect(await Cluster.expectExactlyOnce(c, TENANT, [session], () => 2)).toEqual([])

  c.workers.get("b")!.child.kill("SIGKILL")
}, 120_000)
