import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as Turn from "../src/Turn.ts"

const decode = Schema.decodeUnknownEither(Turn.TurnRequest)

describe("TurnRequest", () => {
  it("accepts an Anthropic request with tool use, tool results (is_error), images and thinking blocks", () => {
    const result = decode({
      turnId: "t1",
      format: "anthropic",
      model: { provider: "anthropic", name: "claude-sonnet-4-5" },
      system: [{ id: "policy", text: "Be brief.", cache: "1h" }],
      tools: [{ name: "get_weather", input_schema: { type: "object" }, toolset: "weather", annotations: { readOnlyHint: true } }],
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "hi" },
            { type: "image", source: { type: "url", url: "https://x/y.png" } },
          ],
        },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "hmm", signature: "sig" },
            { type: "tool_use", id: "c1", name: "get_weather", input: { city: "Paris" } },
          ],
        },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "c1", content: "boom", is_error: true }] },
      ],
    })
    expect(Either.isRight(result)).toBe(true)
  })

  it("accepts an OpenAI request with parallel tool calls, tool role and developer messages", () => {
    const result = decode({
      turnId: "t1",
      format: "openai",
      model: { provider: "openai", name: "gpt-4o" },
      messages: [
        { role: "developer", content: "rules" },
        { role: "user", content: "hi" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "a", type: "function", function: { name: "f", arguments: "{}" } },
            { id: "b", type: "function", function: { name: "g", arguments: '{"x":1}' } },
          ],
        },
        { role: "tool", tool_call_id: "a", content: "1" },
        { role: "tool", tool_call_id: "b", content: [{ type: "text", text: "2" }] },
      ],
    })
    expect(Either.isRight(result)).toBe(true)
  })

  it("rejects a malformed tool_use block instead of passing it through", () => {
    const result = decode({
      turnId: "t1",
      format: "anthropic",
      model: { provider: "anthropic", name: "claude" },
      messages: [{ role: "assistant", content: [{ type: "tool_use", name: "f", input: {} }] }],
    })
    expect(Either.isLeft(result)).toBe(true)
  })

  it("rejects messages of the other format", () => {
    const result = decode({
      turnId: "t1",
      format: "anthropic",
      model: { provider: "anthropic", name: "claude" },
      messages: [{ role: "tool", tool_call_id: "a", content: "x" }],
    })
    expect(Either.isLeft(result)).toBe(true)
  })
})

describe("TurnRequest.system: a workspace bundle, beside the old shapes", () => {
  const withSystem = (system: unknown) =>
    decode({
      turnId: "t1",
      format: "openai",
      model: { provider: "openai", name: "gpt-4o" },
      system,
      messages: [{ role: "user", content: "hi" }],
    })

  it("decodes a string, a list of sections and a workspace reference; the old shapes as before", () => {
    expect(Either.getOrThrow(withSystem("Be brief.")).system).toBe("Be brief.")
    expect(Either.getOrThrow(withSystem([{ id: "a", text: "A" }])).system).toEqual([{ id: "a", text: "A" }])
    const ref = Either.getOrThrow(withSystem({ workspace: "acme-bot", extras: ["TOOLS", "HEARTBEAT.md"], cache: "1h" })).system
    expect(ref).toEqual({ workspace: "acme-bot", extras: ["TOOLS", "HEARTBEAT.md"], cache: "1h" })
    expect(Turn.isWorkspaceRef(ref)).toBe(true)
    expect(Turn.isWorkspaceRef("Be brief.")).toBe(false)
    expect(Turn.isWorkspaceRef([{ id: "a", text: "A" }])).toBe(false)
  })

  it("refuses names that could leave the scope's directory, and more than 16 extras", () => {
    for (const system of [
      { workspace: "../etc" },
      { workspace: "a/b" },
      { workspace: "" },
      { workspace: "acme-bot", extras: ["../SOUL"] },
      { workspace: "acme-bot", extras: ["notes/x.md"] },
      { workspace: "acme-bot", extras: ["x.txt"] },
      { workspace: "acme-bot", extras: [".md"] },
      { workspace: "acme-bot", extras: Array.from({ length: Turn.MAX_WORKSPACE_EXTRAS + 1 }, (_, i) => `X${i}`) },
    ]) {
      expect(Either.isLeft(withSystem(system)), JSON.stringify(system)).toBe(true)
    }
  })
})
