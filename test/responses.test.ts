// End-to-end: `format: "openai-responses"` turns through a real worker on the
// real NATS and Postgres; the bodies it returns go to the fake provider with
// the official openai SDK's `responses.create`.
import { FakeProvider } from "@ctxd/testing"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
let provider: FakeProvider.FakeProviderServer
let client: OpenAI
beforeAll(async () => {
  h = await Harness.start()
  provider = await FakeProvider.start()
  client = new OpenAI({ baseURL: provider.openaiBaseURL, apiKey: "test", maxRetries: 0 })
})
afterAll(async () => {
  await h?.close()
  await provider?.close()
})

const responsesTurn = (turnId: string, input: unknown[], model = "gpt-4.1") => ({
  turnId,
  format: "openai-responses",
  model: { provider: "openai", name: model },
  system: "You are a helpful airline agent.",
  instructions: "Answer briefly.",
  tools: [
    {
      type: "function",
      name: "get_user",
      description: "Get a user",
      parameters: { type: "object", properties: { id: { type: "string" } } },
      strict: false,
    },
    { type: "web_search" },
  ],
  input,
})

describe("openai-responses turns over NATS", () => {
  it("answers with a Responses body the SDK accepts; reasoning stays with its call; pairing is enforced", async () => {
    const subject = h.turnSubject("acme", "resp-1")
    const first = await h.request(subject, responsesTurn("r1", [{ role: "user", content: "I want to book a flight." }]))
    expect(first.ok).toBe(true)
    expect(first.report.format).toBe("openai-responses")
    expect(first.request).toMatchObject({
      model: "gpt-4.1",
      instructions: "You are a helpful airline agent.\n\nAnswer briefly.",
      input: [{ type: "message", role: "user", content: "I want to book a flight." }],
      store: false,
      prompt_cache_retention: "24h",
    })
    expect(first.request.tools).toEqual([
      {
        type: "function",
        name: "get_user",
        description: "Get a user",
        parameters: { type: "object", properties: { id: { type: "string" } } },
        strict: false,
      },
      { type: "web_search" },
    ])
    expect(first.request.prompt_cache_key).toBe(first.report.cache.promptCacheKey)
    expect(first.request.max_output_tokens).toBe(first.report.model.maxOutputTokens)
    // the cache planner plans with the 24h tier the body asks for
    expect(first.report.cache.ttlSeconds).toBe(86_400)

    const reasoning = {
      type: "reasoning",
      id: "rs_1",
      summary: [{ type: "summary_text", text: "look the user up" }],
      encrypted_content: "gAAAAAB-opaque",
    }
    const second = await h.request(
      subject,
      responsesTurn("r2", [
        reasoning,
        { type: "function_call", call_id: "call_1", name: "get_user", arguments: '{"id":"u1"}' },
        { type: "function_call_output", call_id: "call_1", output: '{"name":"Mia"}' },
      ]),
    )
    expect(second.ok).toBe(true)
    expect(second.request.input).toEqual([
      { type: "message", role: "user", content: "I want to book a flight." },
      reasoning,
      { type: "function_call", call_id: "call_1", name: "get_user", arguments: '{"id":"u1"}' },
      { type: "function_call_output", call_id: "call_1", output: '{"name":"Mia"}' },
    ])
    const response = await client.responses.create(second.request as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    expect(response.status).toBe("completed")
    expect(response.usage?.input_tokens).toBeGreaterThan(0)
    // the Responses usage (input_tokens with input_tokens_details) reads as OpenAI usage: cached tokens are reads
    const billed = await h.request(`${h.root}.v1.usage.acme.resp-1`, {
      turnId: "r2",
      usage: { ...response.usage, input_tokens_details: { cached_tokens: 3 } },
    })
    expect(billed).toMatchObject({ ok: true, turnId: "r2", counted: true })
    expect(billed.billed).toBe(response.usage?.input_tokens)
    if (billed.cache !== undefined) expect(billed.cache.billedReadTokens).toBe(3)

    const orphan = await h.request(subject, responsesTurn("r3", [{ type: "function_call_output", call_id: "call_9", output: "x" }]))
    expect(orphan).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    expect(orphan.error.message).toContain("call_9")
    // the pairing error names the request's own field
    expect(orphan.error.path).toBe("input[0]")

    const malformed = await h.request(subject, responsesTurn("r4", [{ type: "function_call", call_id: "", name: "x", arguments: "{}" }]))
    expect(malformed).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    expect(malformed.error.path).toContain("input[0]")
  })
})

describe("loop check in openai-responses input", () => {
  it("flags repeated function calls with the same output", async () => {
    const call = (i: number) => [
      { type: "function_call", call_id: `c${i}`, name: "search", arguments: '{"q": "flights"}' },
      { type: "function_call_output", call_id: `c${i}`, output: "no results" },
    ]
    const input = [{ role: "user", content: "find me a flight" }, ...call(1), ...call(2), ...call(3)]
    const reply = await h.request(`${h.root}.v1.loop.check`, { format: "openai-responses", input })
    expect(reply.ok).toBe(true)
    expect(reply.verdict.looping).toBe(true)
    expect(reply.verdict.findings[0]).toMatchObject({ pattern: "repeated_call", repeats: 3 })
    const calm = await h.request(`${h.root}.v1.loop.check`, { format: "openai-responses", input: input.slice(0, 5) })
    expect(calm.verdict.looping).toBe(false)
  })
})
