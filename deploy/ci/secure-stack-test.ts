// Checks the secure compose stack (docker-compose.yml + deploy/compose/secure.yml)
// from the host: NATS requires a login, the worker logged in as `ctxd`, and a
// tenant's runtime (acme) can run its own turns but not globex's, cannot read
// worker-direct subjects, and cannot use the tenant-less summarize subject.
// Run by deploy/ci/containers.sh:
//
//   NATS_URL=nats://127.0.0.1:14222 node deploy/ci/secure-stack-test.ts
//
// Prints one line per check and "N passed, N failed"; writes the counts to
// $CTXD_CI_STACK_RESULTS; exits 1 when a check failed.
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { writeFileSync } from "node:fs"

const NATS_URL = process.env.NATS_URL ?? "nats://127.0.0.1:14222"
const started = Date.now()
const log = (text: string): void => console.log(`[secure-stack-test +${((Date.now() - started) / 1000).toFixed(1)}s] ${text}`)
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const tenant = (name: string) =>
  connect({ servers: NATS_URL, user: name, pass: name, inboxPrefix: `_INBOX_${name}`, name: `ci-${name}`, maxReconnectAttempts: 0 })

const turn = (turnId: string) => ({
  turnId,
  format: "openai",
  model: { provider: "openai", name: "gpt-4o" },
  messages: [{ role: "user", content: `hello ${turnId}` }],
})

/** The error a request ends with, or undefined when it was answered. */
const failure = async (nc: NatsConnection, subject: string, body: unknown): Promise<unknown> => {
  try {
    await nc.request(subject, JSON.stringify(body), { timeout: 3_000 })
    return undefined
  } catch (e) {
    return e
  }
}

const describe = (e: unknown): string => {
  const cause = (e as { cause?: unknown }).cause
  return `${String(e)}${cause === undefined ? "" : ` (${String(cause)})`}`
}

const results = { passed: 0, failed: 0 }
const check = async (name: string, body: () => Promise<void>) => {
  try {
    await body()
    results.passed++
    log(`ok   ${name}`)
  } catch (e) {
    results.failed++
    log(`FAIL ${name}: ${e instanceof Error ? e.message : String(e)}`)
  }
}

const acme = await (async () => {
  // the worker may still be joining: retry acme's first turn for up to 2 minutes
  const deadline = Date.now() + 120_000
  for (;;) {
    try {
      const nc = await tenant("acme")
      const reply = (await nc.request("ctx.v1.turn.acme.s0", JSON.stringify(turn("t0")), { timeout: 5_000 })).json<{ ok: boolean }>()
      if (reply.ok) return nc
      await nc.close()
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error("acme's first turn was not answered within 2 minutes")
    await sleep(1_000)
  }
})()

await check("a connection without credentials is refused", async () => {
  const refused = await connect({ servers: NATS_URL, maxReconnectAttempts: 0 }).then(
    async (nc) => (await nc.close(), false),
    () => true,
  )
  if (!refused) throw new Error("an anonymous connection was accepted")
})

await check("acme runs its own turns", async () => {
  const reply = (await acme.request("ctx.v1.turn.acme.s1", JSON.stringify(turn("t1")), { timeout: 10_000 })).json<{
    ok: boolean
    messages?: unknown[]
  }>()
  if (!reply.ok) throw new Error(`not ok: ${JSON.stringify(reply).slice(0, 300)}`)
})

await check("acme cannot publish to globex's turn subject", async () => {
  const e = await failure(acme, "ctx.v1.turn.globex.s1", turn("t1"))
  if (e === undefined || !/permission/i.test(describe(e))) throw new Error(`expected a permission violation, got ${describe(e)}`)
})

await check("acme cannot use the tenant-less summarize subject", async () => {
  const e = await failure(acme, "ctx.v1.summarize", { format: "openai", model: { provider: "openai", name: "gpt-4o" }, messages: [] })
  if (e === undefined || !/permission/i.test(describe(e))) throw new Error(`expected a permission violation, got ${describe(e)}`)
})

await check("acme cannot subscribe to worker-direct subjects", async () => {
  const sub = acme.subscribe("ctx.v1.worker.>")
  await acme.flush()
  const closed = await Promise.race([sub.closed, sleep(5_000).then(() => "still open")])
  if (!sub.isClosed()) sub.unsubscribe()
  if (!/permission/i.test(describe(closed))) throw new Error(`expected a permission violation, got ${describe(closed)}`)
})

await acme.close()
log(`${results.passed} passed, ${results.failed} failed`)
if (process.env.CTXD_CI_STACK_RESULTS !== undefined) writeFileSync(process.env.CTXD_CI_STACK_RESULTS, JSON.stringify(results))
process.exit(results.failed === 0 ? 0 : 1)
