// End-to-end: a provider compaction (an Anthropic `compaction` block, an OpenAI
// Responses `compaction` item) arriving in a session's history, through a real
// worker on the real NATS and Postgres: the turns after it send only what
// follows it, the report says so, and the official SDKs accept the bodies
// against the fake provider.
import Anthropic from "@anthropic-ai/sdk"
import { FakeProvider } from "@ctxd/testing"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
let provider: FakeProvider.FakeProviderServer
let anthropic: Anthropic
let openai: OpenAI
beforeAll(async () => {
  h = await Harness.start()
  provider = await FakeProvider.start()
  anthropic = new Anthropic({ baseURL: provider.url, apiKey: "test", maxRetries: 0 })
  openai = new OpenAI({ baseURL: provider.openaiBaseURL, apiKey: "test", maxRetries: 0 })
})
afterAll(async () => {
  await h?.close()
  await provider?.close()
})

const BETA = "compact-2026-01-12"

describe("provider compaction over NATS", () => {
  it("Anthropic: after a compaction block only what follows it is sent, the block first", async () => {
    const subject = h.turnSubject("acme", "pc-anthropic")
    const turn = (turnId: string, messages: unknown[]) =>
      h.request(subject, {
        turnId,
        format: "anthropic",
        model: { provider: "anthropic", name: "claude-sonnet-4-5" },
        system: "You are a careful coding agent.",
        tools: [
          { name: "read_file", description: "Read a file", input_schema: { type: "object", properties: { path: { type: "string" } } } },
        ],
        messages,
      })
    const first = await turn("a1", [{ role: "user", content: "Refactor the parser (task T-17)." }])
    expect(first.ok).toBe(true)
    const second = await turn("a2", [
      { role: "assistant", content: [{ type: "tool_use", id: "tu_1", name: "read_file", input: { path: "parser.ts" } }] },
      {
        role: "user",
        content: [{ type: "tool_result", tool_use_id: "tu_1", content: "export const parse = () => {} // old-parser-body" }],
      },
    ])
    expect(JSON.stringify(second.request)).toContain("old-parser-body")
    expect(second.report.providerCompaction).toBeUndefined()

    const block = {
      type: "compaction",
      content: "Task T-17: parser read; next: split the lexer.",
      encrypted_content: "meta-1",
      signature: "sig-1",
    }
    const third = await turn("a3", [
      {
        role: "assistant",
        content: [
          { ...block, cache_control: { type: "ephemeral" } },
          { type: "text", text: "I will split the lexer next." },
        ],
      },
      { role: "user", content: "Go ahead." },
    ])
    expect(third.ok).toBe(true)
    const messages = third.request.messages as Array<{ role: string; content: Array<Record<string, unknown>> }>
    expect(messages[0]!.role).toBe("assistant")
    expect(messages[0]!.content[0]).toEqual(block)
    const body = JSON.stringify(third.request)
    expect(body).not.toContain("old-parser-body")
    expect(body).not.toContain("T-17)")
    expect(body).toContain("Go ahead.")
    expect(third.report.providerCompaction).toEqual({ format: "anthropic", seq: 4, notSent: 3, summarySuperseded: false })

    const fourth = await turn("a4", [
      { role: "assistant", content: [{ type: "text", text: "Done: the lexer is split." }] },
      { role: "user", content: "Now the tests." },
    ])
    const later = JSON.stringify(fourth.request)
    expect(later).not.toContain("old-parser-body")
    expect(later).toContain("Now the tests.")
    expect((fourth.request.messages as Array<{ content: Array<unknown> }>)[0]!.content[0]).toEqual(block)
    const reply = await anthropic.beta.messages.create({
      ...fourth.request,
      betas: [BETA],
    } as unknown as Anthropic.Beta.Messages.MessageCreateParamsNonStreaming)
    expect(reply.type).toBe("message")
    expect(reply.usage.input_tokens + (reply.usage.cache_read_input_tokens ?? 0) + (reply.usage.cache_creation_input_tokens ?? 0)).toBe(
      FakeProvider.countRequestTokens("anthropic", fourth.request),
    )
  })

  it("OpenAI Responses: after a compaction item only what follows it is sent, the item verbatim", async () => {
    const subject = h.turnSubject("acme", "pc-responses")
    const turn = (turnId: string, input: unknown[]) =>
      h.request(subject, {
        turnId,
        format: "openai-responses",
        model: { provider: "openai", name: "gpt-4.1" },
        instructions: "You are a careful coding agent.",
        tools: [{ type: "function", name: "read_file", parameters: { type: "object", properties: { path: { type: "string" } } } }],
        input,
      })
    await turn("r1", [{ type: "message", role: "user", content: "Refactor the parser (task T-18)." }])
    await turn("r2", [
      { type: "function_call", call_id: "call_1", name: "read_file", arguments: '{"path":"parser.ts"}' },
      { type: "function_call_output", call_id: "call_1", output: "old-parser-body" },
    ])
    const item = { type: "compaction", id: "cmp_1", encrypted_content: "gAAAAB-encrypted-state" }
    const third = await turn("r3", [item, { type: "message", role: "user", content: "Go ahead." }])
    expect(third.ok).toBe(true)
    expect(third.request.input).toEqual([item, { type: "message", role: "user", content: "Go ahead." }])
    expect(third.report.providerCompaction).toEqual({ format: "openai-responses", seq: 4, notSent: 3, summarySuperseded: false })

    const fourth = await turn("r4", [
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Done: the lexer is split." }] },
      { type: "message", role: "user", content: "Now the tests." },
    ])
    const input = fourth.request.input as Array<Record<string, unknown>>
    expect(input[0]).toEqual(item)
    expect(JSON.stringify(input)).not.toContain("old-parser-body")
    const response = await openai.responses.create(fourth.request as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    expect(response.status).toBe("completed")
    expect(response.usage?.input_tokens).toBe(FakeProvider.countRequestTokens("openai-responses", fourth.request))

    // a malformed compaction item is refused like any malformed input item
    const bad = await turn("r5", [{ type: "compaction" }, { type: "message", role: "user", content: "hi" }])
    expect(bad.ok).toBe(false)
  })

  it("a session that switches format: the other format's compaction is no boundary and is dropped", async () => {
    const subject = h.turnSubject("acme", "pc-switch")
    await h.request(subject, {
      turnId: "s1",
      format: "openai-responses",
      model: { provider: "openai", name: "gpt-4.1" },
      input: [
        { type: "message", role: "user", content: "Refactor the parser (task T-19)." },
        { type: "compaction", encrypted_content: "gAAAAB-encrypted-state" },
        { type: "message", role: "user", content: "Go ahead." },
      ],
    })
    const switched = await h.request(subject, {
      turnId: "s2",
      format: "anthropic",
      model: { provider: "anthropic", name: "claude-sonnet-4-5" },
      messages: [
        { role: "assistant", content: "On it." },
        { role: "user", content: "Status?" },
      ],
    })
    expect(switched.ok).toBe(true)
    const body = JSON.stringify(switched.request)
    expect(body).toContain("task T-19")
    expect(body).not.toContain("compaction")
    expect(switched.report.providerCompaction).toBeUndefined()
  })
})
