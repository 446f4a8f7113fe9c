import Anthropic from "@anthropic-ai/sdk"
import { it as effectIt } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import * as FakeProvider from "../src/FakeProvider.ts"

const MODEL = "claude-sonnet-4-6"
const GPT = "gpt-4o-mini"

/** ~40 tokens per paragraph; `n` paragraphs of distinct text. */
const prose = (n: number, tag = "p"): string =>
  Array.from(
    { length: n },
    (_, i) => `Paragraph ${tag}-${i}: the context engine keeps history in Postgres and answers with a budgeted prompt.`,
  ).join("\n")

const rejection = async (promise: Promise<unknown>): Promise<unknown> => {
  try {
    await promise
  } catch (e) {
    return e
  }
  throw new Error("expected the call to fail")
}

let server: FakeProvider.FakeProviderServer
let anthropic: Anthropic
let openai: OpenAI

beforeAll(async () => {
  server = await FakeProvider.start()
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
  openai = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test", maxRetries: 0 })
})
afterAll(() => server.close())
beforeEach(() => server.reset())

describe("FakeProvider / Anthropic", () => {
  it("answers messages.create with a deterministic default text and consistent usage", async () => {
    const params = { model: MODEL, max_tokens: 256, messages: [{ role: "user" as const, content: "What changed in the build?" }] }
    const message = await anthropic.messages.create(params)
    expect(message.type).toBe("message")
    expect(message.model).toBe(MODEL)
    expect(message.stop_reason).toBe("end_turn")
    const [block] = message.content
    expect(block?.type === "text" && block.text).toContain("What changed in the build?")
    const again = await anthropic.messages.create(params)
    expect(again.content).toEqual(message.content)

    const { input_tokens } = await anthropic.messages.countTokens({ model: MODEL, messages: params.messages })
    const u = message.usage
    expect(u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0)).toBe(input_tokens)
    expect(u.cache_read_input_tokens).toBe(0)
    expect(u.output_tokens).toBeGreaterThan(0)
  })

  it("counts tokens with the Claude tokenizer plus fixed overheads", async () => {
    const body = {
      model: MODEL,
      system: "You are terse.",
      tools: [
        {
          name: "search",
          description: "Search the docs",
          input_schema: { type: "object" as const, properties: { q: { type: "string" } } },
        },
      ],
      messages: [{ role: "user" as const, content: "hello world" }],
    }
    const { input_tokens } = await anthropic.messages.countTokens(body)
    expect(input_tokens).toBe(FakeProvider.countRequestTokens("anthropic", body))
    const o = FakeProvider.overheads
    const toolText = JSON.stringify({
      description: "Search the docs",
      input_schema: { properties: { q: { type: "string" } }, type: "object" },
      name: "search",
    })
    expect(input_tokens).toBeGreaterThan(o.perRequest + o.perMessage + o.perTool + FakeProvider.countTextTokens("hello world"))
    expect(input_tokens).toBeGreaterThanOrEqual(FakeProvider.countTextTokens(toolText))
  })

  it("streams events the SDK's stream helper accumulates", async () => {
    server.control({
      replies: [{ text: "Streaming works fine, chunk by chunk." }, { toolCalls: [{ name: "search", input: { q: "fake provider" } }] }],
    })
    const stream = anthropic.messages.stream({ model: MODEL, max_tokens: 64, messages: [{ role: "user", content: "stream please" }] })
    const deltas: Array<string> = []
    stream.on("text", (t) => deltas.push(t))
    const final = await stream.finalMessage()
    expect(deltas.length).toBeGreaterThan(1)
    expect(final.content).toEqual([{ type: "text", text: "Streaming works fine, chunk by chunk.", citations: null }])
    expect(final.usage.output_tokens).toBe(FakeProvider.countTextTokens("Streaming works fine, chunk by chunk."))

    const tools = [{ name: "search", input_schema: { type: "object" as const } }]
    const toolStream = anthropic.messages.stream({
      model: MODEL,
      max_tokens: 64,
      tools,
      messages: [{ role: "user", content: "look it up" }],
    })
    const toolMessage = await toolStream.finalMessage()
    expect(toolMessage.stop_reason).toBe("tool_use")
    expect(toolMessage.content[0]).toMatchObject({ type: "tool_use", name: "search", input: { q: "fake provider" } })
  })

  it("returns a scripted tool call and accepts the paired tool result", async () => {
    server.control({ replies: [{ provider: "anthropic", toolCalls: [{ name: "get_weather", input: { city: "Paris" } }] }] })
    const tools = [{ name: "get_weather", input_schema: { type: "object" as const, properties: { city: { type: "string" } } } }]
    const user = { role: "user" as const, content: "Weather in Paris?" }
    const first = await anthropic.messages.create({ model: MODEL, max_tokens: 64, tools, messages: [user] })
    expect(first.stop_reason).toBe("tool_use")
    const call = first.content.find((b) => b.type === "tool_use")
    expect(call).toMatchObject({ name: "get_weather", input: { city: "Paris" } })
    const second = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 64,
      tools,
      messages: [
        user,
        {
          role: "assistant",
          content: first.content.map((b) =>
            b.type === "tool_use"
              ? { type: "tool_use" as const, id: b.id, name: b.name, input: b.input }
              : { type: "text" as const, text: "checking" },
          ),
        },
        { role: "user", content: [{ type: "tool_result", tool_use_id: call?.type === "tool_use" ? call.id : "", content: "18°C, clear" }] },
      ],
    })
    expect(second.stop_reason).toBe("end_turn")
  })

  it("answers a forced tool_choice with a schema-shaped input when nothing is scripted", async () => {
    const tools = [
      {
        name: "snapshot",
        input_schema: {
          type: "object" as const,
          properties: { findings: { type: "array" }, task: { type: "string" } },
          required: ["findings", "task"],
        },
      },
    ]
    const message = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 64,
      tools,
      tool_choice: { type: "tool", name: "snapshot" },
      messages: [{ role: "user", content: "summarize" }],
    })
    expect(message.content).toEqual([expect.objectContaining({ type: "tool_use", name: "snapshot", input: { findings: [], task: "" } })])
  })

  const T = [{ name: "t", input_schema: { type: "object" } }]
  const invalid: Array<[string, Record<string, unknown>, string]> = [
    [
      "orphan tool_result",
      { tools: T, messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "x" }] }] },
      "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_1",
    ],
    [
      "unanswered tool_use",
      {
        tools: T,
        messages: [
          { role: "user", content: "go" },
          { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "t", input: {} }] },
          { role: "user", content: "never mind" },
        ],
      },
      "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1",
    ],
    [
      "text before the tool_result",
      {
        tools: T,
        messages: [
          { role: "user", content: "go" },
          { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "t", input: {} }] },
          {
            role: "user",
            content: [
              { type: "text", text: "here" },
              { type: "tool_result", tool_use_id: "toolu_1", content: "ok" },
            ],
          },
        ],
      },
      "`tool_use` ids were found without `tool_result` blocks immediately after",
    ],
    [
      "first message from the assistant",
      {
        messages: [
          { role: "assistant", content: "hi" },
          { role: "user", content: "yo" },
        ],
      },
      'first message must use the "user" role',
    ],
    [
      "two user turns in a row",
      {
        messages: [
          { role: "user", content: "a" },
          { role: "user", content: "b" },
        ],
      },
      "roles must alternate",
    ],
    [
      "an empty text block",
      { messages: [{ role: "user", content: [{ type: "text", text: "" }] }] },
      "text content blocks must be non-empty",
    ],
    [
      "five cache breakpoints",
      {
        system: Array.from({ length: 5 }, (_, i) => ({ type: "text", text: `s${i}`, cache_control: { type: "ephemeral" } })),
        messages: [{ role: "user", content: "a" }],
      },
      "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ],
    [
      "a 1h breakpoint after a 5m one",
      {
        system: [{ type: "text", text: "s", cache_control: { type: "ephemeral" } }],
        messages: [{ role: "user", content: [{ type: "text", text: "a", cache_control: { type: "ephemeral", ttl: "1h" } }] }],
      },
      "messages.0.content.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block",
    ],
    [
      "a ctxd extension left on a tool",
      {
        tools: [{ name: "t", input_schema: { type: "object" }, toolset: "git" }],
        messages: [{ role: "user", content: "a" }],
      },
      "tools.0.custom.toolset: Extra inputs are not permitted",
    ],
    [
      "tool blocks without tools",
      {
        messages: [
          { role: "user", content: "go" },
          { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "t", input: {} }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "ok" }] },
        ],
      },
      "must define tools",
    ],
  ]

  // thinking: where the blocks may stand and what they carry
  const signed = { type: "thinking", thinking: "Look it up first.", signature: "sig-1" }
  const loop = (first: Record<string, unknown> | undefined) => [
    { role: "user", content: "go" },
    { role: "assistant", content: [...(first === undefined ? [] : [first]), { type: "tool_use", id: "toolu_1", name: "t", input: {} }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "ok" }] },
  ]
  const enabled = { max_tokens: 4096, thinking: { type: "enabled", budget_tokens: 1024 } }
  invalid.push(
    [
      "a thinking block in a user message",
      { messages: [{ role: "user", content: [signed, { type: "text", text: "hi" }] }] },
      "messages.0.content.0: thinking blocks can only be in assistant messages",
    ],
    [
      "a thinking block without its signature",
      { tools: T, messages: loop({ type: "thinking", thinking: "hmm" }) },
      "messages.1.content.0.thinking.signature: Field required",
    ],
    [
      "a redacted_thinking block without its data",
      { tools: T, messages: loop({ type: "redacted_thinking" }) },
      "messages.1.content.0.redacted_thinking.data: Field required",
    ],
    [
      "a tool-use continuation without thinking while thinking is enabled",
      { ...enabled, tools: T, messages: loop(undefined) },
      "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks).",
    ],
    [
      "a tool-use continuation whose thinking is not first",
      {
        ...enabled,
        tools: T,
        messages: [
          { role: "user", content: "go" },
          {
            role: "assistant",
            content: [{ type: "text", text: "Checking." }, signed, { type: "tool_use", id: "toolu_1", name: "t", input: {} }],
          },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "ok" }] },
        ],
      },
      "but found `text`. When `thinking` is enabled",
    ],
    [
      "thinking in a final assistant message while thinking is disabled",
      {
        messages: [
          { role: "user", content: "go" },
          { role: "assistant", content: [signed] },
        ],
      },
      "messages.1.content.0: When thinking is disabled, an `assistant` message in the final position cannot contain `thinking`.",
    ],
    [
      "a thinking budget not below max_tokens",
      { max_tokens: 1024, thinking: { type: "enabled", budget_tokens: 1024 }, messages: [{ role: "user", content: "a" }] },
      "`max_tokens` must be greater than `thinking.budget_tokens`",
    ],
  )

  it("accepts thinking where the API does: first in a continuation's final assistant message, signed or redacted, older turns with or without theirs", async () => {
    const create = (body: Record<string, unknown>) =>
      anthropic.messages.create({ model: MODEL, ...enabled, ...body } as unknown as Anthropic.MessageCreateParamsNonStreaming)
    await expect(create({ tools: T, messages: loop(signed) })).resolves.toMatchObject({ type: "message" })
    await expect(create({ tools: T, messages: loop({ type: "redacted_thinking", data: "EmwKAhgB" }) })).resolves.toMatchObject({
      type: "message",
    })
    // an older turn without its thinking, the current loop with it; a new user turn needs none
    const older = [
      { role: "user", content: "first" },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_0", name: "t", input: {} }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_0", content: "ok" }] },
      { role: "assistant", content: "done" },
    ]
    await expect(create({ tools: T, messages: [...older, ...loop(signed)] })).resolves.toMatchObject({ type: "message" })
    await expect(create({ tools: T, messages: [...older, { role: "user", content: "next" }] })).resolves.toMatchObject({ type: "message" })
    // without thinking enabled, thinking blocks of earlier assistant messages are accepted (and ignored)
    await expect(
      anthropic.messages.create({
        model: MODEL,
        max_tokens: 16,
        tools: T,
        messages: loop(signed),
      } as unknown as Anthropic.MessageCreateParamsNonStreaming),
    ).resolves.toMatchObject({ type: "message" })
  })

  for (const [name, body, message] of invalid) {
    it(`rejects ${name} with a BadRequestError`, async () => {
      const params = { model: MODEL, max_tokens: 16, ...body } as unknown as Anthropic.MessageCreateParamsNonStreaming
      const error = await rejection(anthropic.messages.create(params))
      expect(error).toBeInstanceOf(Anthropic.BadRequestError)
      const e = error as InstanceType<typeof Anthropic.BadRequestError>
      expect(e.status).toBe(400)
      expect(e.type).toBe("invalid_request_error")
      expect(e.apiMessage).toContain(message)
    })
  }

  it("requires max_tokens on messages but refuses it on count_tokens", async () => {
    const messages = [{ role: "user" as const, content: "hi" }]
    const missing = await rejection(
      anthropic.messages.create({ model: MODEL, messages } as unknown as Anthropic.MessageCreateParamsNonStreaming),
    )
    expect((missing as Error).message).toContain("max_tokens: Field required")
    const extra = await rejection(
      anthropic.messages.countTokens({ model: MODEL, messages, max_tokens: 5 } as unknown as Anthropic.MessageCountTokensParams),
    )
    expect(extra).toBeInstanceOf(Anthropic.BadRequestError)
    expect((extra as Error).message).toContain("max_tokens: Extra inputs are not permitted")
  })

  it("rejects a prompt larger than the context window", async () => {
    server.control({ contextWindow: 50 })
    const error = await rejection(
      anthropic.messages.create({ model: MODEL, max_tokens: 5, messages: [{ role: "user", content: prose(3) }] }),
    )
    expect(error).toBeInstanceOf(Anthropic.BadRequestError)
    expect((error as Error).message).toMatch(/prompt is too long: \d+ tokens > 50 maximum/)
  })
})

