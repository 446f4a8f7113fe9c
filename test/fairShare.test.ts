// Fair share per tenant (CTXD_TENANT_BYTES_PERCENT, CTXD_TENANT_TURNS_PERCENT):
// tenant A floods one worker with many concurrent large turns while tenant B
// sends its turns one at a time, as an agent does. B is never answered Busy
// and its median latency stays within 2× of its median on the idle worker
// (measured first, in the same test, on the same worker); A is answered Busy
// once over its share, and is still served within it.
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

const A_CONCURRENCY = 48
const A_TEXT_BYTES = 256 * 1024
const B_TURNS = 40
const WARM_UP = 15

let h: Harness.Harness
beforeAll(async () => {
  // 4 MiB of request bytes in flight: A's share (50 %) is 2 MiB, about 8 of its turns; its turns share is 2 of 4 slots
  h = await Harness.start({ CTXD_MAX_INFLIGHT_BYTES: String(4 * 1024 * 1024) })
})
afterAll(async () => {
  await h?.close()
})

const model = { provider: "openai", name: "gpt-4o" }
const small = (i: number) => ({
  turnId: "t1",
  format: "openai",
  model,
  messages: [{ role: "user", content: `What is the status of order ${i}? Please answer briefly.` }],
})
/** A large first turn: a long pasted document (different text per turn, so nothing is cached across turns). */
const large = (i: number) => {
  const words: string[] = []
  let bytes = 0
  for (let k = 0; bytes < A_TEXT_BYTES; k++) {
    const word = `w${(i * 7919 + k * 31) % 100_003}`
    words.push(word)
    bytes += word.length + 1
  }
  return { turnId: "t1", format: "openai", model, messages: [{ role: "user", content: words.join(" ") }] }
}

const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** B's turns one at a time, each on a new session (the same work every time); their latencies in ms. */
const bTurns = async (label: string, n: number) => {
  const latencies: number[] = []
  for (let i = 0; i < n; i++) {
    const started = performance.now()
    const reply = await h.request(h.turnSubject("tenant-b", `${label}-${i}`), small(i), 30_000)
    latencies.push(performance.now() - started)
    expect(reply.ok, JSON.stringify(reply.error)).toBe(true)
  }
  return latencies
}

it("tenant A's flood leaves tenant B never Busy and within 2× of its unloaded latency; A gets Busy over its share", { timeout: 180_000 }, async () => {
  await bTurns("warm", WARM_UP)
  const unloaded = median(await bTurns("idle", B_TURNS))

  // A: keeps A_CONCURRENCY large turns outstanding, each on a new session; a Busy one is sent again after a pause
  const a = { ok: 0, busyBytes: 0, busyTurns: 0, other: 0 }
  let flooding = true
  const bodies = Array.from({ length: 16 }, (_, i) => new TextEncoder().encode(JSON.stringify(large(i))))
  let sent = 0
  const sender = async (loop: number) => {
    while (flooding) {
      const n = sent++
      try {
        const reply = await h.request(h.turnSubject("tenant-a", `a-${loop}-${n}`), bodies[n % bodies.length], 60_000)
        if (reply.ok) a.ok++
        else if (reply.error?.code === "Busy") {
          if (/request bytes/.test(reply.error.message)) a.busyBytes++
          else a.busyTurns++
          await new Promise((resolve) => setTimeout(resolve, 5))
        } else a.other++
      } catch {
        a.other++
      }
    }
  }
  const senders = Array.from({ length: A_CONCURRENCY }, (_, loop) => sender(loop))
  // the flood is on: A already had some of its turns refused
  const deadline = Date.now() + 20_000
  while (a.busyBytes + a.busyTurns < A_CONCURRENCY && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  const loaded = await bTurns("loaded", B_TURNS)
  const aDuring = { ...a }
  flooding = false
  await Promise.all(senders)

  const under = median(loaded)
  console.info(
    `fair share: B median ${unloaded.toFixed(1)} ms idle, ${under.toFixed(1)} ms under A's flood (${(under / unloaded).toFixed(2)}×); ` +
      `A during B's turns: ${aDuring.ok} ok, ${aDuring.busyBytes} Busy (bytes), ${aDuring.busyTurns} Busy (turns), ${aDuring.other} other`,
  )
  expect(under).toBeLessThanOrEqual(2 * unloaded)
  // A was over its share, on both limits, and still served within it
  expect(aDuring.busyTurns).toBeGreaterThan(0)
  expect(aDuring.busyBytes).toBeGreaterThan(0)
  expect(aDuring.ok).toBeGreaterThan(0)
  expect(a.other).toBe(0)

  // the refusals are counted by tenant; B has none
  const json = await h.request(`${h.root}.v1.metrics`, {}, 5_000)
  const busy = (json.metrics as ReadonlyArray<{ name: string; tags: Record<string, string>; value?: unknown }>).filter(
    (m) => m.name === "ctxd_tenant_busy_total",
  )
  expect(busy.map((m) => `${m.tags.tenant}/${m.tags.limit}`).sort()).toEqual(["tenant-a/bytes", "tenant-a/turns"])
})
