import { CostModel, Models, Normalize, RenderAnthropic, RenderOpenAI } from "@ctxd/context"
import type { Conversation, OpenAI } from "@ctxd/contracts"
import { Workloads } from "@ctxd/testing"
import { describe, expect, it } from "vitest"
import * as Blocks from "./Blocks.ts"
import * as Ctxd from "./Ctxd.ts"

const model = Models.resolve({ provider: "anthropic", name: "claude-sonnet-4-5", contextWindow: 1_000_000 })
const count = Blocks.counting(model)
const tools: Array<Conversation.Tool> = [
  { name: "b", description: "second", inputSchema: { type: "object" } },
  { name: "a", description: "first", inputSchema: { type: "object" } },
]
const system: Array<Conversation.SystemSection> = [
  { id: "stable", text: "You are an agent.", cache: "1h" },
  { id: "today", text: "Today is Monday.", cache: "5m" },
]
const messages: Array<Conversation.Message> = [
  { role: "user", parts: [{ type: "text", text: "hello" }] },
  {
    role: "assistant",
    parts: [
      { type: "text", text: "on it" },
      { type: "tool_call", id: "c1", name: "a", input: {} },
    ],
  },
  { role: "tool", parts: [{ type: "tool_result", callId: "c1", content: [{ type: "text", text: "done" }], isError: false }] },
]

describe("Blocks.converter", () => {
  it("cuts an Anthropic body into tools, system and content blocks with their breakpoints", () => {
    const body = RenderAnthropic.render({ model, system, tools, messages }).body
    const blocks = Blocks.converter(count)(body)
    // 2 tools, 2 system blocks, user text, assistant text + tool_use, tool_result.
    expect(blocks).toHaveLength(8)
    expect(blocks.map((b) => b.breakpoint)).toEqual([undefined, "1h", "1h", "5m", undefined, undefined, undefined, "5m"])
    expect(blocks.every((b) => b.tokens > 0 && b.hash.length > 0)).toBe(true)
  })

  it("hashes blocks without their cache marker, so a moved breakpoint keeps the prefix", () => {
    const convert = Blocks.converter(count)
    const before = convert(RenderAnthropic.render({ model, system, tools, messages: messages.slice(0, 1) }).body)
    const after = convert(RenderAnthropic.render({ model, system, tools, messages }).body)
    expect(after[4]!.hash).toBe(before[4]!.hash)
    expect(before[4]!.breakpoint).toBe("5m")
    expect(after[4]!.breakpoint).toBeUndefined()
  })

  it("counts a block by its content, not by the escapes and quotes of its JSON", () => {
    // code-like output: newlines and quotes JSON escapes, which the provider never sees
    const output = Array.from({ length: 40 }, (_, i) => `    if x == "${i}":\n        return 'a\tb'`).join("\n")
    const result: Conversation.Message = {
      role: "tool",
      parts: [{ type: "tool_result", callId: "c1", content: [{ type: "text", text: output }], isError: false }],
    }
    const body = RenderAnthropic.render({ model, system, tools, messages: [...messages.slice(0, 2), result] }).body
    const block = Blocks.converter(count)(body).at(-1)!
    const json = count.text(JSON.stringify((body["messages"] as Array<{ content: Array<unknown> }>).at(-1)!.content[0]))
    expect(block.tokens).toBeLessThan(count.message(result) + 20)
    expect(block.tokens).toBeGreaterThanOrEqual(count.text(output))
    expect(json).toBeGreaterThan(block.tokens * 1.1)
  })

  it("cuts an OpenAI body into tools and whole messages, without breakpoints", () => {
    const openaiModel = Models.resolve({ provider: "openai", name: "gpt-4o" })
    const body = RenderOpenAI.render({ model: openaiModel, system, tools, messages, tenant: "t", session: "s" }).body
    const blocks = Blocks.converter(Blocks.counting(openaiModel))(body)
    // 2 tools, the system message, user, assistant, tool.
    expect(blocks).toHaveLength(6)
    expect(blocks.every((b) => b.breakpoint === undefined)).toBe(true)
  })
})

describe("Ctxd.bodies", () => {
  it("gives one body per turn of a real session", async () => {
    const t = Workloads.tauBenchSession("tau-airline-19-3")
    const session: Ctxd.Session = {
      id: t.id,
      system: Normalize.system(t.system),
      tools: Normalize.tools("openai", t.tools),
      turns: t.turns.map((turn) => Normalize.fromOpenAI(turn.messages as ReadonlyArray<OpenAI.Message>)),
    }
    const times = session.turns.map((_, k) => k * 10)
    const bodies = await Ctxd.bodies({ session, times, format: "anthropic", model, prices: CostModel.lookup(model.name), count })
    expect(bodies).toHaveLength(session.turns.length)
    for (const body of bodies) expect(body["model"]).toBe("claude-sonnet-4-5")
  })
})