describe("FakeProvider / OpenAI", () => {
  it("answers chat.completions.create with usage including cached_tokens", async () => {
    const completion = await openai.chat.completions.create({
      model: GPT,
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "ping" },
      ],
    })
    expect(completion.object).toBe("chat.completion")
    expect(completion.choices[0]?.finish_reason).toBe("stop")
    expect(completion.choices[0]?.message.content).toContain("ping")
    const usage = completion.usage!
    expect(usage.prompt_tokens).toBe(
      FakeProvider.countRequestTokens("openai", {
        model: GPT,
        messages: [
          { role: "system", content: "be brief" },
          { role: "user", content: "ping" },
        ],
      }),
    )
    expect(usage.prompt_tokens_details?.cached_tokens).toBe(0)
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens)
  })

  it("returns scripted tool calls and streams with include_usage", async () => {
    server.control({
      replies: [
        { provider: "openai", toolCalls: [{ id: "call_1", name: "get_weather", input: { city: "Oslo" } }] },
        { provider: "openai", text: "It is sunny in Oslo today." },
      ],
    })
    const tools = [
      {
        type: "function" as const,
        function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
      },
    ]
    const first = await openai.chat.completions.create({ model: GPT, tools, messages: [{ role: "user", content: "weather?" }] })
    expect(first.choices[0]?.finish_reason).toBe("tool_calls")
    expect(first.choices[0]?.message.tool_calls).toEqual([
      { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
    ])

    const stream = await openai.chat.completions.create({
      model: GPT,
      tools,
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: "user", content: "weather?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }],
        },
        { role: "tool", tool_call_id: "call_1", content: "sunny" },
      ],
    })
    let text = ""
    let usage: OpenAI.CompletionUsage | null | undefined
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ""
      if (chunk.usage) usage = chunk.usage
    }
    expect(text).toBe("It is sunny in Oslo today.")
    expect(usage?.completion_tokens).toBe(FakeProvider.countTextTokens("It is sunny in Oslo today."))
  })

  const invalid: ReadonlyArray<[string, ReadonlyArray<Record<string, unknown>>, string]> = [
    [
      "an orphan tool message",
      [
        { role: "user", content: "a" },
        { role: "tool", tool_call_id: "call_9", content: "x" },
      ],
      "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
    ],
    [
      "an unanswered tool call",
      [
        { role: "user", content: "a" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "t", arguments: "{}" } },
            { id: "call_2", type: "function", function: { name: "t", arguments: "{}" } },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: "x" },
        { role: "user", content: "b" },
      ],
      "The following tool_call_ids did not have response messages: call_2",
    ],
    [
      "a tool result for an unknown call",
      [
        { role: "user", content: "a" },
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "t", arguments: "{}" } }] },
        { role: "tool", tool_call_id: "call_7", content: "x" },
      ],
      "'tool_call_id' of 'call_7' not found",
    ],
    [
      "Anthropic cache_control in a content part",
      [{ role: "user", content: [{ type: "text", text: "a", cache_control: { type: "ephemeral" } }] }],
      "Unknown parameter: 'messages[0].content[0].cache_control'.",
    ],
  ]

  for (const [name, messages, message] of invalid) {
    it(`rejects ${name} with a BadRequestError`, async () => {
      const params = { model: GPT, messages } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming
      const error = await rejection(openai.chat.completions.create(params))
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      const e = error as InstanceType<typeof OpenAI.BadRequestError>
      expect(e.status).toBe(400)
      expect(e.type).toBe("invalid_request_error")
      expect(e.message).toContain(message)
    })
  }
})

