/**
 * The official SDKs pointed at the gateway, the strict fake provider behind
 * it, a stub port answering with ctxd's body: every call is accepted
 * upstream, ctxd's body is what the provider saw (with the client's other
 * fields), the client gets the provider's answer, and the usage is reported
 * under the reply's turn id — streamed and not.
 */
import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { eventually, MARK, type Stack, stack } from "./Helpers.ts"

let s: Stack
let anthropic: Anthropic
let openai: OpenAI
let gemini: GoogleGenAI
let answer: Stack["port"]["answer"]

beforeAll(async () => {
  s = await stack()
  answer = s.port.answer
  anthropic = new Anthropic({ baseURL: s.gateway.url, apiKey: "sk-ant-test-key-0001", maxRetries: 0 })
  openai = new OpenAI({ baseURL: `${s.gateway.url}/v1`, apiKey: "sk-openai-test-0002", maxRetries: 0 })
  gemini = new GoogleGenAI({ apiKey: "gemini-test-key-0003", httpOptions: { baseUrl: s.gateway.url, retryOptions: { attempts: 1 } } })
})
afterAll(() => s.close())
beforeEach(() => {
  s.port.answer = answer
  s.fake.reset()
  s.port.prompts.length = 0
  s.port.usages.length = 0
})

const last = () => s.fake.requests().at(-1)!

describe("Anthropic Messages", () => {
  it("non-streamed: ctxd's system goes, the client's other fields too, usage reported", async () => {
    s.fake.control({ replies: [{ text: "hello" }] })
    const r = await anthropic.messages.create({
      model: "claude-sonnet-5",
      max_tokens: 64,
      inference_geo: "us",
      metadata: { user_id: "u1" },
      system: "client system",
      messages: [{ role: "user", content: "hi" }],
    })
    expect(r.content[0]).toMatchObject({ type: "text", text: "hello" })
    const sent = last().body as Record<string, unknown>
    expect(sent["system"]).toBe(MARK)
    expect(sent["inference_geo"]).toBe("us")
    expect(sent["metadata"]).toEqual({ user_id: "u1" })
    expect(last().status).toBe(200)
    expect(s.port.prompts[0]).toMatchObject({ api: "anthropic-messages", model: "claude-sonnet-5", mode: "active", stream: false })
    await eventually(() => s.port.usages.length === 1)
    expect(s.port.usages[0]).toMatchObject({ api: "anthropic-messages", turnId: expect.stringMatching(/^turn-/), responseId: r.id })
    expect(s.port.usages[0]!.usage["input_tokens"]).toBe(r.usage.input_tokens)
    expect(s.port.usages[0]!.usage["output_tokens"]).toBe(r.usage.output_tokens)
  })

  it("streamed: events relayed, usage of message_start and message_delta merged", async () => {
    s.fake.control({ replies: [{ text: "streamed hello" }] })
    const stream = anthropic.messages.stream({ model: "claude-sonnet-5", max_tokens: 64, messages: [{ role: "user", content: "hi" }] })
    const final = await stream.finalMessage()
    expect(final.content[0]).toMatchObject({ type: "text", text: "streamed hello" })
    expect(s.port.prompts[0]!.stream).toBe(true)
    expect((last().body as Record<string, unknown>)["stream"]).toBe(true)
    await eventually(() => s.port.usages.length === 1)
    expect(s.port.usages[0]!.usage).toMatchObject({ input_tokens: final.usage.input_tokens, output_tokens: final.usage.output_tokens })
    expect(s.port.usages[0]!.responseId).toBe(final.id)
  })

  it("a tool type ctxd does not model and an unknown field go through", async () => {
    s.port.answer = (request) =>
      Promise.resolve({ body: { ...request.body, system: MARK }, headers: {}, turnId: "turn-tools", report: {} as never })
    s.fake.control({ replies: [{ text: "ok" }] })
    await anthropic.messages.create({
      model: "claude-sonnet-5",
      max_tokens: 64,
      tools: [{ name: "get_weather", description: "weather", input_schema: { type: "object", properties: {} } }],
      messages: [{ role: "user", content: "hi" }],
      service_tier: "auto",
    })
    expect((last().body as Record<string, unknown>)["service_tier"]).toBe("auto")
  })
})

