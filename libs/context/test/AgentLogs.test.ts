import { describe, expect, it } from "vitest"
import * as AgentLogs from "../src/AgentLogs.ts"

const sessions = (parsed: AgentLogs.Parsed) => {
  if (parsed._tag !== "Sessions") throw new Error(parsed.reason)
  return parsed.sessions
}

/** Per turn, the roles and part types of its messages. */
const shape = (s: AgentLogs.Session) => s.turns.map((t) => t.map((m) => `${m.role}:${m.parts.map((p) => p.type).join("+")}`))

describe("AgentLogs.parse", () => {
  it("reads an OpenAI Chat conversation: system off, one turn per assistant message, tools synthesized from the calls", () => {
    const chat = [
      { role: "system", content: "be brief" },
      { role: "user", content: "list files" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "ls", arguments: '{"path":"."}' } }],
      },
      { role: "tool", tool_call_id: "c1", content: "a b" },
      { role: "assistant", content: "a and b" },
      { role: "user", content: "thanks" },
    ]
    const [s] = sessions(AgentLogs.parse("log", JSON.stringify(chat)))
    expect(s!.source).toBe("openai-chat")
    expect(s!.system).toEqual([{ id: "system", text: "be brief", cache: "5m" }])
    expect(s!.tools.map((t) => [t.name, t.inputSchema])).toEqual([["ls", { type: "object", properties: { path: { type: "string" } } }]])
    // the trailing user message answers no model call: dropped
    expect(shape(s!)).toEqual([["user:text"], ["assistant:tool_call", "tool:tool_result"]])
  })

  it("reads Anthropic Messages and OpenAI Responses items into the same turns", () => {
    const anthropic = {
      system: "be brief",
      tools: [{ name: "ls", input_schema: { type: "object" } }],
      messages: [
        { role: "user", content: "list files" },
        { role: "assistant", content: [{ type: "tool_use", id: "c1", name: "ls", input: {} }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "c1", content: "a b" }] },
        { role: "assistant", content: "a and b" },
      ],
    }
    const responses = {
      instructions: "be brief",
      tools: [{ type: "function", name: "ls", parameters: { type: "object" } }],
      input: [
        { type: "message", role: "user", content: "list files" },
        { type: "function_call", call_id: "c1", name: "ls", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: "a b" },
        { type: "message", role: "assistant", content: "a and b" },
      ],
    }
    const [a] = sessions(AgentLogs.parse("a", JSON.stringify(anthropic)))
    const [r] = sessions(AgentLogs.parse("r", JSON.stringify(responses)))
    expect([a!.source, r!.source]).toEqual(["anthropic", "openai-responses"])
    for (const s of [a!, r!]) {
      expect(s.system.map((x) => x.text)).toEqual(["be brief"])
      expect(s.tools.map((t) => t.name)).toEqual(["ls"])
      expect(shape(s)).toEqual([["user:text"], ["assistant:tool_call", "tool:tool_result"]])
    }
  })

  it("reads JSONL one conversation per line, and says why a text is not a log", () => {
    const line = JSON.stringify([
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello" },
    ])
    expect(sessions(AgentLogs.parse("log", `${line}\n\n${line}\n`, { jsonl: true })).map((s) => s.id)).toEqual(["log-1", "log-3"])
    expect(AgentLogs.parse("log", "{not json")).toMatchObject({ _tag: "Unrecognised" })
    expect(AgentLogs.parse("log", JSON.stringify({ airline: [] }))).toMatchObject({ _tag: "Unrecognised" })
    expect(AgentLogs.parse("log", `${line}\n{"x":1}`, { jsonl: true })).toMatchObject({
      _tag: "Unrecognised",
      reason: expect.stringContaining("line 2"),
    })
  })
})