describe("FakeProvider / faults", () => {
  it("answers 429 with retry-after and the SDK's own retry succeeds", async () => {
    server.control({ rateLimitNext: 1, retryAfterMs: 20 })
    const retrying = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 2 })
    const message = await retrying.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: "user", content: "hi" }] })
    expect(message.type).toBe("message")
    const log = server.requests()
    expect(log.map((r) => r.status)).toEqual([429, 200])
    expect(log[1]?.headers["x-stainless-retry-count"]).toBe("1")

    server.control({ rateLimitNext: 1 })
    const limited = await rejection(anthropic.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: "user", content: "hi" }] }))
    expect(limited).toBeInstanceOf(Anthropic.RateLimitError)
    expect((limited as InstanceType<typeof Anthropic.RateLimitError>).headers?.get("retry-after")).toBe("1")

    server.control({ rateLimitNext: 1, retryAfterMs: 20 })
    const oa = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test", maxRetries: 1 })
    await oa.chat.completions.create({ model: GPT, messages: [{ role: "user", content: "hi" }] })
    expect(
      server
        .requests()
        .filter((r) => r.endpoint === "chat_completions")
        .map((r) => r.status),
    ).toEqual([429, 200])
  })

  it("injects 5xx at the configured error rate, deterministically per seed", async () => {
    server.control({ errorRate: 1 })
    expect(
      await rejection(anthropic.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: "user", content: "x" }] })),
    ).toBeInstanceOf(Anthropic.InternalServerError)
    expect(await rejection(openai.chat.completions.create({ model: GPT, messages: [{ role: "user", content: "x" }] }))).toBeInstanceOf(
      OpenAI.InternalServerError,
    )

    const run = async () => {
      server.reset()
      server.control({ errorRate: 0.5 })
      const outcomes: Array<boolean> = []
      for (let i = 0; i < 20; i++) {
        outcomes.push(
          await anthropic.messages.countTokens({ model: MODEL, messages: [{ role: "user", content: "x" }] }).then(
            () => true,
            () => false,
          ),
        )
      }
      return outcomes
    }
    const first = await run()
    expect(first.filter(Boolean).length).toBeGreaterThan(2)
    expect(first.filter((ok) => !ok).length).toBeGreaterThan(2)
    expect(await run()).toEqual(first)
  })

  it("fails the next n requests, then recovers (SDK retries)", async () => {
    server.control({ failNext: 2, errorStatus: 529, faultEndpoints: ["messages"] })
    const retrying = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 2 })
    await anthropic.messages.countTokens({ model: MODEL, messages: [{ role: "user", content: "not faulted" }] })
    const started = Date.now()
    const message = await retrying.messages.create(
      { model: MODEL, max_tokens: 8, messages: [{ role: "user", content: "hi" }] },
      { maxRetries: 2 },
    )
    expect(message.type).toBe("message")
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(server.requests().map((r) => r.status)).toEqual([200, 529, 529, 200])
  })

  it("hangs until the client's timeout gives up, promptly", async () => {
    server.control({ hang: true })
    const started = Date.now()
    const error = await rejection(
      anthropic.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: "user", content: "hi" }] }, { timeout: 200 }),
    )
    expect(error).toBeInstanceOf(Anthropic.APIConnectionTimeoutError)
    expect(Date.now() - started).toBeLessThan(2_000)
    const oaError = await rejection(
      openai.chat.completions.create({ model: GPT, messages: [{ role: "user", content: "hi" }] }, { timeout: 200 }),
    )
    expect(oaError).toBeInstanceOf(OpenAI.APIConnectionTimeoutError)
    expect(server.requests().map((r) => r.status)).toEqual([null, null])

    server.control({ hang: false, hangNext: 1 })
    const retrying = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 1, timeout: 200 })
    const message = await retrying.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: "user", content: "hi" }] })
    expect(message.type).toBe("message")
  })

  it("adds fixed latency", async () => {
    server.control({ latencyMs: 120 })
    const started = Date.now()
    await openai.chat.completions.create({ model: GPT, messages: [{ role: "user", content: "slow" }] })
    expect(Date.now() - started).toBeGreaterThanOrEqual(110)
  })

  it("returns scripted errors in queue order", async () => {
    server.control({ replies: [{ error: { status: 400, message: "prompt is too long: 300000 tokens > 200000 maximum" } }, { text: "ok" }] })
    const error = await rejection(anthropic.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: "user", content: "hi" }] }))
    expect((error as Error).message).toContain("prompt is too long")
    const ok = await anthropic.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: "user", content: "hi" }] })
    expect(ok.content).toEqual([{ type: "text", text: "ok", citations: null }])
  })
})

