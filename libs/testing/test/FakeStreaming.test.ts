/**
 * The fake provider's streams and model lists, through the official SDKs
 * (what a gateway relays and what agent CLIs call): Responses `stream: true`,
 * Gemini `streamGenerateContent` (SSE and JSON array), the three model
 * lists, and `whenTool` scripting.
 */
import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import * as FakeProvider from "../src/FakeProvider.ts"

let server: FakeProvider.FakeProviderServer
let anthropic: Anthropic
let openai: OpenAI
let google: GoogleGenAI

beforeAll(async () => {
  server = await FakeProvider.start()
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
  openai = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test", maxRetries: 0 })
  google = new GoogleGenAI({ apiKey: "test", httpOptions: { baseUrl: server.url, retryOptions: { attempts: 1 } } })
})
afterAll(() => server.close())
beforeEach(() => server.reset())

describe("FakeProvider / Responses stream", () => {
  it("streams the same response as the JSON call, events in order, usage in response.completed", async () => {
    const body = { model: "gpt-5.6", input: "Say something long enough to be cut into several deltas, please." }
    const json = await openai.responses.create(body)
    server.reset()
    const stream = await openai.responses.create({ ...body, stream: true })
    const types: Array<string> = []
    const sequence: Array<number> = []
    let text = ""
    let completed: OpenAI.Responses.Response | undefined
    for await (const event of stream) {
      types.push(event.type)
      sequence.push(event.sequence_number)
      if (event.type === "response.output_text.delta") text += event.delta
      if (event.type === "response.completed") completed = event.response
    }
    expect(types.slice(0, 4)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ])
    expect(types.filter((t) => t === "response.output_text.delta").length).toBeGreaterThan(1)
    expect(types.at(-1)).toBe("response.completed")
    expect(sequence).toEqual(sequence.map((_, i) => i))
    expect(text).toBe(json.output_text)
    expect(completed?.usage).toEqual(json.usage)
    expect(server.requests()[0]?.endpoint).toBe("responses")
  })

  it("streams a scripted function call with its arguments, and the SDK's stream helper assembles it", async () => {
    server.control({ replies: [{ toolCalls: [{ id: "call_1", name: "exec_command", input: { cmd: "cat a.txt" } }] }] })
    const tools = [{ type: "function" as const, name: "exec_command", parameters: { type: "object" }, strict: false }]
    const stream = openai.responses.stream({ model: "gpt-5.6", input: "read a.txt", tools })
    const args: Array<string> = []
    stream.on("response.function_call_arguments.delta", (e) => args.push(e.delta))
    const final = await stream.finalResponse()
    const call = final.output.find((o) => o.type === "function_call")
    expect(call).toMatchObject({ call_id: "call_1", name: "exec_command", arguments: JSON.stringify({ cmd: "cat a.txt" }) })
    expect(args.join("")).toBe(JSON.stringify({ cmd: "cat a.txt" }))
  })

  it("rejects a bad streamed body with the same 400 JSON (no stream opened)", async () => {
    const error = await openai.responses.create({ model: "gpt-5.6", input: "x", stream: true, bogus: 1 } as never).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).code).toBe("unknown_parameter")
  })
})

