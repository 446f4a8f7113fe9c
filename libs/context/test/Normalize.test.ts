import type { Anthropic, OpenAI, Turn } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as Normalize from "../src/Normalize.ts"
import { calls, result, results, user } from "./Helpers.ts"

describe("Normalize.fromAnthropic", () => {
  it("turns string content into one text part", () => {
    expect(Normalize.fromAnthropic([{ role: "user", content: "hi" }])).toEqual([{ role: "user", parts: [{ type: "text", text: "hi" }] }])
  })

  it("splits a user message into a tool message (all results, in order) and a user message", () => {
    const messages: Array<Anthropic.Message> = [
      {
        role: "assistant",
        content: [
          { type: "text", text: "checking both" },
          { type: "tool_use", id: "a", name: "get", input: { x: 1 }, cache_control: { type: "ephemeral" } },
          { type: "tool_use", id: "b", name: "get", input: { x: 2 } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "a", content: "one" },
          { type: "tool_result", tool_use_id: "b", is_error: true, cache_control: { type: "ephemeral" } },
          { type: "text", text: "and hurry" },
        ],
      },
    ]
    const out = Normalize.fromAnthropicIndexed(messages)
    expect(out).toEqual([
      {
        sourceIndex: 0,
        message: {
          role: "assistant",
          parts: [
            { type: "text", text: "checking both" },
            { type: "tool_call", id: "a", name: "get", input: { x: 1 } },
            { type: "tool_call", id: "b", name: "get", input: { x: 2 } },
          ],
        },
      },
      {
        sourceIndex: 1,
        message: {
          role: "tool",
          parts: [
            { type: "tool_result", callId: "a", content: [{ type: "text", text: "one" }], isError: false },
            { type: "tool_result", callId: "b", content: [], isError: true },
          ],
        },
      },
      { sourceIndex: 1, message: { role: "user", parts: [{ type: "text", text: "and hurry" }] } },
    ])
    expect(JSON.stringify(out)).not.toContain("cache_control")
  })

  it("does not add a user message when a message has only tool results", () => {
    const out = Normalize.fromAnthropic([{ role: "user", content: [{ type: "tool_result", tool_use_id: "a" }] }])
    expect(out.map((m) => m.role)).toEqual(["tool"])
  })

  it("keeps images with a neutral source, in results too, and unknown blocks as opaque parts", () => {
    const out = Normalize.fromAnthropic([
      {
        role: "user",
        content: [
          {
            type: "tool_result",
            tool_use_id: "a",
            content: [
              { type: "text", text: "see" },
              { type: "image", source: { type: "url", url: "https://x/y.png" } },
            ],
          },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } },
        ],
      },
      {
        role: "assistant",
        content: [{ type: "thinking", thinking: "hmm", signature: "sig", cache_control: { type: "ephemeral" } }],
      },
    ])
    expect(out[0]!.parts[0]).toEqual({
      type: "tool_result",
      callId: "a",
      isError: false,
      content: [
        { type: "text", text: "see" },
        { type: "image", source: { kind: "url", url: "https://x/y.png" } },
      ],
    })
    expect(out[1]!.parts).toEqual([{ type: "image", source: { kind: "base64", mediaType: "image/png", data: "AAAA" } }])
    expect(out[2]!.parts).toEqual([{ type: "opaque", format: "anthropic", block: { type: "thinking", thinking: "hmm", signature: "sig" } }])
  })
})