describe("FakeProvider / prompt cache", () => {
  const system = (ttl?: "1h") => [
    { type: "text" as const, text: prose(60, "sys"), cache_control: { type: "ephemeral" as const, ...(ttl ? { ttl } : {}) } },
  ]

  it("reads a repeated Anthropic prefix from the cache and grows the read as the conversation does", async () => {
    const turn1 = [
      { role: "user" as const, content: [{ type: "text" as const, text: prose(30, "t1"), cache_control: { type: "ephemeral" as const } }] },
    ]
    const a = await anthropic.messages.create({ model: MODEL, max_tokens: 8, system: system("1h"), messages: turn1 })
    expect(a.usage.cache_read_input_tokens).toBe(0)
    expect(a.usage.cache_creation?.ephemeral_1h_input_tokens).toBeGreaterThan(1_024)
    expect(a.usage.cache_creation?.ephemeral_5m_input_tokens).toBeGreaterThan(0)
    const written = a.usage.cache_creation_input_tokens!

    const turn2 = [
      { role: "user" as const, content: [{ type: "text" as const, text: prose(30, "t1") }] },
      { role: "assistant" as const, content: "Noted." },
      { role: "user" as const, content: [{ type: "text" as const, text: prose(30, "t2"), cache_control: { type: "ephemeral" as const } }] },
    ]
    const b = await anthropic.messages.create({ model: MODEL, max_tokens: 8, system: system("1h"), messages: turn2 })
    expect(b.usage.cache_read_input_tokens).toBe(written)
    expect(b.usage.cache_creation_input_tokens).toBeGreaterThan(0)
    const c = await anthropic.messages.create({ model: MODEL, max_tokens: 8, system: system("1h"), messages: turn2 })
    expect(c.usage.cache_read_input_tokens!).toBeGreaterThan(b.usage.cache_read_input_tokens!)
    expect(c.usage.cache_creation_input_tokens).toBe(0)

    const other = new Anthropic({ baseURL: server.url, apiKey: "another-key", maxRetries: 0 })
    const d = await other.messages.create({ model: MODEL, max_tokens: 8, system: system("1h"), messages: turn2 })
    expect(d.usage.cache_read_input_tokens).toBe(0)
  })

  it("misses when the prefix changes or the breakpoint moves past the lookback window", async () => {
    await anthropic.messages.create({ model: MODEL, max_tokens: 8, system: system(), messages: [{ role: "user", content: "q" }] })
    const edited = [{ ...system()[0]!, text: `${prose(60, "sys")} (edited)` }]
    const e = await anthropic.messages.create({ model: MODEL, max_tokens: 8, system: edited, messages: [{ role: "user", content: "q" }] })
    expect(e.usage.cache_read_input_tokens).toBe(0)

    server.control({ clearCache: true })
    const many = (n: number, mark: boolean) =>
      Array.from({ length: n }, (_, i) => ({
        role: (i % 2 === 0 ? "user" : "assistant") as "user" | "assistant",
        content: [
          {
            type: "text" as const,
            text: `turn ${i}: ${prose(2, `m${i}`)}`,
            ...(mark && i === n - 1 ? { cache_control: { type: "ephemeral" as const } } : {}),
          },
        ],
      }))
    const near = await anthropic.messages.create({ model: MODEL, max_tokens: 8, system: system(), messages: many(25, true) })
    expect(near.usage.cache_read_input_tokens).toBe(0)
    const far = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 8,
      system: [{ type: "text", text: prose(60, "sys") }],
      messages: many(51, true),
    })
    expect(far.usage.cache_read_input_tokens).toBe(0)
    const close = await anthropic.messages.create({ model: MODEL, max_tokens: 8, system: system(), messages: many(41, true) })
    expect(close.usage.cache_read_input_tokens).toBe(near.usage.cache_creation_input_tokens)
  })

  it("caches an OpenAI prefix of at least 1024 tokens in 128-token steps", async () => {
    const base = [
      { role: "system" as const, content: prose(60, "oa") },
      { role: "user" as const, content: "first question" },
    ]
    const a = await openai.chat.completions.create({ model: GPT, messages: base })
    expect(a.usage?.prompt_tokens_details?.cached_tokens).toBe(0)
    const b = await openai.chat.completions.create({
      model: GPT,
      messages: [...base, { role: "assistant", content: "answer" }, { role: "user", content: "second" }],
    })
    const cached = b.usage?.prompt_tokens_details?.cached_tokens ?? 0
    expect(cached).toBeGreaterThanOrEqual(1_024)
    expect((cached - 1_024) % 128).toBe(0)
    expect(cached).toBeLessThanOrEqual(a.usage!.prompt_tokens)
    expect(a.usage!.prompt_tokens - cached).toBeLessThan(128)

    const keyed = await openai.chat.completions.create({ model: GPT, messages: base, prompt_cache_key: "tenant-a" })
    expect(keyed.usage?.prompt_tokens_details?.cached_tokens).toBe(0)
    const short = await openai.chat.completions.create({ model: GPT, messages: [{ role: "user", content: "tiny" }] })
    expect(short.usage?.prompt_tokens_details?.cached_tokens).toBe(0)
  })
})

