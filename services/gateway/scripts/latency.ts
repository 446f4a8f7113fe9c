/**
 * A quick measure of the latency the gateway adds (not the full
 * bench): N sequential non-streamed Anthropic calls straight to the fake
 * provider, then the same through the gateway with an instant stub port
 * (active mode), and time to first byte of a streamed call both ways.
 * Prints p50 and p99 of each, in milliseconds.
 *
 *   node services/gateway/scripts/latency.ts [N=2000]
 */
import * as Http from "node:http"
import { FakeProvider } from "@ctxd/testing"
import { startServer } from "../src/Server.ts"
import type { TurnPort } from "../src/Port.ts"

const n = Number(process.argv[2] ?? 2000)
const agent = new Http.Agent({ keepAlive: true, maxSockets: 1 })

const call = (base: string, stream: boolean): Promise<{ total: number; first: number }> =>
  new Promise((resolve, reject) => {
    const t0 = performance.now()
    let first = 0
    const req = Http.request(`${base}/v1/messages`, {
      method: "POST",
      agent,
      headers: { "content-type": "application/json", "x-api-key": "bench-key-0000", "anthropic-version": "2023-06-01" },
    })
    req.on("response", (res) => {
      res.once("data", () => (first = performance.now() - t0))
      res.on("end", () => resolve({ total: performance.now() - t0, first }))
      res.resume()
    })
    req.on("error", reject)
    req.end(JSON.stringify({ model: "claude-sonnet-5", max_tokens: 16, stream, messages: [{ role: "user", content: "hello there" }] }))
  })

const quantile = (xs: Array<number>, q: number): number => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

const run = async (base: string, stream: boolean, fake: FakeProvider.FakeProviderServer) => {
  const totals: Array<number> = []
  const firsts: Array<number> = []
  for (let i = 0; i < n; i++) {
    if (i % 200 === 0) fake.control({ clearRequests: true, clearCache: true })
    const r = await call(base, stream)
    if (i >= 50) {
      totals.push(r.total)
      firsts.push(r.first)
    }
  }
  return { p50: quantile(totals, 0.5), p99: quantile(totals, 0.99), ttfb50: quantile(firsts, 0.5), ttfb99: quantile(firsts, 0.99) }
}

const fake = await FakeProvider.start()
const port: TurnPort = {
  prompt: (request) => Promise.resolve({ body: request.body, headers: {}, turnId: "t", report: {} as never }),
  usage: () => {},
  ready: () => Promise.resolve(true),
  close: () => Promise.resolve(),
}
const gateway = await startServer({ turns: port, upstreams: { anthropic: fake.url, openai: fake.url, google: fake.url } })
for (const stream of [false, true]) {
  const direct = await run(fake.url, stream, fake)
  const via = await run(gateway.url, stream, fake)
  const f = (x: number) => x.toFixed(2)
  console.log(
    `${stream ? "streamed" : "non-streamed"}: direct p50 ${f(direct.p50)} p99 ${f(direct.p99)} | via gateway p50 ${f(via.p50)} p99 ${f(via.p99)}` +
      ` | added p50 ${f(via.p50 - direct.p50)} p99 ${f(via.p99 - direct.p99)}` +
      (stream ? ` | ttfb direct p50 ${f(direct.ttfb50)} via p50 ${f(via.ttfb50)} p99 ${f(via.ttfb99)}` : ""),
  )
}
await gateway.close()
await fake.close()
agent.destroy()
