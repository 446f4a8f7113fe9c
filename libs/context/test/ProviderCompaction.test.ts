/**
 * Provider compactions in a history: recognized (one classification), kept
 * verbatim through normalization, rendered back verbatim in their own format
 * (the Anthropic block may open `messages`) and dropped in another format.
 */
import { type Anthropic, type Conversation, OpenAIResponses } from "@ctxd/contracts"
import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as Normalize from "../src/Normalize.ts"
import * as ProviderCompaction from "../src/ProviderCompaction.ts"
import * as RenderAnthropic from "../src/providers/anthropic/Render.ts"
import * as RenderOpenAI from "../src/providers/openai-chat/Render.ts"
import * as RenderResponses from "../src/providers/openai-responses/Render.ts"
import { assistant, claude, gpt, user } from "./Helpers.ts"

type Json = Record<string, unknown>

const decodeItems = Schema.decodeUnknownEither(Schema.Array(OpenAIResponses.Item))

const anthropicBlock = {
  type: "compaction",
  content: "The user asked to refactor the parser; steps 1-3 are done.",
  encrypted_content: "opaque-metadata",
  signature: "sig-1",
}
const responsesItem = { type: "compaction", id: "cmp_1", encrypted_content: "gAAAAB-encrypted" }

const anthropicCompaction: Conversation.Message = {
  role: "assistant",
  parts: [
    { type: "opaque", format: "anthropic", block: anthropicBlock },
    { type: "text", text: "Continuing." },
  ],
}
const responsesCompaction: Conversation.Message = {
  role: "assistant",
  parts: [{ type: "opaque", format: "openai-responses", block: responsesItem }],
}

describe("ProviderCompaction: classification", () => {
  it("recognizes each provider's compaction by format and type, nothing else", () => {
    expect(ProviderCompaction.formatOf(anthropicCompaction.parts[0]!)).toBe("anthropic")
    expect(ProviderCompaction.formatOf(responsesCompaction.parts[0]!)).toBe("openai-responses")
    expect(ProviderCompaction.formatOf({ type: "opaque", format: "openai", block: { type: "compaction" } })).toBeUndefined()
    expect(ProviderCompaction.formatOf({ type: "opaque", format: "anthropic", block: { type: "thinking" } })).toBeUndefined()
    expect(ProviderCompaction.formatOf({ type: "text", text: "compaction" })).toBeUndefined()
    expect(ProviderCompaction.isCompaction(anthropicCompaction.parts[0]!, "openai-responses")).toBe(false)
    expect(ProviderCompaction.isCompaction(anthropicCompaction.parts[0]!)).toBe(true)
  })

  it("the boundary is the latest message holding one of the format (any format without one)", () => {
    const history = [user("a"), anthropicCompaction, user("b"), responsesCompaction, user("c"), assistant("d")].map((message) => ({
      message,
    }))
    expect(ProviderCompaction.boundary(history, "anthropic")).toBe(1)
    expect(ProviderCompaction.boundary(history, "openai-responses")).toBe(3)
    expect(ProviderCompaction.boundary(history, "openai")).toBeUndefined()
    expect(ProviderCompaction.boundary(history)).toBe(3)
    expect(ProviderCompaction.boundary(history, "anthropic", 2)).toBeUndefined()
  })

  it("trim keeps the boundary message from its compaction on", () => {
    const merged: Conversation.Message = {
      role: "assistant",
      parts: [
        { type: "text", text: "before" },
        { type: "tool_call", id: "c1", name: "f", input: {} },
        ...responsesCompaction.parts,
        { type: "text", text: "after" },
      ],
    }
    expect(ProviderCompaction.trim(merged, "openai-responses").parts.map((p) => p.type)).toEqual(["opaque", "text"])
    expect(ProviderCompaction.trim(anthropicCompaction, "anthropic")).toBe(anthropicCompaction)
  })
})