describe("FakeProvider / Gemini stream", () => {
  it("streamGenerateContent with alt=sse: several chunks, the text of the unary call, usage on the last", async () => {
    const request = { model: "gemini-2.5-flash", contents: "Tell me something that takes a few chunks to say in full." }
    server.control({ replies: [{ text: "A reply long enough to be cut into more than one streamed chunk." }] })
    const unary = await google.models.generateContent(request)
    server.control({ replies: [{ text: "A reply long enough to be cut into more than one streamed chunk." }] })
    const chunks = []
    for await (const chunk of await google.models.generateContentStream(request)) chunks.push(chunk)
    expect(chunks.length).toBeGreaterThan(1)
    expect(chunks.map((c) => c.text ?? "").join("")).toBe(unary.text)
    expect(chunks.at(-1)?.candidates?.[0]?.finishReason).toBe("STOP")
    expect(chunks.at(-1)?.usageMetadata).toEqual(unary.usageMetadata)
    expect(chunks[0]?.usageMetadata?.promptTokenCount).toBe(unary.usageMetadata?.promptTokenCount)
    const logged = server.requests().at(-1)
    expect(logged).toMatchObject({ endpoint: "gemini_stream", path: "/v1/models/gemini-2.5-flash:streamGenerateContent" })
  })

  it("without alt=sse the chunks come as one JSON array; a bad body is Google's 400", async () => {
    const url = `${server.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent`
    const headers = { "content-type": "application/json", "x-goog-api-key": "test" }
    const ok = await fetch(url, {
      method: "POST",
      headers,
      body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "hi" }] }] }),
    })
    expect(ok.headers.get("content-type")).toContain("application/json")
    const array = (await ok.json()) as Array<{ readonly usageMetadata: { readonly promptTokenCount: number } }>
    expect(Array.isArray(array) && array.length).toBeGreaterThan(0)
    const bad = await fetch(`${url}?alt=sse`, {
      method: "POST",
      headers,
      body: JSON.stringify({ contents: [{ role: "robot", parts: [] }] }),
    })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { status: string } }).error.status).toBe("INVALID_ARGUMENT")
  })
})

describe("FakeProvider / model lists", () => {
  it("lists and retrieves models in each API's shape; an unknown id is a 404", async () => {
    const claude = await anthropic.models.list()
    expect(claude.data.map((m) => m.id)).toContain("claude-opus-4-8")
    expect((await anthropic.models.retrieve("claude-opus-4-8")).type).toBe("model")
    const gpt = await openai.models.list()
    expect(gpt.data.map((m) => m.id)).toContain("gpt-5.6")
    expect((await openai.models.retrieve("gpt-5.6")).object).toBe("model")
    const gemini = await google.models.list()
    const names: Array<string> = []
    for await (const m of gemini) names.push(m.name ?? "")
    expect(names).toContain("models/gemini-2.5-flash")
    expect((await google.models.get({ model: "gemini-2.5-flash" })).inputTokenLimit).toBeGreaterThan(0)
    expect(await openai.models.retrieve("no-such-model").catch((e: unknown) => e)).toBeInstanceOf(OpenAI.NotFoundError)
    expect(await anthropic.models.retrieve("no-such-model").catch((e: unknown) => e)).toBeInstanceOf(Anthropic.NotFoundError)
  })
})

describe("FakeProvider / whenTool", () => {
  it("a reply for a tool waits for a request offering it; others get the default", async () => {
    server.control({ replies: [{ whenTool: "Read", toolCalls: [{ name: "Read", input: { file_path: "a.txt" } }] }] })
    const side = await anthropic.messages.create({
      model: "claude-sonnet-4-6",
      max_tokens: 64,
      messages: [{ role: "user", content: "a title" }],
    })
    expect(side.content[0]?.type).toBe("text")
    const tools = [{ name: "Read", description: "read a file", input_schema: { type: "object" as const } }]
    const main = await anthropic.messages.create({
      model: "claude-sonnet-4-6",
      max_tokens: 64,
      tools,
      messages: [{ role: "user", content: "go" }],
    })
    expect(main.content.find((b) => b.type === "tool_use")).toMatchObject({ name: "Read", input: { file_path: "a.txt" } })
    expect(server.control({}).pendingReplies).toBe(0)
  })

  it("a scripted 429 with retryAfterMs carries retry-after and retry-after-ms", async () => {
    server.control({ replies: [{ whenTool: "Read", error: { status: 429, retryAfterMs: 1_500 } }] })
    const tools = [{ name: "Read", description: "read a file", input_schema: { type: "object" } }]
    const res = await fetch(`${server.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "test", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: "claude-sonnet-4-6", max_tokens: 64, tools, messages: [{ role: "user", content: "go" }] }),
    })
    expect(res.status).toBe(429)
    expect([res.headers.get("retry-after"), res.headers.get("retry-after-ms")]).toEqual(["2", "1500"])
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe("rate_limit_error")
  })
})