describe("FakeProvider / control and request log", () => {
  it("logs requests and exposes the log and controls over HTTP", async () => {
    await anthropic.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: "user", content: "one" }] })
    await anthropic.messages.countTokens({ model: MODEL, messages: [{ role: "user", content: "two" }] })
    await openai.chat.completions.create({ model: GPT, messages: [{ role: "user", content: "three" }] })
    const log = server.requests()
    expect(log.map((r) => [r.method, r.path, r.endpoint, r.status])).toEqual([
      ["POST", "/v1/messages", "messages", 200],
      ["POST", "/v1/messages/count_tokens", "count_tokens", 200],
      ["POST", "/v1/chat/completions", "chat_completions", 200],
    ])
    expect(log[0]?.body).toMatchObject({ model: MODEL, messages: [{ role: "user", content: "one" }] })
    expect(log[0]?.headers["authorization"]).toBe("[redacted]")
    expect(typeof log[0]?.timestamp).toBe("number")

    const viaHttp = (await (await fetch(`${server.url}/_requests`)).json()) as Array<{ path: string }>
    expect(viaHttp.map((r) => r.path)).toEqual(log.map((r) => r.path))

    const patched = await fetch(`${server.url}/_control`, {
      method: "POST",
      body: JSON.stringify({ failNext: 1, replies: [{ text: "scripted" }] }),
    })
    expect(await patched.json()).toMatchObject({ settings: { failNext: 1 }, pendingReplies: 1 })
    const bad = await fetch(`${server.url}/_control`, { method: "POST", body: JSON.stringify({ errorRate: 3 }) })
    expect(bad.status).toBe(400)
    expect(() => server.control({ latencyMs: -1 })).toThrow(/invalid control patch/)

    expect(await rejection(openai.chat.completions.create({ model: GPT, messages: [{ role: "user", content: "x" }] }))).toBeInstanceOf(
      OpenAI.InternalServerError,
    )
    const ok = await openai.chat.completions.create({ model: GPT, messages: [{ role: "user", content: "x" }] })
    expect(ok.choices[0]?.message.content).toBe("scripted")

    const unknownPath = await fetch(`${server.url}/v1/nope`, { method: "POST" })
    expect(unknownPath.status).toBe(404)
    expect(server.requests()).toHaveLength(6)
    server.reset()
    expect(server.requests()).toHaveLength(0)
  })
})

describe("FakeProvider / scoped", () => {
  let url = ""
  effectIt.scopedLive("serves within the scope and closes with it", () =>
    Effect.gen(function* () {
      const scopedServer = yield* FakeProvider.scoped({ replies: [{ text: "from scope" }] })
      url = scopedServer.url
      const client = new Anthropic({ baseURL: scopedServer.url, apiKey: "test", maxRetries: 0 })
      const message = yield* Effect.promise(() =>
        client.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: "user", content: "hi" }] }),
      )
      expect(message.content).toEqual([{ type: "text", text: "from scope", citations: null }])
    }),
  )
  it("refuses connections once the scope has closed", async () => {
    expect(url).not.toBe("")
    await expect(fetch(`${url}/_requests`)).rejects.toThrow()
  })
})
