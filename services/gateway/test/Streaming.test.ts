/**
 * Streams relayed as they arrive (the first event reaches the client while
 * the upstream still holds the stream open), the usage of each API's event
 * stream read on the way, compressed responses relayed byte for byte with
 * the usage read from a decoded copy.
 */
import * as Http from "node:http"
import * as Zlib from "node:zlib"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { eventually, stubPort, type StubPort } from "./Helpers.ts"
import { type Scripted, scripted, sse } from "./Upstream.ts"
import { type GatewayServer, startServer } from "../src/Server.ts"

let up: Scripted
let port: StubPort
let gateway: GatewayServer

beforeAll(async () => {
  up = await scripted()
  port = stubPort()
  gateway = await startServer({ turns: port, upstreams: { anthropic: up.url, openai: up.url, google: up.url } })
})
afterAll(async () => {
  await gateway.close()
  await up.close()
})
beforeEach(() => {
  port.usages.length = 0
  port.prompts.length = 0
  up.seen.length = 0
})

/** A raw POST through the gateway; resolves with the response as it starts (the body still flowing). */
const post = (path: string, body: unknown, headers: Record<string, string> = {}): Promise<Http.IncomingMessage> =>
  new Promise((resolve, reject) => {
    const req = Http.request(`${gateway.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "k-test-0000", "anthropic-version": "2023-06-01", ...headers },
    })
    req.on("response", resolve)
    req.on("error", reject)
    req.end(JSON.stringify(body))
  })

const collect = (res: Http.IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const parts: Array<Buffer> = []
    res.on("data", (c: Buffer) => parts.push(c))
    res.on("end", () => resolve(Buffer.concat(parts)))
    res.on("error", reject)
  })

const anthropicBody = { model: "claude-sonnet-5", max_tokens: 16, stream: true, messages: [{ role: "user", content: "hi" }] }

describe("relay", () => {
  it("the first event reaches the client before the upstream finishes", async () => {
    let finish: () => void = () => {}
    up.handler = (_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write(sse("message_start", { type: "message_start", message: { id: "msg_1", usage: { input_tokens: 7, output_tokens: 1 } } }))
      finish = () => {
        res.write(sse("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 5 } }))
        res.end(sse("message_stop", { type: "message_stop" }))
      }
    }
    const res = await post("/v1/messages", anthropicBody)
    const first = await new Promise<string>((resolve) => res.once("data", (c: Buffer) => resolve(c.toString())))
    expect(first).toContain("message_start")
    expect(port.usages).toHaveLength(0)
    finish()
    const rest = (await collect(res)).toString()
    expect(rest).toContain("message_stop")
    await eventually(() => port.usages.length === 1)
    expect(port.usages[0]).toMatchObject({ responseId: "msg_1", usage: { input_tokens: 7, output_tokens: 5 } })
  })

  it("Responses: response.completed carries the usage", async () => {
    up.handler = (_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" })
      res.write(sse("response.created", { type: "response.created", response: { id: "resp_1", usage: null } }))
      res.write(sse("response.output_text.delta", { type: "response.output_text.delta", delta: "hi" }))
      // one event split across writes, CRLF line ends
      const done = sse("response.completed", {
        type: "response.completed",
        response: { id: "resp_1", usage: { input_tokens: 11, output_tokens: 2 } },
      })
      res.write(done.slice(0, 20))
      res.end(done.slice(20).replace(/\n/g, "\r\n"))
    }
    const res = await post("/v1/responses", { model: "gpt-5-mini", input: "hi", stream: true }, { authorization: "Bearer sk-x" })
    await collect(res)
    await eventually(() => port.usages.length === 1)
    expect(port.usages[0]).toMatchObject({ api: "openai-responses", responseId: "resp_1", usage: { input_tokens: 11, output_tokens: 2 } })
  })

  it("Gemini streamGenerateContent (alt=sse): the last usageMetadata is the total", async () => {
    up.handler = (_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write(
        sse(undefined, { candidates: [{ content: { role: "model", parts: [{ text: "a" }] } }], usageMetadata: { promptTokenCount: 9 } }),
      )
      res.end(sse(undefined, { candidates: [], usageMetadata: { promptTokenCount: 9, candidatesTokenCount: 3 }, responseId: "g1" }))
    }
    const res = await post(
      "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
      { contents: [{ role: "user", parts: [{ text: "hi" }] }] },
      { "x-goog-api-key": "g-key" },
    )
    await collect(res)
    expect(up.seen[0]!.url).toBe("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
    expect(port.prompts[0]).toMatchObject({ api: "gemini", stream: true })
    await eventually(() => port.usages.length === 1)
    expect(port.usages[0]).toMatchObject({ responseId: "g1", usage: { promptTokenCount: 9, candidatesTokenCount: 3 } })
  })

  it("Gemini streamGenerateContent without alt=sse: one JSON array", async () => {
    up.handler = (_req, _body, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.write('[{"candidates":[],"usageMetadata":{"promptTokenCount":4}}')
      res.end(',{"candidates":[],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":8}}]')
    }
    const res = await post(
      "/models/gemini-2.5-flash:streamGenerateContent",
      { contents: [{ role: "user", parts: [{ text: "hi" }] }] },
      {
        "x-goog-api-key": "g-key",
      },
    )
    await collect(res)
    expect(up.seen[0]!.url).toBe("/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    await eventually(() => port.usages.length === 1)
    expect(port.usages[0]!.usage).toEqual({ promptTokenCount: 4, candidatesTokenCount: 8 })
  })
})

describe("compressed responses", () => {
  const codecs = {
    gzip: Zlib.gzipSync,
    br: Zlib.brotliCompressSync,
    zstd: Zlib.zstdCompressSync,
    deflate: Zlib.deflateSync,
  } as const
  for (const [encoding, compress] of Object.entries(codecs)) {
    it(`${encoding}: relayed byte for byte, usage read from a decoded copy`, async () => {
      const json = JSON.stringify({ id: `msg_${encoding}`, type: "message", usage: { input_tokens: 21, output_tokens: 3 } })
      const packed = compress(Buffer.from(json))
      up.handler = (_req, _body, res) => {
        res.writeHead(200, { "content-type": "application/json", "content-encoding": encoding, "content-length": packed.length })
        res.end(packed)
      }
      const res = await post("/v1/messages", { ...anthropicBody, stream: false }, { "accept-encoding": "gzip, br, zstd, deflate" })
      expect(res.headers["content-encoding"]).toBe(encoding)
      expect((await collect(res)).equals(packed)).toBe(true)
      expect(up.seen[0]!.headers["accept-encoding"]).toBe("gzip, br, zstd, deflate")
      await eventually(() => port.usages.length === 1)
      expect(port.usages[0]).toMatchObject({ responseId: `msg_${encoding}`, usage: { input_tokens: 21 } })
    })
  }

  it("a gzip event stream, flushed per event, still relays each event on arrival", async () => {
    let finish: () => void = () => {}
    up.handler = (_req, _body, res) => {
      const gz = Zlib.createGzip()
      res.writeHead(200, { "content-type": "text/event-stream", "content-encoding": "gzip" })
      gz.pipe(res)
      gz.write(sse("message_start", { type: "message_start", message: { id: "msg_gz", usage: { input_tokens: 5 } } }))
      gz.flush()
      finish = () => {
        gz.end(sse("message_delta", { type: "message_delta", usage: { output_tokens: 2 } }))
      }
    }
    const res = await post("/v1/messages", anthropicBody)
    const gunzip = Zlib.createGunzip()
    res.pipe(gunzip)
    const first = await new Promise<string>((resolve) => gunzip.once("data", (c: Buffer) => resolve(c.toString())))
    expect(first).toContain("msg_gz")
    finish()
    await new Promise((r) => gunzip.on("end", r).resume())
    await eventually(() => port.usages.length === 1)
    expect(port.usages[0]!.usage).toEqual({ input_tokens: 5, output_tokens: 2 })
  })

  it("an unknown encoding loses only the usage", async () => {
    up.handler = (_req, _body, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "x-custom" })
      res.end("opaque")
    }
    const res = await post("/v1/messages", { ...anthropicBody, stream: false })
    expect((await collect(res)).toString()).toBe("opaque")
    await new Promise((r) => setTimeout(r, 20))
    expect(port.usages).toHaveLength(0)
  })
})
