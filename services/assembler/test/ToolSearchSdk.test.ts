/**
 * On-demand toolsets through the provider's tool search, against the fake
 * provider through the official Anthropic SDK: on a model whose row has
 * `toolSearch` the GitHub MCP catalog goes out once, the toolsets not loaded
 * by default deferred behind the search tool, and a search plus a call of
 * the found tool leave the tool list byte-identical; on a model without it,
 * `load_toolset` as before. The fake provider refuses what the API refuses.
 */
import type { Turn } from "@ctxd/contracts"
import { FakeProvider, Workloads } from "@ctxd/testing"
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as InProcessTurns from "../src/InProcessTurns.ts"
import { local } from "./Helpers.ts"

type Json = Record<string, unknown>

let server: FakeProvider.FakeProviderServer
let client: Anthropic
let openai: OpenAI

beforeAll(async () => {
  server = await FakeProvider.start()
  client = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
  openai = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test", maxRetries: 0 })
})
afterAll(() => server.close())

const catalog = Workloads.githubCatalog()
const tools = catalog.tools.map((t) => ({
  name: t.function.name,
  description: t.function.description,
  input_schema: t.function.parameters,
  toolset: t.toolset,
  annotations: t.annotations,
}))
const defaults = catalog.toolsets.filter((t) => t.default).map((t) => t.id)
const system = "You are a GitHub assistant. ".repeat(300)
const options = { toolsets: { defaultToolsets: defaults } }

// a small max_tokens: the SDK wants streaming for the model's full output reserve
const send = (body: Json) => client.messages.create({ ...body, max_tokens: 1_024 } as unknown as Anthropic.MessageCreateParamsNonStreaming)
const status = async (body: Json): Promise<{ status: number; message: string }> => {
  try {
    await send(body)
    return { status: 200, message: "" }
  } catch (e) {
    if (!(e instanceof Anthropic.APIError)) throw e
    const error = (e.error as { error?: { message?: string } } | undefined)?.error
    return { status: e.status ?? 0, message: error?.message ?? "" }
  }
}

const session = (model: string) => {
  const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
  let k = 0
  return (messages: ReadonlyArray<unknown>): Promise<Turn.TurnReply> => {
    const req = { turnId: `t${k++}`, format: "anthropic", model: { provider: "anthropic", name: model }, system, tools, messages, options }
    return turns.turn("acme", `s-${model}`, req as unknown as Turn.TurnRequest, undefined, k * 1_000)
  }
}

describe("tool search instead of load_toolset (Anthropic)", () => {
  it("a tool-search model: deferred tools and the search tool; a search and a call keep the tool list byte-identical", async () => {
    const turn = session("claude-opus-5-5")
    const first = await turn([{ role: "user", content: "Which issues are open in octo/repo?" }])
    const sent = first.request["tools"] as Array<Json>
    const names = sent.map((t) => t["name"])
    expect(names).not.toContain("load_toolset")
    expect(sent.filter((t) => t["type"] === "tool_search_tool_bm25_20251119")).toHaveLength(1)
    const deferred = sent.filter((t) => t["defer_loading"] === true)
    // every catalog tool is sent: the default toolsets' read-only tools as they are, the rest deferred
    expect(sent.length - 1).toBe(tools.length)
    expect(deferred.length).toBeGreaterThan(tools.length / 2)
    expect(deferred.some((t) => t["cache_control"] !== undefined)).toBe(false)
    expect(deferred.map((t) => t["name"])).toContain("list_issues")

    server.control({
      replies: [{ toolSearch: "list issues", toolCalls: [{ id: "toolu_1", name: "list_issues", input: { owner: "octo", repo: "repo" } }] }],
    })
    const answer = await send(first.request)
    const types = answer.content.map((b) => b.type)
    expect(types).toEqual(["server_tool_use", "tool_search_tool_result", "tool_use"])
    const result = answer.content[1] as Anthropic.ToolSearchToolResultBlock
    expect(result.content.type).toBe("tool_search_tool_search_result")
    expect((result.content as Anthropic.ToolSearchToolSearchResultBlock).tool_references.map((r) => r.tool_name)).toContain("list_issues")

    const second = await turn([
      { role: "assistant", content: answer.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "[]" }] },
    ])
    expect(JSON.stringify(second.request["tools"])).toBe(JSON.stringify(sent))
    expect(second.report.virtualCalls ?? []).toEqual([])
    const again = await send(second.request)
    expect(again.usage.cache_read_input_tokens).toBeGreaterThan(0)
  })

  it("a model without tool search: load_toolset and no deferred tools, as before", async () => {
    const turn = session("claude-sonnet-4-20250514")
    const first = await turn([{ role: "user", content: "Which issues are open in octo/repo?" }])
    const sent = first.request["tools"] as Array<Json>
    expect(sent.map((t) => t["name"])).toContain("load_toolset")
    expect(sent.some((t) => t["defer_loading"] !== undefined || t["type"] !== undefined)).toBe(false)
    expect(sent.length).toBeLessThan(tools.length)
    expect((await status(first.request)).status).toBe(200)
  })
})

