import type { Conversation } from "@ctxd/contracts"
import { createHash } from "node:crypto"
import { describe, expect, it } from "vitest"
import * as CacheLayout from "../src/CacheLayout.ts"
import * as RenderOpenAI from "../src/providers/openai-chat/Render.ts"
import { assistant, call, calls, gpt, openaiPairingProblems, result, results, sys, text, user } from "./Helpers.ts"

type Json = Record<string, unknown>

const render = (
  messages: ReadonlyArray<Conversation.Message>,
  system: ReadonlyArray<Conversation.SystemSection> = [],
  tools: ReadonlyArray<Conversation.Tool> = [],
) => RenderOpenAI.render({ tenant: "acme", session: "s1", model: gpt, system, tools, messages })

describe("RenderOpenAI.render", () => {
  it("joins system sections into one leading system message and keeps pinned ones in place", () => {
    const { body } = render(
      [user("hi"), { ...sys("dev note"), developer: true }, sys("plain")],
      [
        { id: "a", text: "A", cache: "1h" },
        { id: "e", text: " ", cache: "5m" },
        { id: "b", text: "B", cache: "none" },
      ],
    )
    expect(body["messages"]).toEqual([
      { role: "system", content: "A\n\nB" },
      { role: "user", content: "hi" },
      { role: "developer", content: "dev note" },
      { role: "system", content: "plain" },
    ])
    expect(body["model"]).toBe("gpt-4o")
    expect(body["max_completion_tokens"]).toBe(16_384)
  })

  it("renders tool calls (raw arguments kept) and one tool message per result", () => {
    const withRaw: Conversation.ToolCallPart = { ...call("a", "get", { k: 1 }), arguments: '{"k":  1}' }
    const { body } = render([
      user("q"),
      { role: "assistant", parts: [withRaw, call("b", "put", { v: "é" })] },
      { role: "tool", parts: [result("a", "one"), { type: "tool_result", callId: "b", content: [text("bad")], isError: true }] },
      assistant("done"),
    ])
    const messages = body["messages"] as Array<Json>
    expect(messages[1]).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "a", type: "function", function: { name: "get", arguments: '{"k":  1}' } },
        { id: "b", type: "function", function: { name: "put", arguments: '{"v":"é"}' } },
      ],
    })
    expect(messages[2]).toEqual({ role: "tool", tool_call_id: "a", content: "one" })
    expect(messages[3]).toEqual({ role: "tool", tool_call_id: "b", content: "[error] bad" })
    expect(openaiPairingProblems(body)).toEqual([])
  })

  it("renders images as image_url parts (base64 as data URLs) and as notes in tool messages", () => {
    const image: Conversation.ImagePart = { type: "image", source: { kind: "base64", mediaType: "image/png", data: "QQ" }, detail: "high" }
    const { body } = render([
      { role: "user", parts: [text("see"), image] },
      calls("a"),
      { role: "tool", parts: [{ type: "tool_result", callId: "a", content: [text("x"), image], isError: false }] },
    ])
    const messages = body["messages"] as Array<Json>
    expect(messages[0]!["content"]).toEqual([
      { type: "text", text: "see" },
      { type: "image_url", image_url: { url: "data:image/png;base64,QQ", detail: "high" } },
    ])
    expect(messages[2]!["content"]).toBe("x\n[image omitted]")
  })

  it("renders a refusal back into its field and drops Anthropic thinking", () => {
    const { body } = render([
      user("q"),
      {
        role: "assistant",
        parts: [
          { type: "opaque", format: "anthropic", block: { type: "thinking", thinking: "hm" } },
          { type: "opaque", format: "openai", block: { type: "refusal", refusal: "no" } },
        ],
      },
    ])
    expect((body["messages"] as Array<Json>)[1]).toEqual({ role: "assistant", content: "", refusal: "no" })
  })

  it("sorts tools by name and keeps strict", () => {
    const { body } = render(
      [user("q")],
      [],
      [
        { name: "b", inputSchema: { type: "object" }, extra: { strict: true } },
        { name: "a", description: "first", inputSchema: null },
      ],
    )
    expect(body["tools"]).toEqual([
      { type: "function", function: { name: "a", description: "first", parameters: { type: "object", properties: {} } } },
      { type: "function", function: { name: "b", parameters: { type: "object" }, strict: true } },
    ])
  })

  it("derives a stable prompt_cache_key from tenant and session", () => {
    const a = render([user("x")])
    const b = render([user("y"), assistant("z")])
    const expected = `ctxd-${createHash("sha256").update("acme/s1").digest("hex").slice(0, 32)}`
    expect(a.promptCacheKey).toBe(expected)
    expect(a.body["prompt_cache_key"]).toBe(expected)
    expect(b.promptCacheKey).toBe(expected)
    expect(CacheLayout.promptCacheKey("acme", "s2")).not.toBe(expected)
    expect(expected).toMatch(/^ctxd-[0-9a-f]{32}$/)
  })

  it("renders results of several tool messages in order", () => {
    const { body } = render([user("q"), calls("a", "b"), results("a"), results("b")])
    expect((body["messages"] as Array<Json>).slice(2).map((m) => m["tool_call_id"])).toEqual(["a", "b"])
  })
})
