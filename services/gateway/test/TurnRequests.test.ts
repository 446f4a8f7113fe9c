import type { Turn } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import type { PromptRequest } from "../src/Port.ts"
import * as TurnRequests from "../src/TurnRequests.ts"

const key = { tenant: "gwrun", session: "s1", from: "header", side: false } as const
const req = (api: PromptRequest["api"], body: Record<string, unknown>, model = "m"): PromptRequest => ({ api, body, key, model })

const reply = (request: Record<string, unknown>, reasoning?: Turn.Report["reasoning"]): Turn.TurnReply =>
  ({ ok: true, turnId: "t1", request, report: { tokens: { total: 1 }, ...(reasoning === undefined ? {} : { reasoning }) } }) as never

describe("TurnRequests.toTurn", () => {
  it("Anthropic: system blocks as sections with their TTL, cache_control stripped, server tools left out, whole history", () => {
    const turn = TurnRequests.toTurn(
      req("anthropic-messages", {
        model: "claude-sonnet-4-5",
        max_tokens: 512,
        system: [
          { type: "text", text: "be brief", cache_control: { type: "ephemeral", ttl: "1h" } },
          { type: "text", text: "more" },
        ],
        tools: [
          { name: "read", input_schema: { type: "object" }, cache_control: { type: "ephemeral" } },
          { type: "web_search_20250305", name: "web_search" },
        ],
        messages: [{ role: "user", content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral" } }] }],
      }),
    ) as Record<string, unknown>
    expect(turn).toMatchObject({
      format: "anthropic",
      model: { provider: "anthropic", name: "m", maxOutputTokens: 512 },
      history: "client",
      system: [
        { id: "system-0", text: "be brief", cache: "1h" },
        { id: "system-1", text: "more", cache: "5m" },
      ],
      tools: [{ name: "read", input_schema: { type: "object" } }],
      // in clientHistory: a worker of an earlier release refuses it rather than storing it all again
      clientHistory: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
    })
    expect(turn).not.toHaveProperty("messages")
    expect(JSON.stringify(turn)).not.toContain("cache_control")
    expect(JSON.stringify(turn)).not.toContain("web_search")
  })

  it("OpenAI chat: leading system and developer messages become the system, the rest the messages", () => {
    const turn = TurnRequests.toTurn(
      req("openai-chat", {
        messages: [
          { role: "developer", content: "rules" },
          {
            role: "system",
            content: [
              { type: "text", text: "a" },
              { type: "text", text: "b" },
            ],
          },
          { role: "user", content: "q" },
          { role: "system", content: "later" },
        ],
        tools: [
          { type: "custom", name: "grammar" },
          { type: "function", function: { name: "f" } },
        ],
        max_completion_tokens: 99,
      }),
    ) as Record<string, unknown>
    expect(turn.system).toEqual([
      { id: "system-0", text: "rules" },
      { id: "system-1", text: "a\nb" },
    ])
    expect(turn.clientHistory).toEqual([
      { role: "user", content: "q" },
      { role: "system", content: "later" },
    ])
    expect(turn.tools).toEqual([{ type: "function", function: { name: "f" } }])
    expect(turn.model).toEqual({ provider: "openai", name: "m", maxOutputTokens: 99 })
  })

  it("Responses: a string input is one user message; server-held history is declined", () => {
    const turn = TurnRequests.toTurn(req("openai-responses", { input: "hello", instructions: "x" })) as Record<string, unknown>
    expect(turn).toMatchObject({
      format: "openai-responses",
      instructions: "x",
      clientHistory: [{ type: "message", role: "user", content: "hello" }],
    })
    expect(() => TurnRequests.toTurn(req("openai-responses", { input: "x", previous_response_id: "resp_1" }))).toThrow(
      TurnRequests.Declined,
    )
  })

  it("Gemini: the path's model without models/, generationConfig's limit; a side request is a turn of its own session; cachedContent is declined", () => {
    const turn = TurnRequests.toTurn(
      req(
        "gemini",
        { contents: [{ role: "user", parts: [{ text: "q" }] }], generationConfig: { maxOutputTokens: 64 } },
        "models/gemini-2.5-flash",
      ),
    ) as Record<string, unknown>
    expect(turn.model).toEqual({ provider: "google", name: "gemini-2.5-flash", maxOutputTokens: 64 })
    const side = { ...req("gemini", { contents: [] }), key: { ...key, side: true } }
    expect(TurnRequests.toTurn(side)).toMatchObject({ format: "gemini", history: "client" })
    expect(() => TurnRequests.toTurn(req("gemini", { contents: [], cachedContent: "cachedContents/x" }))).toThrow(TurnRequests.Declined)
  })

  it("the turn id is the same for the same body (a client's retry) and differs otherwise", () => {
    const a = req("openai-chat", { messages: [{ role: "user", content: "q" }] })
    const b = req("openai-chat", { messages: [{ role: "user", content: "q2" }] })
    expect(TurnRequests.turnIdOf(a)).toBe(TurnRequests.turnIdOf({ ...a, body: { ...a.body } }))
    expect(TurnRequests.turnIdOf(a)).not.toBe(TurnRequests.turnIdOf(b))
    expect(TurnRequests.turnIdOf(a)).toMatch(/^gw-[0-9a-f]{40}$/)
  })
})

describe("TurnRequests.toReply", () => {
  it("keeps the client's own output limit and stream, appends the tools ctxd does not model, asks for a binding's beta", () => {
    const request = req("anthropic-messages", {
      max_tokens: 100,
      stream: true,
      thinking: { type: "enabled", budget_tokens: 1024 },
      tools: [{ type: "web_search_20250305", name: "web_search" }],
      messages: [],
    })
    const out = TurnRequests.toReply(
      request,
      reply(
        {
          model: "m",
          max_tokens: 8192,
          messages: [{ role: "user", content: "x" }],
          tools: [{ name: "read", input_schema: {} }],
          thinking: { block_binding: { prefix_mismatch_behavior: "drop_block" } },
        },
        { blockBinding: { prefixMismatchBehavior: "drop_block", betaHeader: "binding-2026" } } as never,
      ),
    )
    expect(out.body).toEqual({
      messages: [{ role: "user", content: "x" }],
      tools: [
        { name: "read", input_schema: {} },
        { type: "web_search_20250305", name: "web_search" },
      ],
      thinking: { type: "enabled", budget_tokens: 1024, block_binding: { prefix_mismatch_behavior: "drop_block" } },
    })
    expect(out.headers).toEqual({ "anthropic-beta": "binding-2026" })
    expect(out.turnId).toBe("t1")
  })

  it("Gemini: the SDK-shaped reply as the REST body, the client's generationConfig left alone", () => {
    const out = TurnRequests.toReply(
      req("gemini", { contents: [], generationConfig: { temperature: 0 } }),
      reply({
        model: "g",
        contents: [{ role: "user", parts: [{ text: "x" }] }],
        config: { systemInstruction: { parts: [{ text: "s" }] }, maxOutputTokens: 8 },
      }),
    )
    expect(out.body).toEqual({ contents: [{ role: "user", parts: [{ text: "x" }] }], systemInstruction: { parts: [{ text: "s" }] } })
  })
})
