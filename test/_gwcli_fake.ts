// throwaway: start the fake provider and a raw logger in front of it (query strings kept)
import * as Http from "node:http"
import * as Fs from "node:fs"
import { FakeProvider } from "@ctxd/testing"
const fake = await FakeProvider.start({})
const log = process.argv[2] ?? "/tmp/gwcli-run/raw.jsonl"
const server = Http.createServer((req, res) => {
  const parts: Buffer[] = []
  req.on("data", (c) => parts.push(c))
  req.on("end", () => {
    const body = Buffer.concat(parts)
    const headers = { ...req.headers }
    for (const k of ["x-api-key", "authorization", "x-goog-api-key"]) if (headers[k]) headers[k] = "[redacted:" + String(headers[k]).length + "]"
    Fs.appendFileSync(log, JSON.stringify({ t: Date.now(), method: req.method, url: req.url, headers, body: body.toString("utf8").slice(0, 200000) }) + "\n")
    const up = Http.request(fake.url + req.url, { method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers)
      const chunks: Buffer[] = []
      r.on("data", (c) => { chunks.push(c); res.write(c) })
      r.on("end", () => { res.end(); Fs.appendFileSync(log, JSON.stringify({ t: Date.now(), reply: req.url, status: r.statusCode, body: Buffer.concat(chunks).toString("utf8").slice(0, 4000) }) + "\n") })
    })
    up.end(body)
  })
})
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  console.log(JSON.stringify({ url: `http://127.0.0.1:${(server.address() as any).port}`, fake: fake.url }))
})
