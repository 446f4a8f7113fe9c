/**
 * The pure parts: routes (with and without the version prefix, the provider
 * of an ambiguous path by its headers), the upstream URL under a base with
 * or without a version, the header policy, the active-mode body merge, and
 * the usage tap fed every split of a stream.
 */
import * as Zlib from "node:zlib"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Body from "../src/Body.ts"
import * as HeaderPolicy from "../src/HeaderPolicy.ts"
import * as Routes from "../src/Routes.ts"
import * as UsageTap from "../src/UsageTap.ts"

const q = new URLSearchParams()

describe("Routes", () => {
  it("turn routes, both ways, POST only", () => {
    for (const [path, api, upstream] of [
      ["/v1/messages", "anthropic-messages", "/v1/messages"],
      ["/messages", "anthropic-messages", "/v1/messages"],
      ["/v1/chat/completions", "openai-chat", "/v1/chat/completions"],
      ["/chat/completions", "openai-chat", "/v1/chat/completions"],
      ["/v1/responses", "openai-responses", "/v1/responses"],
      ["/responses", "openai-responses", "/v1/responses"],
      ["/v1beta/models/gemini-2.5-flash:generateContent", "gemini", "/v1beta/models/gemini-2.5-flash:generateContent"],
      ["/models/gemini-2.5-flash:streamGenerateContent", "gemini", "/v1beta/models/gemini-2.5-flash:streamGenerateContent"],
      ["/v1/models/gemini-2.5-flash:generateContent", "gemini", "/v1/models/gemini-2.5-flash:generateContent"],
    ] as const) {
      expect(Routes.route("POST", path, {}, q)).toMatchObject({ kind: "turn", api, upstreamPath: upstream })
    }
    expect(Routes.route("GET", "/v1/messages", {}, q)).toMatchObject({ kind: "pass", provider: "anthropic" })
    expect(Routes.route("POST", "/v1beta/models/g:streamGenerateContent", {}, q)).toMatchObject({ pathStream: true, pathModel: "g" })
  })

  it("count routes and other paths pass through to the provider they belong to", () => {
    expect(Routes.route("POST", "/messages/count_tokens", {}, q)).toMatchObject({
      kind: "pass",
      label: "anthropic-count-tokens",
      upstreamPath: "/v1/messages/count_tokens",
    })
    expect(Routes.route("POST", "/v1/responses/input_tokens", {}, q)).toMatchObject({ kind: "pass", label: "openai-input-tokens" })
    expect(Routes.route("POST", "/v1beta/models/g:countTokens", {}, q)).toMatchObject({ kind: "pass", label: "gemini-count-tokens" })
    expect(Routes.route("GET", "/v1/models", { "anthropic-version": "2023-06-01" }, q)).toMatchObject({ provider: "anthropic" })
    expect(Routes.route("GET", "/v1/models", { authorization: "Bearer x" }, q)).toMatchObject({ provider: "openai" })
    expect(Routes.route("GET", "/v1/models", {}, new URLSearchParams("key=k"))).toMatchObject({ provider: "google" })
    expect(Routes.route("GET", "/v1beta/models", {}, q)).toMatchObject({ provider: "google", upstreamPath: "/v1beta/models" })
    expect(Routes.route("GET", "/models", { "x-goog-api-key": "k" }, q)).toMatchObject({
      provider: "google",
      upstreamPath: "/v1beta/models",
    })
    expect(Routes.route("GET", "/files", { authorization: "Bearer x" }, q)).toMatchObject({ provider: "openai", upstreamPath: "/v1/files" })
  })

  it("the upstream URL: a base with or without its version, a path prefix, the query kept", () => {
    expect(Routes.upstreamUrl("https://api.openai.com/v1", "/v1/chat/completions", "").href).toBe(
      "https://api.openai.com/v1/chat/completions",
    )
    expect(Routes.upstreamUrl("https://api.openai.com/", "/v1/chat/completions", "").href).toBe(
      "https://api.openai.com/v1/chat/completions",
    )
    expect(Routes.upstreamUrl("http://proxy:8080/openai/v1/", "/v1/responses", "").href).toBe("http://proxy:8080/openai/v1/responses")
    expect(Routes.upstreamUrl("https://g.example/v1beta", "/v1beta/models/m:generateContent", "?alt=sse").href).toBe(
      "https://g.example/v1beta/models/m:generateContent?alt=sse",
    )
  })
})

describe("HeaderPolicy", () => {
  it("drops hop-by-hop, named-by-connection, host, content-length and x-ctxd-*; identity then ctxd applied", () => {
    const out = HeaderPolicy.upstream(
      {
        connection: "keep-alive, x-drop-me",
        "x-drop-me": "1",
        "keep-alive": "timeout=5",
        host: "gateway",
        "content-length": "10",
        "transfer-encoding": "chunked",
        "x-ctxd-session": "s",
        "x-api-key": "gw",
        "anthropic-beta": "a, b",
        "anthropic-version": "2023-06-01",
      },
      { "x-api-key": "tenant", authorization: null },
      { "anthropic-beta": "b,c", "x-extra": "e", "Content-Length": "99" },
    )
    expect(out).toEqual({ "x-api-key": "tenant", "anthropic-beta": "a,b,c", "anthropic-version": "2023-06-01", "x-extra": "e" })
  })

  it("downstream keeps the provider's headers but hop-by-hop", () => {
    expect(
      HeaderPolicy.downstream({ "content-encoding": "br", "retry-after": "3", connection: "close", "transfer-encoding": "chunked" }),
    ).toEqual({
      "content-encoding": "br",
      "retry-after": "3",
    })
  })
})

