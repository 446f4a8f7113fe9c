/**
 * OpenAI explicit prompt caching (GPT-5.6+) through the official `openai`
 * SDK against the fake provider: ctxd's bodies for a breakpoint model carry
 * `prompt_cache_breakpoint`s (at most the row's 4, never on assistant
 * output) and `prompt_cache_options`; the fake accepts them only on models
 * that take them, bills the writes (`cache_write_tokens`) and reads the
 * marked prefixes back; older models' bodies carry none. Responses
 * `comparison_response_id` returns `prompt_cache_diagnostics`.
 */
import { OpenAI as OpenAIWire, OpenAIResponses } from "@ctxd/contracts"
import { FakeProvider, Workloads } from "@ctxd/testing"
import { Schema } from "effect"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Models from "../src/Models.ts"
import * as Normalize from "../src/Normalize.ts"
import * as Pipeline from "../src/Pipeline.ts"
import * as CountBody from "../src/providers/openai-responses/CountBody.ts"

type Json = Record<string, unknown>

const decodeChat = Schema.decodeUnknownSync(Schema.Array(OpenAIWire.Message))
const decodeChatTools = Schema.decodeUnknownSync(Schema.Array(OpenAIWire.Tool))
const decodeItems = Schema.decodeUnknownSync(Schema.Array(OpenAIResponses.Item))
const decodeTools = Schema.decodeUnknownSync(Schema.Array(OpenAIResponses.Tool))
const estimate = (value: unknown): number => Math.ceil(JSON.stringify(value).length / 4)

let server: FakeProvider.FakeProviderServer
let client: OpenAI

beforeAll(async () => {
  server = await FakeProvider.start()
  client = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test", maxRetries: 0 })
})
afterAll(() => server.close())

/** Every `prompt_cache_breakpoint` of a body: the path of the item it is in and that item's role or type. */
const breakpointsOf = (items: ReadonlyArray<Json>): Array<{ readonly at: number; readonly role: string }> =>
  items.flatMap((item, at) => {
    const parts = [item["content"], item["output"]].flatMap((c) => (Array.isArray(c) ? (c as Array<Json>) : []))
    return parts.filter((p) => p["prompt_cache_breakpoint"] !== undefined).map(() => ({ at, role: String(item["role"] ?? item["type"]) }))
  })

const run = (format: "openai" | "openai-responses", modelName: string, history: ReadonlyArray<Pipeline.StoredMessage>, session: string) => {
  const tau = Workloads.tauBenchSession("tau-airline-19-3")
  const tools =
    format === "openai"
      ? Normalize.tools("openai", decodeChatTools(tau.tools))
      : Normalize.tools("openai-responses", decodeTools(Workloads.toResponses(tau).tools))
  const system = Normalize.system(tau.system)
  return Pipeline.run({
    tenant: "t",
    session,
    format,
    model: Models.resolve({ provider: "openai", name: modelName }),
    system,
    systemTokens: estimate(system),
    tools,
    toolsTokens: estimate(tools),
    history,
    options: Pipeline.resolveOptions({ windowMessages: 12, windowStep: 4, maskKeep: 3 }),
    counter: { backend: "estimate", encoding: "chars/4", exact: false, calibration: 1 },
  })
}

/** The session's stored history turn by turn, in the neutral model. */
const histories = (format: "openai" | "openai-responses"): Array<Array<Pipeline.StoredMessage>> => {
  const tau = Workloads.tauBenchSession("tau-airline-19-3")
  const out: Array<Array<Pipeline.StoredMessage>> = []
  const history: Array<Pipeline.StoredMessage> = []
  const turns =
    format === "openai"
      ? tau.turns.map((t) => Normalize.fromOpenAI(decodeChat(t.messages)))
      : Workloads.toResponses(tau).turns.map((t) => Normalize.fromResponses(decodeItems(t.input)))
  for (const messages of turns) {
    for (const message of messages) history.push({ seq: history.length + 1, message, tokens: estimate(message) })
    out.push([...history])
  }
  return out
}

