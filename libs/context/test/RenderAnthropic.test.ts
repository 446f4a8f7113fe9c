import type { Conversation } from "@ctxd/contracts"
import { FakeProvider } from "@ctxd/testing"
import { describe, expect, it } from "vitest"
import * as RenderAnthropic from "../src/providers/anthropic/Render.ts"
import {
  anthropicPairingProblems,
  anthropicShapeProblems,
  assistant,
  call,
  calls,
  claude,
  result,
  results,
  sys,
  text,
  toolsCalledIn,
  user,
} from "./Helpers.ts"

const tool = (name: string): Conversation.Tool => ({ name, inputSchema: { type: "object" } })
type Json = Record<string, unknown>

const render = (
  messages: ReadonlyArray<Conversation.Message>,
  system: ReadonlyArray<Conversation.SystemSection> = [],
  tools: ReadonlyArray<Conversation.Tool> = toolsCalledIn(messages),
) => RenderAnthropic.render({ model: claude, system, tools, messages })

const ttls = (blocks: ReadonlyArray<Json>) =>
  blocks.map((b) => {
    const cc = b["cache_control"] as Json | undefined
    return cc === undefined ? "-" : ((cc["ttl"] as string | undefined) ?? "5m")
  })

describe("RenderAnthropic.render", () => {
  it("renders a body with model and max_tokens, tool results as user messages, roles alternating", () => {
    const { body, breakpoints } = render([user("hi"), calls("a", "b"), results("a"), results("b"), user("thanks"), assistant("ok")])
    expect(body["model"]).toBe("claude-sonnet-4-5")
    expect(body["max_tokens"]).toBe(8_192)
    const messages = body["messages"] as Array<Json>
    expect(messages.map((m) => m["role"])).toEqual(["user", "assistant", "user", "assistant"])
    expect((messages[2]!["content"] as Array<Json>).map((b) => b["type"])).toEqual(["tool_result", "tool_result", "text"])
    expect(anthropicPairingProblems(body)).toEqual([])
    expect(anthropicShapeProblems(body, breakpoints)).toEqual([])
    expect(breakpoints).toBe(2) // the tools and the newest block
  })

  it("renders tool results with error flags, images and no empty content", () => {
    const error: Conversation.ToolResultPart = { type: "tool_result", callId: "b", content: [text("  ")], isError: true }
    const img: Conversation.ToolResultPart = {
      type: "tool_result",
      callId: "a",
      content: [{ type: "image", source: { kind: "base64", mediaType: "image/png", data: "AA" } }],
      isError: false,
    }
    const { body } = render([user("x"), calls("a", "b"), { role: "tool", parts: [img, error] }])
    const content = (body["messages"] as Array<Json>)[2]!["content"] as Array<Json>
    expect(content[0]).toEqual({
      type: "tool_result",
      tool_use_id: "a",
      content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AA" } }],
    })
    expect(content[1]).toEqual({ type: "tool_result", tool_use_id: "b", is_error: true, cache_control: { type: "ephemeral" } })
  })

  it("drops blank text blocks and fills an emptied message with (empty)", () => {
    const { body, breakpoints } = render([user("q"), assistant(" \n "), user("")])
    const messages = body["messages"] as Array<Json>
    expect(messages[1]).toEqual({ role: "assistant", content: [{ type: "text", text: RenderAnthropic.EMPTY }] })
    expect(messages[2]!["content"]).toEqual([{ type: "text", text: RenderAnthropic.EMPTY, cache_control: { type: "ephemeral" } }])
    expect(anthropicShapeProblems(body, breakpoints)).toEqual([])
  })

  it("puts a user message first when the view starts with an assistant message, and handles an empty view", () => {
    const { body } = render([assistant("Hello, how can I help?"), user("book")])
    const messages = body["messages"] as Array<Json>
    expect(messages.map((m) => m["role"])).toEqual(["user", "assistant", "user"])
    expect(messages[0]!["content"]).toEqual([{ type: "text", text: RenderAnthropic.CONTINUES }])
    const empty = render([])
    expect(empty.body["messages"]).toEqual([
      { role: "user", content: [{ type: "text", text: RenderAnthropic.CONTINUES, cache_control: { type: "ephemeral" } }] },
    ])
  })

  it("trims trailing whitespace of a final assistant message", () => {
    const { body } = render([user("q"), assistant("The answer is ")])
    const last = (body["messages"] as Array<Json>)[1]!["content"] as Array<Json>
    expect(last[0]!["text"]).toBe("The answer is")
  })

  it("appends pinned system messages to the system blocks and merges same-role messages", () => {
    const { body } = render([sys("policy"), user("a"), user("b"), sys("later")], [{ id: "s", text: "base", cache: "none" }])
    expect((body["system"] as Array<Json>).map((b) => b["text"])).toEqual(["base", "policy", "later"])
    expect(body["messages"]).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "a" },
          { type: "text", text: "b", cache_control: { type: "ephemeral" } },
        ],
      },
    ])
  })

  it("sorts tools by name and marks the last one; places at most 4 breakpoints with 1h before 5m", () => {
    const system: Array<Conversation.SystemSection> = [
      { id: "a", text: "A", cache: "1h" },
      { id: "b", text: "B", cache: "1h" },
      { id: "c", text: "C", cache: "5m" },
      { id: "d", text: "D", cache: "none" },
    ]
    const { body, breakpoints } = render([user("q")], system, [tool("zeta"), tool("alpha"), tool("mid")])
    const tools = body["tools"] as Array<Json>
    expect(tools.map((t) => t["name"])).toEqual(["alpha", "mid", "zeta"])
    expect(ttls(tools)).toEqual(["-", "-", "1h"])
    expect(ttls(body["system"] as Array<Json>)).toEqual(["-", "1h", "5m", "-"])
    expect(breakpoints).toBe(4)
    expect(anthropicShapeProblems(body, breakpoints)).toEqual([])
  })

  it("does not place a 1h mark after a 5m section, and marks tools 5m then", () => {
    const system: Array<Conversation.SystemSection> = [
      { id: "a", text: "A", cache: "5m" },
      { id: "b", text: "B", cache: "1h" },
    ]
    const { body, breakpoints } = render([user("q")], system, [tool("t")])
    expect(ttls(body["system"] as Array<Json>)).toEqual(["-", "5m"])
    expect(ttls(body["tools"] as Array<Json>)).toEqual(["5m"])
    expect(breakpoints).toBe(3)
    expect(anthropicShapeProblems(body, breakpoints)).toEqual([])
  })

  it("marks every breakpoint 1h under a 1h TTL (the tools' and system's raised with it), still in a valid order", () => {
    const system: Array<Conversation.SystemSection> = [
      { id: "a", text: "A", cache: "5m" },
      { id: "b", text: "B", cache: "5m" },
    ]
    const messages = [user("q"), calls("c1"), results("c1"), assistant("a"), user("next")]
    const { body, breakpoints } = RenderAnthropic.render({ model: claude, system, tools: [tool("t")], messages, stable: 3, ttl: "1h" })
    expect(ttls(body["tools"] as Array<Json>)).toEqual(["1h"])
    expect(ttls(body["system"] as Array<Json>)).toEqual(["-", "1h"])
    const marks = (body["messages"] as Array<{ content: Array<Json> }>).flatMap((m) => ttls(m.content)).filter((t) => t !== "-")
    expect(marks).toEqual(["1h", "1h"])
    expect(breakpoints).toBe(4)
    expect(anthropicShapeProblems(body, breakpoints)).toEqual([])
    // the default is 5 minutes
    expect(JSON.stringify(RenderAnthropic.render({ model: claude, system, tools: [tool("t")], messages }).body)).not.toContain('"1h"')
  })

  it("skips blank sections and marks nothing in a system without cached sections", () => {
    const { body, breakpoints } = render(
      [user("q")],
      [
        { id: "a", text: "A", cache: "none" },
        { id: "b", text: "", cache: "1h" },
      ],
    )
    expect(body["system"]).toEqual([{ type: "text", text: "A" }])
    expect(breakpoints).toBe(1)
  })

  it("passes opaque Anthropic blocks through, drops misplaced tool blocks, and notes OpenAI parts", () => {
    const thinking: Conversation.OpaquePart = {
      type: "opaque",
      format: "anthropic",
      block: { type: "thinking", thinking: "t", signature: "s" },
    }
    const stray: Conversation.OpaquePart = { type: "opaque", format: "anthropic", block: { type: "tool_result", tool_use_id: "q" } }
    const refusal: Conversation.OpaquePart = { type: "opaque", format: "openai", block: { type: "refusal", refusal: "I can't" } }
    const audio: Conversation.OpaquePart = { type: "opaque", format: "openai", block: { type: "input_audio" } }
    const { body } = render([
      { role: "user", parts: [text("q"), audio] },
      { role: "assistant", parts: [thinking, stray, refusal, call("a")] },
      { role: "tool", parts: [result("a")] },
    ])
    const messages = body["messages"] as Array<Json>
    expect(messages[0]!["content"]).toEqual([
      { type: "text", text: "q" },
      { type: "text", text: "[openai input_audio block omitted]" },
    ])
    expect(messages[1]!["content"]).toEqual([
      { type: "thinking", thinking: "t", signature: "s" },
      { type: "text", text: "I can't" },
      { type: "tool_use", id: "a", name: "lookup", input: { q: "a" } },
    ])
    // The stored block is not mutated by rendering.
    expect(thinking.block).toEqual({ type: "thinking", thinking: "t", signature: "s" })
  })

  it("gives a reused tool call id a suffix in its call and its results", () => {
    const { body } = render([user("q"), calls("a"), results("a"), calls("a", "b"), results("a", "b"), calls("a"), results("a")])
    const messages = body["messages"] as Array<Json>
    const uses = messages.flatMap((m) => (m["content"] as Array<Json>).filter((b) => b["type"] === "tool_use").map((b) => b["id"]))
    const answers = messages.flatMap((m) =>
      (m["content"] as Array<Json>).filter((b) => b["type"] === "tool_result").map((b) => b["tool_use_id"]),
    )
    expect(uses).toEqual(["a", "a_2", "b", "a_3"])
    expect(answers).toEqual(["a", "a_2", "b", "a_3"])
    expect(anthropicPairingProblems(body)).toEqual([])
  })

  it("renders non-object tool inputs as {}", () => {
    const { body } = render([user("q"), { role: "assistant", parts: [call("a", "t", [1, 2])] }, results("a")])
    const use = ((body["messages"] as Array<Json>)[1]!["content"] as Array<Json>)[0]!
    expect(use["input"]).toEqual({})
  })
})