describe("Normalize.fromOpenAI", () => {
  it("maps system/developer, user, assistant with parallel calls, refusal and tool messages", () => {
    const messages: Array<OpenAI.Message> = [
      { role: "system", content: "be nice" },
      { role: "developer", content: [{ type: "text", text: "dev" }], name: "ops" },
      {
        role: "user",
        content: [
          { type: "text", text: "look" },
          { type: "image_url", image_url: { url: "data:image/png;base64,QUJD", detail: "low" } },
          { type: "input_audio", input_audio: { data: "x", format: "wav" } },
        ],
      },
      {
        role: "assistant",
        content: "on it",
        refusal: null,
        tool_calls: [
          { id: "c1", type: "function", function: { name: "a", arguments: '{"k": 1}' } },
          { id: "c2", type: "function", function: { name: "b", arguments: "not json" } },
          { id: "c3", type: "function", function: { name: "c", arguments: "[1,2]" } },
        ],
      },
      { role: "tool", tool_call_id: "c1", content: "r1" },
      { role: "tool", tool_call_id: "c2", content: [{ type: "text", text: "r2" }] },
      { role: "assistant", content: null, refusal: "no" },
    ]
    const out = Normalize.fromOpenAI(messages)
    expect(out[0]).toEqual({ role: "system", parts: [{ type: "text", text: "be nice" }] })
    expect(out[1]).toEqual({ role: "system", developer: true, name: "ops", parts: [{ type: "text", text: "dev" }] })
    expect(out[2]!.parts).toEqual([
      { type: "text", text: "look" },
      { type: "image", detail: "low", source: { kind: "base64", mediaType: "image/png", data: "QUJD" } },
      { type: "opaque", format: "openai", block: { type: "input_audio", input_audio: { data: "x", format: "wav" } } },
    ])
    expect(out[3]!.parts).toEqual([
      { type: "text", text: "on it" },
      { type: "tool_call", id: "c1", name: "a", input: { k: 1 }, arguments: '{"k": 1}' },
      { type: "tool_call", id: "c2", name: "b", input: {}, arguments: "not json" },
      { type: "tool_call", id: "c3", name: "c", input: {}, arguments: "[1,2]" },
    ])
    expect(out[4]).toEqual({ role: "tool", parts: [result("c1", "r1")] })
    expect(out[5]).toEqual({ role: "tool", parts: [result("c2", "r2")] })
    expect(out[6]).toEqual({
      role: "assistant",
      parts: [{ type: "opaque", format: "openai", block: { type: "refusal", refusal: "no" } }],
    })
  })

  it("keeps one source index per message", () => {
    const out = Normalize.fromOpenAIIndexed([
      { role: "user", content: "a" },
      { role: "tool", tool_call_id: "x", content: "b" },
    ])
    expect(out.map((n) => n.sourceIndex)).toEqual([0, 1])
  })
})

describe("Normalize.tools and system", () => {
  it("maps tools of both formats", () => {
    expect(
      Normalize.tools("anthropic", [
        {
          name: "get_issue",
          description: "d",
          input_schema: { type: "object" },
          toolset: "issues",
          annotations: { readOnlyHint: true },
          cache_control: { type: "ephemeral" },
        },
      ]),
    ).toEqual([{ name: "get_issue", description: "d", inputSchema: { type: "object" }, toolset: "issues", readOnly: true }])
    expect(
      Normalize.tools("openai", [{ type: "function", function: { name: "f", strict: true }, annotations: { readOnlyHint: false } }]),
    ).toEqual([{ name: "f", inputSchema: { type: "object", properties: {} }, readOnly: false, extra: { strict: true } }])
    expect(Normalize.tools("openai", undefined)).toEqual([])
  })

  it("maps the system field", () => {
    expect(Normalize.system("be brief")).toEqual([{ id: "system", text: "be brief", cache: "5m" }])
    expect(Normalize.system("")).toEqual([])
    expect(Normalize.system(undefined)).toEqual([])
    expect(
      Normalize.system([
        { id: "a", text: "A", cache: "1h" },
        { id: "b", text: "B" },
      ]),
    ).toEqual([
      { id: "a", text: "A", cache: "1h" },
      { id: "b", text: "B", cache: "5m" },
    ])
  })

  it("normalizes a whole request", () => {
    const req: Turn.TurnRequest = {
      turnId: "t",
      format: "anthropic",
      model: { provider: "anthropic", name: "claude-x" },
      system: "s",
      messages: [
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "q" },
            { type: "text", text: "x" },
          ],
        },
      ],
    }
    const out = Normalize.request(req)
    expect(out.system).toHaveLength(1)
    expect(out.tools).toEqual([])
    expect(out.messages.map((n) => [n.message.role, n.sourceIndex])).toEqual([
      ["tool", 0],
      ["user", 0],
    ])
  })
})

