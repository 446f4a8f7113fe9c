/**
 * Bad input, keys and the platform paths: a malformed body gets a 400 in
 * the shape of the API it was sent to, an oversized one a 413, nothing
 * asked or sent; API keys (headers and Gemini's `?key=`) never reach a log
 * line; a gateway key is swapped for the tenant's provider key by
 * `authenticate`; hop-by-hop and `x-ctxd-*` headers stay at the gateway;
 * `/healthz`, `/readyz`, `/metrics`; a client that leaves mid-stream ends
 * the upstream call.
 */
import * as Zlib from "node:zlib"
import { afterEach, describe, expect, it } from "vitest"
import { type Stack, stack } from "./Helpers.ts"
import { type Scripted, scripted, sse } from "./Upstream.ts"
import type { Logger } from "../src/Options.ts"

let s: Stack | undefined
let up: Scripted | undefined
afterEach(async () => {
  await s?.close()
  await up?.close()
  s = undefined
  up = undefined
})

const raw = (st: Stack, path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${st.gateway.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body })

describe("bad input", () => {
  it("a body that is not JSON: a 400 in each API's own shape, nothing asked or sent", async () => {
    s = await stack()
    const a = await raw(s, "/v1/messages", "{nope", { "x-api-key": "k", "anthropic-version": "2023-06-01" })
    expect(a.status).toBe(400)
    expect(await a.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error" } })
    const o = await raw(s, "/v1/chat/completions", "[1,2]", { authorization: "Bearer k" })
    expect(o.status).toBe(400)
    expect(await o.json()).toMatchObject({ error: { type: "invalid_request_error" } })
    const g = await raw(s, "/v1beta/models/gemini-2.5-flash:generateContent", "", { "x-goog-api-key": "k" })
    expect(g.status).toBe(400)
    expect(await g.json()).toMatchObject({ error: { code: 400, status: "INVALID_ARGUMENT" } })
    expect(s.port.prompts).toHaveLength(0)
    expect(s.fake.requests()).toHaveLength(0)
  })

  it("a body over maxBodyBytes: 413 in the API's shape", async () => {
    s = await stack({ maxBodyBytes: 1_000 })
    const r = await raw(s, "/v1/messages", JSON.stringify({ pad: "x".repeat(5_000) }), { "x-api-key": "k" })
    expect(r.status).toBe(413)
    expect(await r.json()).toMatchObject({ type: "error", error: { type: "request_too_large" } })
    expect(s.fake.requests()).toHaveLength(0)
  })
})

describe("compressed request bodies (Codex CLI sends zstd)", () => {
  const body = { model: "gpt-5-mini", input: "hi", instructions: "client", store: false }
  const send = (st: Stack, bytes: Buffer, encoding: string) =>
    fetch(`${st.gateway.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json", "content-encoding": encoding, authorization: "Bearer sk-x" },
      body: bytes,
    })

  it("zstd, gzip and br bodies are read; ctxd's body goes uncompressed", async () => {
    s = await stack()
    for (const [encoding, pack] of [
      ["zstd", Zlib.zstdCompressSync],
      ["gzip", Zlib.gzipSync],
      ["br", Zlib.brotliCompressSync],
    ] as const) {
      s.fake.control({ replies: [{ text: encoding }] })
      const r = await send(s, pack(Buffer.from(JSON.stringify(body))), encoding)
      expect(r.status).toBe(200)
      const seen = s.fake.requests().at(-1)!
      expect(seen.body).toMatchObject({ instructions: "[ctxd] system", store: false })
      expect(seen.headers).not.toHaveProperty("content-encoding")
    }
    expect(s.port.prompts.map((p) => p.body["instructions"])).toEqual(["client", "client", "client"])
  })

  it("shadow: the client's compressed bytes go as they came", async () => {
    const up = await scripted()
    s = await stack({ mode: () => "shadow", upstreams: { anthropic: up.url, openai: up.url, google: up.url } })
    up.handler = (_req, _body, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end("{}")
    }
    const packed = Zlib.zstdCompressSync(Buffer.from(JSON.stringify(body)))
    await send(s, packed, "zstd")
    expect(up.seen[0]!.headers["content-encoding"]).toBe("zstd")
    expect(up.seen[0]!.body.equals(packed)).toBe(true)
    await up.close()
  })

  it("a body that is not what its coding says is a 400; a bomb past maxBodyBytes a 413", async () => {
    s = await stack({ maxBodyBytes: 10_000 })
    expect((await send(s, Buffer.from("not zstd"), "zstd")).status).toBe(400)
    const bomb = Zlib.gzipSync(Buffer.from(JSON.stringify({ ...body, pad: "x".repeat(1_000_000) })))
    expect(bomb.length).toBeLessThan(10_000)
    const r = await send(s, bomb, "gzip")
    expect(r.status).toBe(413)
    expect(await r.json()).toMatchObject({ error: { message: expect.stringContaining("once decoded") } })
    expect(s.fake.requests()).toHaveLength(0)
  })
})

describe("keys", () => {
  it("never logged: not the header keys, not Gemini's ?key=", async () => {
    const lines: Array<string> = []
    const capture = (fields: Record<string, unknown>, message: string) => lines.push(JSON.stringify({ fields, message }))
    const logger: Logger = { info: capture, warn: capture, error: capture }
    s = await stack({ logger })
    s.port.answer = () => Promise.reject(new Error("down"))
    s.fake.control({ replies: [{ text: "a" }, { text: "b", provider: "google" }] })
    const secret = "sk-ant-SECRET-KEY-123456"
    await raw(
      s,
      "/v1/messages",
      JSON.stringify({ model: "claude-sonnet-5", max_tokens: 8, messages: [{ role: "user", content: "PROMPT-TEXT" }] }),
      {
        "x-api-key": secret,
        "anthropic-version": "2023-06-01",
      },
    )
    const gkey = "AIzaSECRET-GEMINI-KEY"
    await raw(
      s,
      `/v1beta/models/gemini-2.5-flash:generateContent?key=${gkey}`,
      JSON.stringify({ contents: [{ role: "user", parts: [{ text: "PROMPT-TEXT" }] }] }),
    )
    expect(s.fake.requests().map((r) => r.status)).toEqual([200, 200])
    expect(lines.length).toBeGreaterThanOrEqual(4)
    const all = lines.join("\n")
    expect(all).not.toContain(secret)
    expect(all).not.toContain(gkey)
    expect(all).not.toContain("PROMPT-TEXT")
  })

  it("authenticate swaps a gateway key for the tenant's provider key and names the tenant", async () => {
    s = await stack({
      authenticate: (request) =>
        request.headers["x-api-key"] === "ctxd-gw-key-1"
          ? { ok: true, tenant: "acme", upstreamHeaders: { "x-api-key": "tenant-provider-key-9999" } }
          : { ok: false, status: 401, message: "unknown gateway key" },
    })
    s.fake.control({ replies: [{ text: "ok" }] })
    const body = JSON.stringify({ model: "claude-sonnet-5", max_tokens: 8, messages: [{ role: "user", content: "hi" }] })
    const ok = await raw(s, "/v1/messages", body, { "x-api-key": "ctxd-gw-key-1", "anthropic-version": "2023-06-01" })
    expect(ok.status).toBe(200)
    expect(s.fake.requests().at(-1)!.keyHint).toBe("9999")
    expect(s.port.prompts[0]!.key.tenant).toBe("acme")
    const denied = await raw(s, "/v1/messages", body, { "x-api-key": "other", "anthropic-version": "2023-06-01" })
    expect(denied.status).toBe(401)
    expect(await denied.json()).toMatchObject({ type: "error", error: { type: "authentication_error", message: "unknown gateway key" } })
    expect(s.fake.requests()).toHaveLength(1)
  })
})

describe("headers", () => {
  it("hop-by-hop and x-ctxd-* stay here; provider headers go", async () => {
    up = await scripted()
    s = await stack({ upstreams: { anthropic: up.url, openai: up.url, google: up.url } })
    up.handler = (_req, _body, res) => {
      res.writeHead(200, { "content-type": "application/json", "x-upstream": "1", "keep-alive": "timeout=5" })
      res.end('{"type":"message","usage":{"input_tokens":1}}')
    }
    const r = await raw(s, "/v1/messages", JSON.stringify({ model: "m", max_tokens: 1, messages: [] }), {
      "x-api-key": "k",
      "anthropic-version": "2023-06-01",
      "anthropic-beta": "b1",
      "x-ctxd-session": "s",
      "x-custom": "c",
      traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      "proxy-authorization": "Basic xyz",
    })
    expect(r.headers.get("x-upstream")).toBe("1")
    expect(r.headers.get("keep-alive")).not.toBe("timeout=5")
    const seen = up.seen[0]!.headers
    expect(seen).toMatchObject({ "x-api-key": "k", "anthropic-version": "2023-06-01", "anthropic-beta": "b1", "x-custom": "c" })
    expect(seen["traceparent"]).toBeDefined()
    expect(seen).not.toHaveProperty("x-ctxd-session")
    expect(seen).not.toHaveProperty("proxy-authorization")
    expect(seen["host"]).toBe(new URL(up.url).host)
  })
})

describe("query strings and unknown tools", () => {
  it("Claude Code's /v1/messages?beta=true is a turn route, the query goes upstream; unknown tool types and fields go too", async () => {
    up = await scripted()
    s = await stack({ upstreams: { anthropic: up.url, openai: up.url, google: up.url } })
    // a port that keeps the client's tools (ctxd passes tool types it does not model through as they came)
    s.port.answer = (request) =>
      Promise.resolve({
        body: { messages: request.body["messages"], tools: request.body["tools"], system: "ctxd" },
        headers: {},
        turnId: "t-q",
        report: {} as never,
      })
    up.handler = (_req, _body, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end('{"type":"message","usage":{"input_tokens":1}}')
    }
    const tools = [
      { type: "web_search_20260209", name: "web_search", max_uses: 3 },
      { type: "some_future_tool_20270101", name: "future", options: { deep: true } },
    ]
    await raw(s, "/v1/messages?beta=true", JSON.stringify({ model: "m", max_tokens: 1, messages: [], tools, future_field: { x: 1 } }), {
      "x-api-key": "k",
    })
    expect(up.seen[0]!.url).toBe("/v1/messages?beta=true")
    expect(JSON.parse(up.seen[0]!.body.toString())).toMatchObject({ system: "ctxd", tools, future_field: { x: 1 } })
    expect(s.port.prompts).toHaveLength(1)
  })

  it("HEAD / (Claude Code's probe) passes through", async () => {
    up = await scripted()
    s = await stack({ upstreams: { anthropic: up.url, openai: up.url, google: up.url } })
    up.handler = (_req, _body, res) => {
      res.writeHead(404, { "content-type": "application/json" })
      res.end()
    }
    const r = await fetch(`${s.gateway.url}/`, { method: "HEAD", headers: { "x-api-key": "k", "anthropic-version": "2023-06-01" } })
    expect(r.status).toBe(404)
    expect(up.seen[0]).toMatchObject({ method: "HEAD", url: "/" })
  })
})

describe("platform paths", () => {
  it("/healthz, /readyz (the port's readiness), /metrics", async () => {
    s = await stack()
    expect((await fetch(`${s.gateway.url}/healthz`)).status).toBe(200)
    expect((await fetch(`${s.gateway.url}/readyz`)).status).toBe(200)
    s.port.readyNow = false
    expect((await fetch(`${s.gateway.url}/readyz`)).status).toBe(503)
    s.fake.control({ replies: [{ text: "ok" }] })
    await raw(s, "/v1/messages", JSON.stringify({ model: "claude-sonnet-5", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }), {
      "x-api-key": "k",
      "anthropic-version": "2023-06-01",
    })
    const m = await fetch(`${s.gateway.url}/metrics`)
    expect(m.headers.get("content-type")).toContain("text/plain")
    const text = await m.text()
    expect(text).toContain("# TYPE ctxd_gateway_requests_total counter")
    expect(text).toMatch(/ctxd_gateway_requests_total\{api="anthropic-messages",mode="active",outcome="ok"\} [1-9]/)
    expect(text).toMatch(/ctxd_gateway_added_latency_seconds_bucket\{api="anthropic-messages",mode="active",le="\+Inf"\} [1-9]/)
    expect(text).toContain("ctxd_gateway_upstream_latency_seconds_count")
    expect(text).toContain("ctxd_gateway_first_byte_seconds_count")
  })
})

describe("upstream cut", () => {
  it("a provider that breaks off a stream cuts the client's too, counted as upstream_cut", async () => {
    up = await scripted()
    s = await stack({ upstreams: { anthropic: up.url, openai: up.url, google: up.url } })
    up.handler = (_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write(sse("message_start", { type: "message_start", message: { id: "m", usage: { input_tokens: 1 } } }))
      setTimeout(() => res.socket?.destroy(), 20)
    }
    const r = await fetch(`${s.gateway.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": "k" },
      body: JSON.stringify({ model: "m", max_tokens: 1, stream: true, messages: [] }),
    })
    await expect(r.text()).rejects.toThrow()
    const until = Date.now() + 2_000
    let text = ""
    while (Date.now() < until && !/outcome="upstream_cut"/.test(text)) {
      text = await (await fetch(`${s.gateway.url}/metrics`)).text()
      await new Promise((x) => setTimeout(x, 10))
    }
    expect(text).toMatch(/ctxd_gateway_requests_total\{api="anthropic-messages",mode="active",outcome="upstream_cut"\} [1-9]/)
  })
})

describe("client gone", () => {
  it("a client that leaves mid-stream ends the upstream call", async () => {
    up = await scripted()
    s = await stack({ upstreams: { anthropic: up.url, openai: up.url, google: up.url } })
    let upstreamClosed = false
    up.handler = (_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write(sse("message_start", { type: "message_start", message: { id: "m", usage: { input_tokens: 1 } } }))
      res.on("close", () => (upstreamClosed = true))
    }
    const controller = new AbortController()
    const r = await fetch(`${s.gateway.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": "k" },
      body: JSON.stringify({ model: "m", max_tokens: 1, stream: true, messages: [] }),
      signal: controller.signal,
    })
    const reader = r.body!.getReader()
    await reader.read()
    controller.abort()
    const until = Date.now() + 2_000
    while (!upstreamClosed && Date.now() < until) await new Promise((x) => setTimeout(x, 10))
    expect(upstreamClosed).toBe(true)
  })
})
