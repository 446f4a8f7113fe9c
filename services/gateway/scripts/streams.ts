/**
 * Memory with many concurrent streams through the gateway: N clients each
 * hold a streamed Anthropic call open while a scripted upstream sends an
 * event every 50 ms for 3 s. Prints the gateway process's RSS and heap
 * before, at the peak, and after (the gateway, the upstream and the clients
 * share this process, so it is an upper bound).
 *
 *   node --expose-gc services/gateway/scripts/streams.ts [N=1000]
 *   DIRECT=1 node --expose-gc services/gateway/scripts/streams.ts [N]   (the same straight to the upstream)
 *
 * Measured (this machine, one process for all three roles): 1,000 streams
 * peak at ~425 MB RSS with ~32 MB of JS heap (the rest is socket buffers
 * of 3,000 sockets); 200 streams take ~7 s through the gateway cold, ~4 s
 * warm, against ~3.4 s direct for 3 s streams.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { startServer } from "../src/Server.ts"
import type { TurnPort } from "../src/Port.ts"

const n = Number(process.argv[2] ?? 1000)
const mb = (x: number) => `${(x / 1024 / 1024).toFixed(1)} MB`
const snap = (label: string) => {
  ;(globalThis as { gc?: () => void }).gc?.()
  const m = process.memoryUsage()
  console.log(`${label}: rss ${mb(m.rss)} heap ${mb(m.heapUsed)}`)
}

const event = (data: unknown) => `event: x\ndata: ${JSON.stringify(data)}\n\n`
const upstream = Http.createServer((req, res) => {
  req.resume()
  req.on("end", () => {
    res.writeHead(200, { "content-type": "text/event-stream" })
    res.write(event({ type: "message_start", message: { id: "m", usage: { input_tokens: 10 } } }))
    let i = 0
    const timer = setInterval(() => {
      if (++i < 60) return void res.write(event({ type: "content_block_delta", delta: { type: "text_delta", text: "x".repeat(200) } }))
      clearInterval(timer)
      res.end(event({ type: "message_delta", usage: { output_tokens: 60 } }))
    }, 50)
  })
})
await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r))
const upUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
let usages = 0
const port: TurnPort = {
  prompt: (request) => Promise.resolve({ body: request.body, headers: {}, turnId: "t", report: {} as never }),
  usage: () => void usages++,
  ready: () => Promise.resolve(true),
  close: () => Promise.resolve(),
}
const gateway = await startServer({ turns: port, upstreams: { anthropic: upUrl, openai: upUrl, google: upUrl } })
const agent = new Http.Agent({ keepAlive: false, maxSockets: Infinity })
snap("before")
let peak = 0
const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 100)
const started = performance.now()
await Promise.all(
  Array.from(
    { length: n },
    () =>
      new Promise<void>((resolve, reject) => {
        const req = Http.request(`${process.env["DIRECT"] ? upUrl : gateway.url}/v1/messages`, {
          method: "POST",
          agent,
          headers: { "x-api-key": "k" },
        })
        req.on("response", (res) => {
          res.resume()
          res.on("end", () => resolve())
        })
        req.on("error", reject)
        req.end(JSON.stringify({ model: "claude-sonnet-5", max_tokens: 64, stream: true, messages: [{ role: "user", content: "hi" }] }))
      }),
  ),
)
clearInterval(sampler)
console.log(`${n} streams done in ${((performance.now() - started) / 1000).toFixed(1)} s, usage reports ${usages}, peak rss ${mb(peak)}`)
snap("after")
await gateway.close()
await new Promise<void>((r) => upstream.close(() => r()))
agent.destroy()