describe("Body.merge", () => {
  it("ctxd's keys replace the client's, owned keys ctxd left out go, transport stays the client's", () => {
    const client = { model: "m", messages: [1], tools: [{ type: "web_search_20250305" }], stream: true, temperature: 0.1 }
    expect(Body.merge("anthropic-messages", client, { model: "m", messages: [2], system: "s", stream: false })).toEqual({
      model: "m",
      messages: [2],
      system: "s",
      stream: true,
      temperature: 0.1,
    })
  })

  it("Gemini: genai shape to REST, no model, generationConfig merged", () => {
    const client = { contents: [1], generationConfig: { temperature: 0.5, maxOutputTokens: 10 }, safetySettings: [] }
    const ctxd = { model: "g", contents: [2], config: { systemInstruction: { parts: [{ text: "s" }] }, tools: [3], maxOutputTokens: 99 } }
    expect(Body.merge("gemini", client, ctxd)).toEqual({
      contents: [2],
      systemInstruction: { parts: [{ text: "s" }] },
      tools: [3],
      generationConfig: { temperature: 0.5, maxOutputTokens: 99 },
      safetySettings: [],
    })
  })
})

const anthropicStream = [
  "event: message_start\n",
  `data: ${JSON.stringify({ type: "message_start", message: { id: "msg_p", usage: { input_tokens: 12, cache_read_input_tokens: 4, output_tokens: 1 } } })}\n\n`,
  ": keep-alive comment\n\n",
  `event: content_block_delta\ndata: ${JSON.stringify({ type: "content_block_delta", delta: { type: "text_delta", text: "héllo ✓" } })}\n\n`,
  `event: message_delta\ndata: ${JSON.stringify({ type: "message_delta", usage: { output_tokens: 9 } })}\n\n`,
  `event: message_stop\ndata: {"type":"message_stop"}\n\n`,
].join("")

const expected = { usage: { input_tokens: 12, cache_read_input_tokens: 4, output_tokens: 9 }, responseId: "msg_p" }

const feed = async (tap: UsageTap.Tap, bytes: Buffer, cuts: ReadonlyArray<number>) => {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
  let from = 0
  for (const p of [...points, bytes.length]) {
    tap.write(bytes.subarray(from, p))
    from = p
  }
  return tap.end()
}

describe("UsageTap", () => {
  it("any split of an event stream (multi-byte characters cut too) reads the same usage", async () => {
    const bytes = Buffer.from(anthropicStream)
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat(), { maxLength: 12 }), async (cuts) => {
        expect(await feed(UsageTap.make("anthropic-messages", "text/event-stream", "", 1 << 20), bytes, cuts)).toEqual(expected)
      }),
      { numRuns: 200 },
    )
  })

  it("any split of a gzip-compressed stream reads the same usage", async () => {
    const bytes = Zlib.gzipSync(Buffer.from(anthropicStream))
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat(), { maxLength: 8 }), async (cuts) => {
        expect(await feed(UsageTap.make("anthropic-messages", "text/event-stream", "gzip", 1 << 20), bytes, cuts)).toEqual(expected)
      }),
      { numRuns: 100 },
    )
  })

  it("past its bound, or on a broken body, the tap reads nothing (and never throws)", async () => {
    const json = Buffer.from(JSON.stringify({ id: "x", usage: { input_tokens: 1 }, pad: "x".repeat(1000) }))
    expect(await feed(UsageTap.make("openai-chat", "application/json", "", 100), json, [])).toBeUndefined()
    expect(await feed(UsageTap.make("openai-chat", "application/json", "", 10_000), json, [])).toMatchObject({ usage: { input_tokens: 1 } })
    expect(await feed(UsageTap.make("openai-chat", "application/json", "gzip", 10_000), Buffer.from("not gzip"), [])).toBeUndefined()
    expect(await feed(UsageTap.make("openai-chat", "application/json", "", 10_000), Buffer.from("{broken"), [])).toBeUndefined()
  })

  it("OpenAI chat: the usage chunk, [DONE] ignored; null usage of earlier chunks ignored", async () => {
    const stream = [
      `data: ${JSON.stringify({ id: "c1", choices: [{ delta: { content: "a" } }], usage: null })}\n\n`,
      `data: ${JSON.stringify({ id: "c1", choices: [], usage: { prompt_tokens: 3, completion_tokens: 1 } })}\n\n`,
      "data: [DONE]\n\n",
    ].join("")
    expect(await feed(UsageTap.make("openai-chat", "text/event-stream", "", 1 << 20), Buffer.from(stream), [7, 50])).toEqual({
      usage: { prompt_tokens: 3, completion_tokens: 1 },
      responseId: "c1",
    })
  })
})