describe("OpenAI Chat Completions", () => {
  it("non-streamed, with and without the /v1 prefix", async () => {
    for (const baseURL of [`${s.gateway.url}/v1`, s.gateway.url]) {
      const client = new OpenAI({ baseURL, apiKey: "sk-openai-test-0002", maxRetries: 0 })
      s.fake.control({ replies: [{ text: "chat hello" }] })
      const r = await client.chat.completions.create({
        model: "gpt-5-mini",
        messages: [
          { role: "system", content: "client system" },
          { role: "user", content: "hi" },
        ],
        user: "someone",
      })
      expect(r.choices[0]!.message.content).toBe("chat hello")
      expect(last().path).toBe("/v1/chat/completions")
      const sent = last().body as { messages: Array<{ content: string }>; user: string }
      expect(sent.messages[0]!.content).toBe(MARK)
      expect(sent.user).toBe("someone")
    }
    await eventually(() => s.port.usages.length === 2)
    expect(s.port.usages[0]!.usage).toHaveProperty("prompt_tokens")
  })

  it("streamed with include_usage: the usage chunk is read", async () => {
    s.fake.control({ replies: [{ text: "chat streamed" }] })
    const stream = await openai.chat.completions.create({
      model: "gpt-5-mini",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
    })
    let text = ""
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ""
      if (chunk.usage) usage = chunk.usage
    }
    expect(text).toBe("chat streamed")
    expect((last().body as Record<string, unknown>)["stream_options"]).toEqual({ include_usage: true })
    await eventually(() => s.port.usages.length === 1)
    expect(s.port.usages[0]!.usage["prompt_tokens"]).toBe(usage!.prompt_tokens)
  })
})

describe("OpenAI Responses", () => {
  it("non-streamed: ctxd's instructions go, usage read", async () => {
    s.fake.control({ replies: [{ text: "resp hello" }] })
    const r = await openai.responses.create({ model: "gpt-5-mini", input: "hi", instructions: "client", store: false })
    expect(r.output_text).toBe("resp hello")
    expect(last().body).toMatchObject({ instructions: MARK, input: "hi", store: false })
    await eventually(() => s.port.usages.length === 1)
    expect(s.port.usages[0]).toMatchObject({ api: "openai-responses", responseId: r.id })
    expect(s.port.usages[0]!.usage["input_tokens"]).toBe(r.usage!.input_tokens)
  })
})

describe("Gemini generateContent", () => {
  it("non-streamed: ctxd's genai-shaped body goes as REST, the client's generationConfig kept", async () => {
    s.fake.control({ replies: [{ text: "gemini hello", provider: "google" }] })
    const r = await gemini.models.generateContent({
      model: "gemini-2.5-flash",
      contents: [{ role: "user", parts: [{ text: "hi" }] }],
      config: { systemInstruction: "client", temperature: 0.3 },
    })
    expect(r.text).toBe("gemini hello")
    // the version the SDK chose (v1beta by default) goes upstream as it came
    expect(last().path).toMatch(/^\/v1(beta)?\/models\/gemini-2\.5-flash:generateContent$/)
    const sent = last().body as Record<string, unknown>
    expect(sent["systemInstruction"]).toEqual({ parts: [{ text: MARK }] })
    expect(sent["generationConfig"]).toEqual({ temperature: 0.3, maxOutputTokens: 256 })
    expect(sent).not.toHaveProperty("model")
    expect(s.port.prompts[0]).toMatchObject({ api: "gemini", model: "gemini-2.5-flash", stream: false })
    await eventually(() => s.port.usages.length === 1)
    expect(s.port.usages[0]!.usage["promptTokenCount"]).toBe(r.usageMetadata!.promptTokenCount)
  })
})

describe("pass-through", () => {
  it("count_tokens and input_tokens go as sent, without asking the port", async () => {
    const counted = await anthropic.messages.countTokens({ model: "claude-sonnet-5", messages: [{ role: "user", content: "hi" }] })
    expect(counted.input_tokens).toBeGreaterThan(0)
    expect(last().path).toBe("/v1/messages/count_tokens")
    const input = await openai.responses.inputTokens.count({ model: "gpt-5-mini", input: "hi" })
    expect(input.input_tokens).toBeGreaterThan(0)
    expect(s.port.prompts).toHaveLength(0)
  })

  it("a pass-through path reaches the provider: its model list, and its 404 in its own shape", async () => {
    // the fake provider lists models (agent CLIs call the lists); an unknown one is the API's 404
    expect((await anthropic.models.list()).data.length).toBeGreaterThan(0)
    await expect(anthropic.models.retrieve("no-such-model")).rejects.toMatchObject({ status: 404, error: { type: "error" } })
    expect(last()).toMatchObject({ method: "GET", path: "/v1/models/no-such-model" })
    expect(last().headers["anthropic-version"]).toBeDefined()
  })
})