describe("Normalize.findPairingError", () => {
  const none = new Set<string>()

  it("accepts results for known calls and for calls earlier in the turn, and unanswered calls", () => {
    expect(Normalize.findPairingError(new Set(["k"]), none, [results("k"), calls("a", "b"), results("a")])).toBeUndefined()
  })

  it("names the request index of a result for an unknown call", () => {
    const incoming = Normalize.fromAnthropicIndexed([
      { role: "user", content: "hi" },
      { role: "assistant", content: [{ type: "tool_use", id: "a", name: "t", input: {} }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "a" }] },
      { role: "assistant", content: "ok" },
      {
        role: "user",
        content: [
          { type: "text", text: "note" },
          { type: "tool_result", tool_use_id: "x" },
        ],
      },
    ])
    expect(Normalize.findPairingError(none, none, incoming)).toEqual({
      index: 4,
      sourceIndex: 4,
      message: "messages[4]: tool result for unknown tool call 'x'",
    })
  })

  it("uses the source index when a source message was split", () => {
    const incoming = Normalize.fromAnthropicIndexed([
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "k" },
          { type: "text", text: "t" },
        ],
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "z" }] },
    ])
    const error = Normalize.findPairingError(new Set(["k"]), none, incoming)
    expect(error).toMatchObject({ index: 2, sourceIndex: 1 })
    expect(error?.message).toBe("messages[1]: tool result for unknown tool call 'z'")
  })

  it("rejects a second result for an answered call, in history or in the turn", () => {
    expect(Normalize.findPairingError(new Set(["k"]), new Set(["k"]), [user("u"), results("k")])?.message).toBe(
      "messages[1]: second tool result for tool call 'k'",
    )
    expect(Normalize.findPairingError(none, none, [calls("a"), results("a"), results("a")])?.message).toBe(
      "messages[2]: second tool result for tool call 'a'",
    )
  })

  it("rejects a call id that is still waiting for its result", () => {
    expect(Normalize.findPairingError(new Set(["a"]), none, [calls("a")])?.message).toBe(
      "messages[0]: duplicate tool call id 'a' (an earlier call with this id has no result yet)",
    )
    expect(Normalize.findPairingError(none, none, [user("u"), calls("b", "b")])?.message).toBe(
      "messages[1]: duplicate tool call id 'b' (an earlier call with this id has no result yet)",
    )
    expect(Normalize.findPairingError(none, none, [calls("b"), calls("b")])?.sourceIndex).toBe(1)
  })

  it("accepts a call id reused after its earlier call was answered (as real agents do)", () => {
    expect(Normalize.findPairingError(new Set(["a"]), new Set(["a"]), [calls("a"), results("a")])).toBeUndefined()
    expect(Normalize.findPairingError(none, none, [calls("a"), results("a"), calls("a"), results("a")])).toBeUndefined()
    expect(Normalize.findPairingError(none, none, [calls("a"), results("a"), calls("a"), results("a"), results("a")])?.message).toBe(
      "messages[4]: second tool result for tool call 'a'",
    )
  })

  it("tracks reused ids across turns with recordPairing", () => {
    const known = new Set<string>()
    const answered = new Set<string>()
    const turn1 = [user("u"), calls("a"), results("a")]
    expect(Normalize.findPairingError(known, answered, turn1)).toBeUndefined()
    for (const m of turn1) Normalize.recordPairing(known, answered, m)
    // The call with the reused id arrives in one turn, its result in the next.
    const turn2 = [calls("a")]
    expect(Normalize.findPairingError(known, answered, turn2)).toBeUndefined()
    for (const m of turn2) Normalize.recordPairing(known, answered, m)
    expect(answered.has("a")).toBe(false)
    expect(Normalize.findPairingError(known, answered, [results("a")])).toBeUndefined()
    expect(Normalize.findPairingError(known, answered, [calls("a")])?.message).toContain("duplicate tool call id 'a'")
  })

  it("rejects a result that comes before its call", () => {
    expect(Normalize.findPairingError(none, none, [results("a"), calls("a")])?.message).toBe(
      "messages[0]: tool result for unknown tool call 'a'",
    )
  })
})