describe("OpenAI explicit breakpoints through the official SDK", () => {
  it("chat: gpt-5.6 bodies are marked, accepted, written once and read back; gpt-4.1 bodies carry no marks", async () => {
    let written = 0
    let read = 0
    for (const [i, history] of histories("openai").entries()) {
      const out = run("openai", "gpt-5.6", history, "chat-56")
      const body = out.request as Json
      expect(body["prompt_cache_options"]).toEqual({ mode: "explicit", ttl: "30m" })
      expect(body["prompt_cache_retention"]).toBeUndefined()
      const marks = breakpointsOf(body["messages"] as Array<Json>)
      expect(marks.length).toBe(out.report.cache.breakpoints)
      expect(marks.length).toBeGreaterThan(0)
      expect(marks.length).toBeLessThanOrEqual(4)
      expect(marks.every((m) => m.role !== "assistant")).toBe(true)
      const completion = await client.chat.completions.create(body as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)
      const details = completion.usage!.prompt_tokens_details!
      written += details.cache_write_tokens ?? 0
      if (i > 0) read += details.cached_tokens ?? 0
      const older = run("openai", "gpt-4.1", history, "chat-41").request as Json
      expect(older["prompt_cache_options"]).toBeUndefined()
      expect(breakpointsOf(older["messages"] as Array<Json>)).toEqual([])
    }
    expect(written).toBeGreaterThan(0)
    expect(read).toBeGreaterThan(0)
  })

  it("responses: gpt-5.6 bodies are marked and accepted, writes billed, reads at the marks", async () => {
    let written = 0
    let read = 0
    for (const [i, history] of histories("openai-responses").entries()) {
      const out = run("openai-responses", "gpt-5.6-terra", history, "resp-56")
      const body = out.request as Json
      expect(body["prompt_cache_options"]).toEqual({ mode: "explicit", ttl: "30m" })
      expect(body["prompt_cache_retention"]).toBeUndefined()
      const marks = breakpointsOf(body["input"] as Array<Json>)
      expect(marks.length).toBe(out.report.cache.breakpoints)
      expect(marks.length).toBeLessThanOrEqual(4)
      expect(marks.every((m) => m.role !== "assistant")).toBe(true)
      const response = await client.responses.create(body as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
      written += response.usage!.input_tokens_details.cache_write_tokens
      if (i > 0) read += response.usage!.input_tokens_details.cached_tokens
    }
    expect(written).toBeGreaterThan(0)
    expect(read).toBeGreaterThan(0)
  })

  it("count requests carry no breakpoints: a gpt-5.6 batch counts like any other", async () => {
    const history = histories("openai-responses").at(-1)!
    const batch = CountBody.batch(
      "gpt-5.6",
      history.map((m) => m.message),
    )
    expect(JSON.stringify(batch.body)).not.toContain("prompt_cache_breakpoint")
    const counted = await client.responses.inputTokens.count({
      model: "gpt-5.6",
      input: batch.body["input"] as OpenAI.Responses.ResponseInput,
    })
    expect(counted.input_tokens).toBeGreaterThan(0)
  })

  it("the fake provider refuses explicit cache fields where the API does", async () => {
    const rejection = async (create: () => Promise<unknown>): Promise<InstanceType<typeof OpenAI.BadRequestError>> => {
      try {
        await create()
      } catch (e) {
        expect(e).toBeInstanceOf(OpenAI.BadRequestError)
        return e as InstanceType<typeof OpenAI.BadRequestError>
      }
      throw new Error("expected a 400")
    }
    const marked = { type: "text", text: "hi", prompt_cache_breakpoint: { mode: "explicit" } }
    const chat =
      (model: string, messages: Array<Json>, extra: Json = {}) =>
      () =>
        client.chat.completions.create({ model, messages, ...extra } as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)
    const older = await rejection(chat("gpt-4.1", [{ role: "user", content: [marked] }]))
    expect(older.code).toBe("unsupported_parameter")
    expect(older.param).toBe("messages[0].content[0].prompt_cache_breakpoint")
    const options = await rejection(chat("gpt-4o", [{ role: "user", content: "hi" }], { prompt_cache_options: { mode: "explicit" } }))
    expect(options.param).toBe("prompt_cache_options")
    const assistant = await rejection(
      chat("gpt-5.6", [
        { role: "user", content: "hi" },
        { role: "assistant", content: [marked] },
      ]),
    )
    expect(assistant.param).toBe("messages[1].content[0].prompt_cache_breakpoint")
    // Chat Completions takes only the 30-minute TTL; Responses also 12 hours
    const ttl = await rejection(chat("gpt-5.6", [{ role: "user", content: "hi" }], { prompt_cache_options: { ttl: "12h" } }))
    expect(ttl.param).toBe("prompt_cache_options.ttl")
    const accepted = await client.responses.create({
      model: "gpt-5.6",
      input: [
        {
          type: "message",
          role: "user",
          content: [{ type: "input_text", text: "hi", prompt_cache_breakpoint: { mode: "explicit", ttl: "12h" } }],
        },
      ],
      prompt_cache_options: { mode: "explicit", ttl: "12h" },
    })
    expect(accepted.status).toBe("completed")
    // more than four marks are not refused: the API writes the latest four
    const five = Array.from({ length: 5 }, (_, i) => ({ role: "user", content: [{ ...marked, text: `m${i}` }] }))
    const many = await client.chat.completions.create({
      model: "gpt-5.6",
      messages: five,
    } as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)
    expect(many.choices.length).toBe(1)
  })

  it("responses diagnostics: a hit against the previous response, the changed tools named, an unknown id not found", async () => {
    const histories56 = histories("openai-responses")
    const first = run("openai-responses", "gpt-5.6", histories56[2]!, "diag").request as Json
    const r1 = await client.responses.create(first as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    const next = run("openai-responses", "gpt-5.6", histories56[3]!, "diag").request as Json
    const withComparison = (body: Json, id: string): Json => ({
      ...body,
      prompt_cache_options: { ...(body["prompt_cache_options"] as Json), comparison_response_id: id },
    })
    const r2 = await client.responses.create(withComparison(next, r1.id) as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    expect(r2.prompt_cache_diagnostics).toEqual({ type: "cache_hit" })
    const changed = { ...withComparison(next, r1.id), tools: (next["tools"] as Array<Json>).slice(1) }
    const r3 = await client.responses.create(changed as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    expect(r3.prompt_cache_diagnostics).toMatchObject({ type: "cache_miss", reason: "tools_changed" })
    const r4 = await client.responses.create(
      withComparison(next, "resp_unknown") as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming,
    )
    expect(r4.prompt_cache_diagnostics).toEqual({ type: "comparison_response_not_found" })
  })
})