describe("the fake provider's tool search rules", () => {
  const tool = (name: string, defer?: boolean): Json => ({
    name,
    description: `Tool ${name}`,
    input_schema: { type: "object", properties: {} },
    ...(defer === undefined ? {} : { defer_loading: defer }),
  })
  const search = { type: "tool_search_tool_regex_20251119", name: "tool_search_tool_regex" }
  const body = (model: string, list: ReadonlyArray<Json>, messages?: ReadonlyArray<Json>): Json => ({
    model,
    max_tokens: 100,
    tools: list,
    messages: messages ?? [{ role: "user", content: "hi" }],
  })

  it("accepts deferred tools with a search tool on a tool-search model, and refuses what the API refuses", async () => {
    expect(await status(body("claude-opus-5-5", [search, tool("a"), tool("b", true)]))).toEqual({ status: 200, message: "" })
    expect(await status(body("claude-3-haiku-20240307", [search, tool("a")]))).toEqual({
      status: 400,
      message: "tools.0: 'tool_search_tool_regex_20251119' is not supported on claude-3-haiku-20240307",
    })
    expect(await status(body("claude-opus-5-5", [{ ...search, defer_loading: true }, tool("b", true)]))).toEqual({
      status: 400,
      message: "All tools have defer_loading set. At least one tool must be non-deferred.",
    })
    expect((await status(body("claude-opus-5-5", [tool("a"), tool("b", true)]))).message).toContain("requires a tool search tool")
    const unknownRef = [
      { role: "user", content: "hi" },
      {
        role: "assistant",
        content: [
          { type: "server_tool_use", id: "srvtoolu_1", name: "tool_search_tool_regex", input: { query: "x" } },
          {
            type: "tool_search_tool_result",
            tool_use_id: "srvtoolu_1",
            content: { type: "tool_search_tool_search_result", tool_references: [{ type: "tool_reference", tool_name: "nope" }] },
          },
          { type: "text", text: "none" },
        ],
      },
      { role: "user", content: "and?" },
    ]
    expect(await status(body("claude-opus-5-5", [search, tool("a"), tool("b", true)], unknownRef))).toEqual({
      status: 400,
      message: "Tool reference 'nope' has no corresponding tool definition",
    })
  })

  it("bills a deferred tool only once a search result references it", async () => {
    const big = (name: string): Json => ({ ...tool(name, true), description: `Tool ${name} `.repeat(200) })
    const count = async (list: ReadonlyArray<Json>) =>
      (
        await client.messages.countTokens({
          ...body("claude-opus-5-5", list),
          max_tokens: undefined,
        } as unknown as Anthropic.MessageCountTokensParams)
      ).input_tokens
    expect(await count([search, tool("a"), big("b"), big("c")])).toBe(await count([search, tool("a")]))
  })
})

describe("tool search instead of load_toolset (OpenAI Responses)", () => {
  const functions = catalog.tools.map((t) => ({
    type: "function",
    name: t.function.name,
    description: t.function.description,
    parameters: t.function.parameters,
    toolset: t.toolset,
    annotations: t.annotations,
  }))
  const responsesSession = (model: string) => {
    const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
    let k = 0
    return (input: ReadonlyArray<unknown>): Promise<Turn.TurnReply> => {
      const req = {
        turnId: `t${k++}`,
        format: "openai-responses",
        model: { provider: "openai", name: model },
        system,
        tools: functions,
        input,
        options,
      }
      return turns.turn("acme", `r-${model}`, req as unknown as Turn.TurnRequest, undefined, k * 1_000)
    }
  }
  const create = (body: Json) => openai.responses.create(body as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
  const refusal = async (body: Json): Promise<string> => {
    try {
      await create(body)
      return ""
    } catch (e) {
      if (!(e instanceof OpenAI.APIError)) throw e
      return e.message
    }
  }

  it("gpt-5.6: deferred functions and tool_search; a search and a call keep the tool list byte-identical", async () => {
    const turn = responsesSession("gpt-5.6")
    const first = await turn([{ type: "message", role: "user", content: "Which issues are open in octo/repo?" }])
    const sent = first.request["tools"] as Array<Json>
    expect(sent.map((t) => t["name"])).not.toContain("load_toolset")
    expect(sent.filter((t) => t["type"] === "tool_search")).toHaveLength(1)
    expect(sent.filter((t) => t["defer_loading"] === true).length).toBeGreaterThan(tools.length / 2)

    server.control({
      replies: [{ toolSearch: "list issues", toolCalls: [{ id: "call_1", name: "list_issues", input: { owner: "octo" } }] }],
    })
    const answer = await create(first.request)
    expect(answer.output.map((o) => o.type)).toEqual(["tool_search_call", "tool_search_output", "function_call"])
    const loaded = answer.output[1] as OpenAI.Responses.ResponseToolSearchOutputItem
    expect(loaded.tools.map((t) => (t as { name?: string }).name)).toContain("list_issues")

    const second = await turn([...answer.output, { type: "function_call_output", call_id: "call_1", output: "[]" }])
    expect(JSON.stringify(second.request["tools"])).toBe(JSON.stringify(sent))
    const again = await create(second.request)
    expect(again.usage?.input_tokens_details.cached_tokens).toBeGreaterThan(0)
  })

  it("a model without tool search (gpt-4.1): load_toolset, no deferred functions; the fake provider refuses tool_search there", async () => {
    const first = await responsesSession("gpt-4.1")([{ type: "message", role: "user", content: "Which issues are open?" }])
    const sent = first.request["tools"] as Array<Json>
    expect(sent.map((t) => t["name"])).toContain("load_toolset")
    expect(sent.some((t) => t["defer_loading"] !== undefined || t["type"] === "tool_search")).toBe(false)
    expect(await refusal(first.request)).toBe("")
    const fn = { type: "function", name: "a", parameters: { type: "object", properties: {} } }
    const body = (model: string, list: ReadonlyArray<Json>): Json => ({ model, input: "hi", store: false, tools: list })
    expect(await refusal(body("gpt-5", [{ type: "tool_search" }, fn]))).toContain("Tool 'tool_search' is not supported with model 'gpt-5'.")
    expect(await refusal(body("gpt-5.6", [{ ...fn, defer_loading: true }]))).toContain("requires a 'tool_search' tool")
    expect(await refusal(body("gpt-5.6", [{ type: "tool_search" }, { ...fn, defer_loading: true }]))).toBe("")
  })
})