describe("ProviderCompaction: normalization keeps it verbatim", () => {
  it("an Anthropic compaction block: an opaque part, cache_control dropped, every other field kept", () => {
    const messages: ReadonlyArray<Anthropic.Message> = [
      { role: "user", content: "Refactor the parser." },
      {
        role: "assistant",
        content: [
          { ...anthropicBlock, tool_changes: [], cache_control: { type: "ephemeral" } },
          { type: "text", text: "Continuing." },
        ],
      } as unknown as Anthropic.Message,
    ]
    const [, a] = Normalize.fromAnthropic(messages)
    expect(a!.parts[0]).toEqual({ type: "opaque", format: "anthropic", block: { ...anthropicBlock, tool_changes: [] } })
    expect(ProviderCompaction.holds(a!, "anthropic")).toBe(true)
  })

  it("a Responses compaction item: decoded by the contract, an opaque part of the assistant group", () => {
    const decoded = decodeItems([
      { type: "message", role: "user", content: "hi" },
      responsesItem,
      { type: "message", role: "user", content: "next" },
    ])
    expect(Either.isRight(decoded)).toBe(true)
    const messages = Normalize.fromResponses(Either.getOrThrow(decoded))
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "user"])
    expect(messages[1]!.parts).toEqual([{ type: "opaque", format: "openai-responses", block: responsesItem }])
    // id is optional as input
    expect(Either.isRight(decodeItems([{ type: "compaction", encrypted_content: "x" }]))).toBe(true)
  })

  it("a malformed Responses compaction item is refused", () => {
    expect(Either.isLeft(decodeItems([{ type: "compaction" }]))).toBe(true)
    expect(Either.isLeft(decodeItems([{ type: "compaction", encrypted_content: "" }]))).toBe(true)
    expect(Either.isLeft(decodeItems([{ type: "compaction", encrypted_content: 7 }]))).toBe(true)
  })
})

const base = {
  tenant: "acme",
  session: "s1",
  system: [{ id: "system", text: "You are helpful.", cache: "5m" as const }],
  tools: [],
}

describe("ProviderCompaction: rendering", () => {
  it("Anthropic: a view opening with the compaction goes out first in messages, verbatim and cacheable", () => {
    const { body } = RenderAnthropic.render({ ...base, model: claude, messages: [anthropicCompaction, user("next step please")] })
    const messages = body["messages"] as Array<Json>
    expect(messages[0]!["role"]).toBe("assistant")
    expect((messages[0]!["content"] as Array<Json>)[0]).toEqual(anthropicBlock)
    expect(JSON.stringify(body)).not.toContain(RenderAnthropic.CONTINUES)
    // a view opening with a plain assistant message still gets the user message first
    const plain = RenderAnthropic.render({ ...base, model: claude, messages: [assistant("hello"), user("hi")] }).body
    expect(((plain["messages"] as Array<Json>)[0]!["content"] as Array<Json>)[0]).toEqual({ type: "text", text: RenderAnthropic.CONTINUES })
    // the last block takes the breakpoint when the compaction is last
    const last = RenderAnthropic.render({
      ...base,
      model: claude,
      messages: [user("a"), { role: "assistant", parts: [anthropicCompaction.parts[0]!] }],
    }).body
    expect(((last["messages"] as Array<Json>)[1]!["content"] as Array<Json>)[0]).toEqual({
      ...anthropicBlock,
      cache_control: { type: "ephemeral" },
    })
  })

  it("Responses: the compaction part is its own item, verbatim, where it was", () => {
    const messages: Array<Conversation.Message> = [
      user("hi"),
      { role: "assistant", parts: [{ type: "text", text: "ok" }, ...responsesCompaction.parts, { type: "text", text: "after" }] },
      user("next"),
    ]
    const input = RenderResponses.render({ ...base, model: gpt, messages }).body["input"] as Array<Json>
    expect(input.map((i) => i["type"])).toEqual(["message", "message", "compaction", "message", "message"])
    expect(input[2]).toEqual(responsesItem)
  })

  it("another format's compaction is dropped, not turned into a note", () => {
    const anthropicBody = RenderAnthropic.render({ ...base, model: claude, messages: [user("a"), responsesCompaction, user("b")] }).body
    expect(JSON.stringify(anthropicBody)).not.toContain("compaction")
    // the message that held only it is gone, not an "(empty)" turn: the two user messages merge
    expect(anthropicBody["messages"]).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "a" },
          { type: "text", text: "b", cache_control: { type: "ephemeral" } },
        ],
      },
    ])
    const responsesBody = RenderResponses.render({ ...base, model: gpt, messages: [user("a"), anthropicCompaction, user("b")] }).body
    expect(JSON.stringify(responsesBody)).not.toContain("compaction")
    expect(JSON.stringify(responsesBody)).toContain("Continuing.")
    const chatBody = RenderOpenAI.render({
      ...base,
      model: gpt,
      messages: [user("a"), anthropicCompaction, responsesCompaction, user("b")],
    }).body
    expect(JSON.stringify(chatBody)).not.toContain("compaction")
  })
})
