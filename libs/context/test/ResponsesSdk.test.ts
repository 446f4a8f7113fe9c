/**
 * The Responses format against the official `openai` SDK: tau-bench sessions
 * replayed turn by turn as Responses input, each turn's ctxd-rendered body
 * sent with `client.responses.create(body)` and counted with
 * `client.responses.inputTokens.count(...)` against the fake provider, which
 * validates like the API (known keys, call_id pairing, reasoning items).
 */
import { OpenAIResponses } from "@ctxd/contracts"
import { FakeProvider, Workloads } from "@ctxd/testing"
import { Schema } from "effect"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Models from "../src/Models.ts"
import * as Normalize from "../src/Normalize.ts"
import * as Pipeline from "../src/Pipeline.ts"
import { responsesPairingProblems } from "./Helpers.ts"

type Json = Record<string, unknown>

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

describe("openai-responses bodies through the official SDK", () => {
  it("a replayed tau-bench session: every turn's body is accepted, counted, and its prefix cached", async () => {
    const session = Workloads.toResponses(Workloads.tauBenchSession("tau-airline-19-3"))
    const tools = Normalize.tools("openai-responses", decodeTools(session.tools))
    const system = Normalize.system(session.system)
    const model = Models.resolve({ provider: "openai", name: "gpt-4.1" })
    const options = Pipeline.resolveOptions({ windowMessages: 12, windowStep: 4, maskKeep: 3 })
    const history: Array<Pipeline.StoredMessage> = []
    const known = new Set<string>()
    const answered = new Set<string>()
    let cachedTurns = 0
    for (const turn of session.turns) {
      const incoming = Normalize.fromResponsesIndexed(decodeItems(turn.input))
      expect(Normalize.findPairingError(known, answered, incoming)).toBeUndefined()
      for (const { message } of incoming) {
        history.push({ seq: history.length + 1, message, tokens: estimate(message) })
        Normalize.recordPairing(known, answered, message)
      }
      const out = Pipeline.run({
        tenant: "tau",
        session: session.id,
        format: "openai-responses",
        model,
        system,
        systemTokens: estimate(system),
        tools,
        toolsTokens: estimate(tools),
        history,
        options,
        counter: { backend: "estimate", encoding: "chars/4", exact: false, calibration: 1 },
      })
      const body = out.request
      expect(responsesPairingProblems(body)).toEqual([])
      expect(body).toMatchObject({
        model: "gpt-4.1",
        store: false,
        prompt_cache_retention: "24h",
        max_output_tokens: model.maxOutputTokens,
      })
      expect(body["prompt_cache_key"]).toBe(out.report.cache.promptCacheKey)
      const response = await client.responses.create(body as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
      expect(response.object).toBe("response")
      expect(response.status).toBe("completed")
      expect(response.usage?.input_tokens).toBeGreaterThan(0)
      expect(response.usage?.output_tokens).toBeGreaterThan(0)
      if ((response.usage?.input_tokens_details.cached_tokens ?? 0) > 0) cachedTurns++
      const { model: name, instructions, input, tools: sent } = body as Json
      const counted = await client.responses.inputTokens.count({
        model: name as string,
        instructions: instructions as string,
        input: input as OpenAI.Responses.ResponseInput,
        tools: sent as Array<OpenAI.Responses.Tool>,
      })
      expect(counted).toEqual({ object: "response.input_tokens", input_tokens: response.usage?.input_tokens })
      expect(FakeProvider.countRequestTokens("openai-responses", body)).toBe(counted.input_tokens)
    }
    expect(session.turns.length).toBeGreaterThan(3)
    expect(cachedTurns).toBeGreaterThan(0)
  })

  it("the fake provider refuses what the API refuses", async () => {
    const rejection = async (body: Json): Promise<unknown> => {
      try {
        await client.responses.create(body as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
      } catch (e) {
        return e
      }
      throw new Error("expected a 400")
    }
    const user = { type: "message", role: "user", content: "hi" }
    const call = { type: "function_call", call_id: "c1", name: "f", arguments: "{}" }
    const cases: Array<[string, Json, string]> = [
      ["an unknown top-level key", { model: "gpt-4o", input: [user], cache_control: {} }, "cache_control"],
      [
        "an output without its call",
        { model: "gpt-4o", input: [user, { type: "function_call_output", call_id: "c9", output: "x" }] },
        "c9",
      ],
      ["a call followed by a message before its output", { model: "gpt-4o", input: [user, call, user] }, "c1"],
      ["a bad role", { model: "gpt-4o", input: [{ type: "message", role: "tool", content: "x" }] }, "role"],
      [
        "a malformed reasoning item",
        {
          model: "gpt-4o",
          input: [user, { type: "reasoning", summary: "x" }, call, { type: "function_call_output", call_id: "c1", output: "y" }],
        },
        "summary",
      ],
      [
        "a reasoning item without its following item",
        { model: "gpt-4o", input: [user, { type: "reasoning", id: "rs_9", summary: [] }, user] },
        "Item 'rs_9' of type 'reasoning' was provided without its required following item.",
      ],
      ["a trailing reasoning item", { model: "gpt-4o", input: [user, { type: "reasoning", id: "rs_8", summary: [] }] }, "rs_8"],
      [
        "a hosted tool's call item without its id",
        { model: "gpt-4o", input: [user, { type: "web_search_call", status: "completed" }] },
        "input[1].id",
      ],
      [
        "a function tool in Chat Completions shape",
        { model: "gpt-4o", input: [user], tools: [{ type: "function", function: { name: "f" } }] },
        "tools[0]",
      ],
    ]
    for (const [, body, mention] of cases) {
      const error = await rejection(body)
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      expect(JSON.stringify((error as InstanceType<typeof OpenAI.BadRequestError>).error)).toContain(mention)
    }
    // a custom tool call and its output: accepted
    const custom = await client.responses.create({
      model: "gpt-4o",
      input: [
        user,
        { type: "custom_tool_call", call_id: "k1", name: "apply_patch", input: "*** Begin Patch" },
        { type: "custom_tool_call_output", call_id: "k1", output: "ok" },
      ],
      tools: [{ type: "custom", name: "apply_patch", description: "patch files" }],
    } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    expect(custom.status).toBe("completed")
    // under store: false, a reasoning item without encrypted_content is looked up by id: 404
    const unstored = await client.responses
      .create({
        model: "gpt-4o",
        store: false,
        input: [user, { type: "reasoning", id: "rs_7", summary: [] }, call, { type: "function_call_output", call_id: "c1", output: "y" }],
      } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
      .catch((e: unknown) => e)
    expect(unstored).toBeInstanceOf(OpenAI.NotFoundError)
    expect((unstored as Error).message).toContain("Item with id 'rs_7' not found. Items are not persisted when `store` is set to false.")
    // hosted tools' call items between reasoning and the answer: kept by ctxd, in place, and accepted
    const hosted = [
      user,
      { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "gAAA" },
      { type: "web_search_call", id: "ws_1", status: "completed", action: { type: "search", query: "weather paris" } },
      { type: "mcp_call", id: "mcp_1", server_label: "docs", name: "search", arguments: "{}", output: "found" },
      { type: "message", role: "assistant", content: "Sunny." },
      user,
    ]
    const rendered = Pipeline.run({
      tenant: "t",
      session: "hosted",
      format: "openai-responses",
      model: Models.resolve({ provider: "openai", name: "gpt-4o" }),
      system: [],
      systemTokens: 0,
      tools: Normalize.tools("openai-responses", decodeTools([{ type: "web_search" }])),
      toolsTokens: 5,
      history: Normalize.fromResponses(decodeItems(hosted)).map((message, i) => ({ seq: i + 1, message, tokens: estimate(message) })),
      options: Pipeline.resolveOptions({}),
      counter: { backend: "estimate", encoding: "chars/4", exact: false, calibration: 1 },
    }).request
    expect(rendered["input"]).toEqual(hosted)
    expect((await client.responses.create(rendered as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)).status).toBe(
      "completed",
    )
    // a reasoning item and its call, answered: accepted
    const ok = await client.responses.create({
      model: "gpt-4o",
      input: [
        user,
        { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "gAAA" },
        call,
        { type: "function_call_output", call_id: "c1", output: "y" },
      ],
    } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    expect(ok.output_text.length).toBeGreaterThan(0)
  })
})
