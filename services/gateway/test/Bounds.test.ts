/**
 * Memory stays bounded: a client that does not read pauses the upstream
 * (backpressure through the gateway, nothing buffered without limit); a
 * pass-through body is streamed, not held (so it is not bound by
 * `maxBodyBytes`); a shadow prompt that fails leaves the client's call alone.
 */
import * as Http from "node:http"
import { afterEach, describe, expect, it } from "vitest"
import { eventually, type Stack, stack } from "./Helpers.ts"
import { type Scripted, scripted } from "./Upstream.ts"

let s: Stack | undefined
let up: Scripted | undefined
afterEach(async () => {
  await s?.close()
  await up?.close()
  s = undefined
  up = undefined
})

const via = async (options: Parameters<typeof stack>[0] = {}) => {
  up = await scripted()
  s = await stack({ upstreams: { anthropic: up.url, openai: up.url, google: up.url }, ...options })
  return { up, s }
}

describe("bounds", () => {
  it("a client that stops reading stops the upstream: written bytes stay bounded", async () => {
    const { up, s } = await via()
    let written = 0
    let blocked = false
    const chunk = Buffer.alloc(64 * 1024, "a")
    up.handler = (_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      const pump = () => {
        // stop at 512 MiB: far past any socket buffer, so reaching it means nothing pushed back
        while (written < 512 * 1024 * 1024) {
          written += chunk.length
          if (!res.write(chunk)) {
            blocked = true
            res.once("drain", pump)
            return
          }
        }
        res.end()
      }
      pump()
    }
    const response = await new Promise<Http.IncomingMessage>((resolve, reject) => {
      const req = Http.request(`${s.gateway.url}/v1/messages`, { method: "POST", headers: { "x-api-key": "k" } })
      req.on("response", resolve)
      req.on("error", reject)
      req.end(JSON.stringify({ model: "m", max_tokens: 1, stream: true, messages: [] }))
    })
    response.pause()
    await eventually(() => blocked, 5_000)
    await new Promise((r) => setTimeout(r, 300))
    const stalled = written
    await new Promise((r) => setTimeout(r, 300))
    expect(written).toBe(stalled)
    expect(written).toBeLessThan(64 * 1024 * 1024)
    response.destroy()
  })

  it("a pass-through body is streamed upstream, whatever maxBodyBytes says", async () => {
    const { up, s } = await via({ maxBodyBytes: 1_024 })
    up.handler = (_req, body, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ received: body.length }))
    }
    const big = Buffer.alloc(2 * 1024 * 1024, "z")
    const r = await fetch(`${s.gateway.url}/v1/files`, { method: "POST", headers: { authorization: "Bearer k" }, body: big })
    expect(await r.json()).toEqual({ received: big.length })
    expect(up.seen[0]!.url).toBe("/v1/files")
  })

  it("a shadow prompt that fails leaves the client's call as it was", async () => {
    const { up, s } = await via({ mode: () => "shadow" })
    s.port.answer = () => Promise.reject(new Error("down"))
    up.handler = (_req, _body, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ type: "message", id: "msg_s", usage: { input_tokens: 3 } }))
    }
    const r = await fetch(`${s.gateway.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": "k" },
      body: JSON.stringify({ model: "m", max_tokens: 1, messages: [] }),
    })
    expect(r.status).toBe(200)
    expect(JSON.parse(up.seen[0]!.body.toString())).toEqual({ model: "m", max_tokens: 1, messages: [] })
    await eventually(() => s.port.prompts.length === 1)
    await new Promise((x) => setTimeout(x, 20))
    expect(s.port.usages).toHaveLength(0)
  })
})
