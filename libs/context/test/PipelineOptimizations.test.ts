import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as Pipeline from "../src/Pipeline.ts"
import * as RenderAnthropic from "../src/providers/anthropic/Render.ts"
import * as RenderOpenAI from "../src/providers/openai-chat/Render.ts"
import * as SchemaCompression from "../src/SchemaCompression.ts"
import * as Toolsets from "../src/Toolsets.ts"
import { anthropicPairingProblems, anthropicShapeProblems, claude, gpt, input, openaiPairingProblems, stored, user } from "./Helpers.ts"

type Json = Record<string, unknown>

const tool = (name: string, toolset?: string): Conversation.Tool => ({
  name,
  description: `The   ${name} tool.   It does things.`,
  inputSchema: { type: "object", title: "Args", properties: { x: { type: "string", description: "An x" } } },
  ...(toolset === undefined ? {} : { toolset, readOnly: true }),
})

describe("renderers keep a given tool order", () => {
  const tools = [tool("zeta"), tool("alpha"), tool("mid")]
  it("Anthropic: given order, last tool marked", () => {
    const { body, breakpoints } = RenderAnthropic.render({ model: claude, system: [], tools, messages: [user("q")], toolOrder: "given" })
    const rendered = body["tools"] as Array<Json>
    expect(rendered.map((t) => t["name"])).toEqual(["zeta", "alpha", "mid"])
    expect(rendered.map((t) => t["cache_control"] !== undefined)).toEqual([false, false, true])
    expect(anthropicShapeProblems(body, breakpoints)).toEqual([])
  })
  it("OpenAI: given order", () => {
    const { body } = RenderOpenAI.render({
      tenant: "a",
      session: "s",
      model: gpt,
      system: [],
      tools,
      messages: [user("q")],
      toolOrder: "given",
    })
    expect((body["tools"] as Array<Json>).map((t) => (t["function"] as Json)["name"])).toEqual(["zeta", "alpha", "mid"])
  })
})

describe("the pipeline with the optimization options", () => {
  const history = stored([user("hello")])

  it("keeps the old behaviour and report when the options are absent", () => {
    const out = Pipeline.run(input(history, { tools: [tool("b"), tool("a")], toolsTokens: 40 }))
    for (const key of ["tools", "masking", "proactive", "virtualCalls", "waste"]) expect(out.report).not.toHaveProperty(key)
    expect((out.request["tools"] as Array<Json>)[0]!["name"]).toBe("a")
    expect(Pipeline.resolveOptions(undefined)).not.toHaveProperty("maskKeep")
  })

  it("compresses the tools, counts them with countTools and reports the saving", () => {
    const tools = [tool("b"), tool("a")]
    const count = (ts: ReadonlyArray<Conversation.Tool>) => JSON.stringify(ts).length
    const out = Pipeline.run(
      input(history, {
        tools,
        toolsTokens: count(tools),
        countTools: count,
        options: Pipeline.resolveOptions({ toolCompression: "truncate" }),
      }),
    )
    const sent = SchemaCompression.compressAll(tools, "truncate")
    expect(out.report.tools).toEqual({ sent: 2, compression: "truncate", tokens: count(sent), saved: count(tools) - count(sent) })
    expect(out.report.tokens.tools).toBe(count(sent))
    expect(JSON.stringify(out.request["tools"])).not.toContain("An x")
  })

  it("a toolset load appends tools after the cached ones, in both formats, and pairs the virtual call", () => {
    const catalog = [tool("get_repo", "repos"), tool("get_issue", "issues"), tool("list_issues", "issues"), tool("whoami")]
    const config: Toolsets.Config = { defaultToolsets: ["repos"] }
    const before = Toolsets.selectTools(catalog, Toolsets.empty, config)
    const incoming: Array<Conversation.Message> = [
      { role: "assistant", parts: [{ type: "tool_call", id: "v1", name: "load_toolset", input: { toolset: "issues" } }] },
    ]
    const answered = Toolsets.answerVirtualCalls(incoming, Toolsets.empty, { tools: catalog, config })
    const after = Toolsets.selectTools(catalog, answered.state, config)
    const grown = stored([user("hello"), ...answered.messages])
    for (const format of ["anthropic", "openai"] as const) {
      const names = (tools: ReadonlyArray<Conversation.Tool>) => {
        const out = Pipeline.run(
          input(grown, { format, tools, toolOrder: "given", options: Pipeline.resolveOptions({ toolCompression: "minify" }) }),
        )
        if (format === "anthropic") expect(anthropicPairingProblems(out.request)).toEqual([])
        else expect(openaiPairingProblems(out.request)).toEqual([])
        return (out.request["tools"] as Array<Json>).map((t) => String(t["name"] ?? (t["function"] as Json)["name"]))
      }
      const a = names(before)
      const b = names(after)
      expect(b.slice(0, a.length)).toEqual(a)
      expect(b.slice(a.length)).toEqual(["get_issue", "list_issues"])
    }
  })
})
