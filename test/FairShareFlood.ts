/**
 * Tenant A of `fairShare.test.ts`, run in a worker thread: a flood of large
 * turns from a client of its own (its own connection and event loop, as
 * another tenant's client would be). Each of `concurrency` senders keeps one
 * turn outstanding, sender `k` on session `a-<k>` (named up front, so the test
 * can hold their commits in Postgres), each turn with a new turn id, and
 * retries `Busy` with ContextClient's backoff (50 ms doubling, at most 1 s,
 * jittered). Messages:
 * `"stats"` → the counts so far; `"stop"` → stops, then the final counts.
 */
import { connect } from "@nats-io/transport-node"
import { parentPort, workerData } from "node:worker_threads"

interface Options {
  readonly servers: string
  /** `<root>.v1.turn.<tenant>.` */
  readonly prefix: string
  readonly concurrency: number
  readonly textBytes: number
}

const options = workerData as Options
const nc = await connect({ servers: options.servers })
/** The body of a turn after its turn id: `{"turnId":"…",` + this. */
const large = (i: number) => {
  const words: string[] = []
  let bytes = 0
  for (let k = 0; bytes < options.textBytes; k++) {
    const word = `w${(i * 7919 + k * 31) % 100_003}`
    words.push(word)
    bytes += word.length + 1
  }
  const body = {
    format: "openai",
    model: { provider: "openai", name: "gpt-4o" },
    messages: [{ role: "user", content: words.join(" ") }],
  }
  return JSON.stringify(body).slice(1)
}
const encoder = new TextEncoder()
const bodies = Array.from({ length: 16 }, (_, i) => large(i))
const counts = { ok: 0, busy: 0, other: 0, messages: [] as string[] }
let flooding = true
let sent = 0

const sender = async (loop: number) => {
  let backoff = 50
  while (flooding) {
    const n = sent++
    try {
      const body = encoder.encode(`{"turnId":"t${n}",${bodies[n % bodies.length]}`)
      const msg = await nc.request(`${options.prefix}a-${loop}`, body, { timeout: 60_000 })
      const reply = msg.json<{ ok: boolean; error?: { code: string; message: string } }>()
      if (reply.ok) {
        counts.ok++
        backoff = 50
      } else if (reply.error?.code === "Busy") {
        counts.busy++
        if (counts.messages.length < 3 && !counts.messages.includes(reply.error.message)) counts.messages.push(reply.error.message)
        await new Promise((resolve) => setTimeout(resolve, backoff * (0.5 + Math.random())))
        backoff = Math.min(1_000, backoff * 2)
      } else counts.other++
    } catch {
      counts.other++
    }
  }
}
const senders = Array.from({ length: options.concurrency }, (_, loop) => sender(loop))

parentPort!.on("message", (what: string) => {
  if (what === "stats") parentPort!.postMessage({ ...counts })
  else if (what === "stop") {
    flooding = false
    void Promise.all(senders)
      .then(() => nc.drain())
      .then(() => parentPort!.postMessage({ ...counts }))
  }
})
parentPort!.postMessage("ready")