describe("RenderAnthropic without tool definitions", () => {
  it("sends calls and results as text (the API refuses tool blocks without tools), and tool blocks when tools are given", () => {
    const view: Array<Conversation.Message> = [
      user("find u1"),
      { role: "assistant", parts: [text("looking"), call("a", "get_user", { id: "u1" })] },
      { role: "tool", parts: [result("a", "Ada"), result("b", "gone", true)] },
      user("thanks"),
    ]
    view[1] = { ...view[1]!, parts: [...view[1]!.parts, call("b", "get_flight", { id: "f7" })] }
    const without = RenderAnthropic.render({ model: claude, system: [], tools: [], messages: view }).body
    expect(without["tools"]).toBeUndefined()
    expect(without["messages"]).toEqual([
      { role: "user", content: [{ type: "text", text: "find u1" }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: "looking" },
          { type: "text", text: '[called get_user {"id":"u1"}]' },
          { type: "text", text: '[called get_flight {"id":"f7"}]' },
        ],
      },
      {
        role: "user",
        content: [
          { type: "text", text: "[result of get_user: Ada]" },
          { type: "text", text: "[error from get_flight: gone]" },
          { type: "text", text: "thanks", cache_control: { type: "ephemeral" } },
        ],
      },
    ])
    expect(FakeProvider.validateRequest("anthropic", without)).toBeUndefined()
    // with definitions: real tool blocks, also accepted
    const withTools = RenderAnthropic.render({
      model: claude,
      system: [],
      tools: [tool("get_user"), tool("get_flight")],
      messages: view,
    }).body
    expect(JSON.stringify(withTools["messages"])).toContain('"type":"tool_use"')
    expect(anthropicPairingProblems(withTools)).toEqual([])
    expect(FakeProvider.validateRequest("anthropic", withTools)).toBeUndefined()
  })
})
