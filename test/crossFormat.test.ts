// End-to-end: one session that changes request format every turn (Anthropic
// Messages → OpenAI Responses → Gemini → Chat Completions → Anthropic), through
// a real worker on the real NATS and Postgres. A tool call made in one format
// is answered in another; every reply body goes to the fake provider with the
// official SDK of its format and is accepted, and every body carries the whole
// conversation so far in its own format.
import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import { FakeProvider } from "@ctxd/testing"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
let provider: FakeProvider.FakeProviderServer
let anthropic: Anthropic
let openai: OpenAI
let gemini: GoogleGenAI
beforeAll(async () => {
  provider = await FakeProvider.start()
  h = await Harness.start()
  anthropic = new Anthropic({ baseURL: provider.url, apiKey: "test", maxRetries: 0 })
  openai = new OpenAI({ baseURL: provider.openaiBaseURL, apiKey: "test", maxRetries: 0 })
  gemini = new GoogleGenAI({ apiKey: "test", httpOptions: { baseUrl: provider.url, retryOptions: { attempts: 1 } } })
})
afterAll(async () => {
  await h?.close()
  await provider?.close()
})

const schema = { type: "object", properties: { id: { type: "string" } }, required: ["id"] }
const system = "You are a helpful airline agent."

describe("a session that changes format every turn", () => {
  it("pairs a call made in one format with its result in another, and every body is accepted by its provider's SDK", async () => {
    const subject = h.turnSubject("acme", `cross-${Date.now().toString(36)}`)
    const turn = async (body: Record<string, unknown>) => {
      const reply = await h.request(subject, { system, ...body })
      expect(reply.error).toBeUndefined()
      expect(reply.ok).toBe(true)
      return reply.request as Record<string, unknown>
    }
    const texts = (body: unknown): string => JSON.stringify(body)

    // 1. Anthropic: the request
    const first = await turn({
      turnId: "t1",
      format: "anthropic",
      model: { provider: "anthropic", name: "claude-sonnet-4-5" },
      tools: [{ name: "get_user", description: "Get a user", input_schema: schema }],
      messages: [{ role: "user", content: "Change my flight, I am user u1." }],
    })
    expect((await anthropic.messages.create(first as unknown as Anthropic.MessageCreateParamsNonStreaming)).type).toBe("message")

    // 2. Responses: the assistant's call (made under Anthropic's turn) and its output
    const second = await turn({
      turnId: "t2",
      format: "openai-responses",
      model: { provider: "openai", name: "gpt-4.1" },
      tools: [{ type: "function", name: "get_user", description: "Get a user", parameters: schema }],
      input: [
        { type: "function_call", call_id: "call_1", name: "get_user", arguments: '{"id":"u1"}' },
        { type: "function_call_output", call_id: "call_1", output: '{"name":"Ada"}' },
      ],
    })
    expect(second["input"]).toEqual([
      { type: "message", role: "user", content: "Change my flight, I am user u1." },
      { type: "function_call", call_id: "call_1", name: "get_user", arguments: '{"id":"u1"}' },
      { type: "function_call_output", call_id: "call_1", output: '{"name":"Ada"}' },
    ])
    expect((await openai.responses.create(second as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)).status).toBe("completed")

    // 3. Gemini: a call made now (with an id), answered in the next format
    const third = await turn({
      turnId: "t3",
      format: "gemini",
      model: { provider: "google", name: "gemini-2.5-flash" },
      tools: [
        {
          functionDeclarations: [
            { name: "get_user", description: "Get a user", parametersJsonSchema: schema },
            { name: "get_flight", description: "Get a flight", parametersJsonSchema: schema },
          ],
        },
      ],
      contents: [
        { role: "model", parts: [{ text: "Ada, which flight?" }] },
        { role: "user", parts: [{ text: "Flight f7." }] },
      ],
    })
    expect(texts(third)).toContain("Change my flight, I am user u1.")
    expect(texts(third)).toContain("functionResponse")
    const generated = await gemini.models.generateContent(third as unknown as Parameters<GoogleGenAI["models"]["generateContent"]>[0])
    expect(generated.candidates?.length).toBe(1)

    // 4. Chat Completions: the model's call of get_flight and its result
    const fourth = await turn({
      turnId: "t4",
      format: "openai",
      model: { provider: "openai", name: "gpt-4o" },
      tools: [
        { type: "function", function: { name: "get_user", description: "Get a user", parameters: schema } },
        { type: "function", function: { name: "get_flight", description: "Get a flight", parameters: schema } },
      ],
      messages: [
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_2", type: "function", function: { name: "get_flight", arguments: '{"id":"f7"}' } }],
        },
        { role: "tool", tool_call_id: "call_2", content: '{"flight":"f7","seats":3}' },
      ],
    })
    const messages = fourth["messages"] as Array<Record<string, unknown>>
    expect(messages.map((m) => m["role"])).toEqual(["system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool"])
    expect((await openai.chat.completions.create(fourth as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming)).object).toBe(
      "chat.completion",
    )

    // 5. Anthropic again: a signed thinking block with a new call, and the result; every earlier call paired
    const fifth = await turn({
      turnId: "t5",
      format: "anthropic",
      model: { provider: "anthropic", name: "claude-sonnet-4-5" },
      tools: [
        { name: "get_user", description: "Get a user", input_schema: schema },
        { name: "get_flight", description: "Get a flight", input_schema: schema },
      ],
      messages: [
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "Check seats again.", signature: "EqQBCgIYAhIM" },
            { type: "tool_use", id: "toolu_3", name: "get_flight", input: { id: "f7" } },
          ],
        },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_3", content: "3 seats" }] },
      ],
    })
    const ids = texts(fifth)
    for (const id of ["call_1", "call_2", "toolu_3"]) expect(ids).toContain(id)
    const answer = await anthropic.messages.create({
      ...(fifth as unknown as Anthropic.MessageCreateParamsNonStreaming),
      thinking: { type: "enabled", budget_tokens: 1024 },
    })
    expect(answer.type).toBe("message")
  })
})
