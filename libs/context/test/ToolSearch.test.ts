import type { Conversation } from "@ctxd/contracts"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as CacheBlocks from "../src/CacheBlocks.ts"
import * as RenderAnthropic from "../src/providers/anthropic/Render.ts"
import * as Models from "../src/Models.ts"
import * as ToolSearch from "../src/ToolSearch.ts"
import * as Toolsets from "../src/Toolsets.ts"
import { user } from "./Helpers.ts"

const tool = (name: string, toolset?: string, readOnly?: boolean): Conversation.Tool => ({
  name,
  description: `${name} tool `.repeat(20),
  inputSchema: { type: "object", properties: {} },
  ...(toolset === undefined ? {} : { toolset }),
  ...(readOnly === undefined ? {} : { readOnly }),
})
const search = RenderAnthropic.searchTool
const names = (tools: ReadonlyArray<Conversation.Tool>) => tools.map((t) => t.name)

const arbCatalog = fc
  .uniqueArray(
    fc.record({
      name: fc.stringMatching(/^[a-z]{1,6}$/),
      toolset: fc.option(fc.constantFrom("issues", "repos", "actions"), { nil: undefined }),
      readOnly: fc.option(fc.boolean(), { nil: undefined }),
    }),
    { selector: (t) => t.name, maxLength: 12 },
  )
  .map((ts) => ts.map((t) => tool(t.name, t.toolset, t.readOnly)))

describe("ToolSearch.select", () => {
  it("sends every tool once: the eager ones selectTools sends before any load, then the search tool, then the rest deferred (property)", () => {
    fc.assert(
      fc.property(arbCatalog, fc.subarray(["issues", "repos", "actions"]), fc.boolean(), (catalog, defaults, write) => {
        const config: Toolsets.Config = { defaultToolsets: defaults, includeWriteByDefault: write }
        const sent = ToolSearch.select(catalog, config, search)
        const eager = Toolsets.selectTools(catalog, Toolsets.empty, config).filter((t) => t.name !== Toolsets.LOAD_TOOLSET)
        expect(names(sent.filter((t) => !ToolSearch.isDeferred(t) && !ToolSearch.isSearchTool(t)))).toEqual(names(eager))
        const deferred = sent.filter(ToolSearch.isDeferred)
        // every catalog tool exactly once, and no load_toolset
        expect(new Set(names(sent)).size).toBe(sent.length)
        expect(names(sent)).not.toContain(Toolsets.LOAD_TOOLSET)
        for (const t of catalog) expect(names(sent)).toContain(t.name)
        // the search tool exactly when something is deferred, right before the deferred tools
        expect(sent.filter(ToolSearch.isSearchTool)).toHaveLength(deferred.length === 0 ? 0 : 1)
        if (deferred.length > 0) expect(sent.findIndex(ToolSearch.isSearchTool)).toBe(eager.length)
        expect(ToolSearch.loaded(sent)).toHaveLength(sent.length - deferred.length)
        // the same list on every call: nothing in it depends on the session
        expect(JSON.stringify(ToolSearch.select(catalog, config, search))).toBe(JSON.stringify(sent))
      }),
      { numRuns: 300 },
    )
  })

  it("renders for Anthropic: deferred tools with defer_loading, the search tool by type, the breakpoint on the last tool not deferred", () => {
    const catalog = [tool("whoami"), tool("get_issue", "issues", true), tool("get_repo", "repos", true)]
    const sent = ToolSearch.select(catalog, { defaultToolsets: ["repos"] }, search)
    const model = Models.resolve({ provider: "anthropic", name: "claude-opus-5-5" })
    const body = RenderAnthropic.render({ model, system: [], tools: sent, messages: [user("hi")], toolOrder: "given" }).body
    const tools = body["tools"] as Array<Record<string, unknown>>
    expect(tools.map((t) => [t["name"], t["type"], t["defer_loading"], t["cache_control"] !== undefined])).toEqual([
      ["get_repo", undefined, undefined, false],
      ["whoami", undefined, undefined, false],
      ["tool_search_tool_bm25", "tool_search_tool_bm25_20251119", undefined, true],
      ["get_issue", undefined, true, false],
    ])
  })

  it("CacheBlocks: a deferred tool is no block of the prefix; a search result referencing it bills its definition there", () => {
    const catalog = [tool("whoami"), tool("get_issue", "issues", true)]
    const sent = ToolSearch.select(catalog, { defaultToolsets: [] }, search)
    const model = Models.resolve({ provider: "anthropic", name: "claude-opus-5-5" })
    const toBlocks = CacheBlocks.converter({ text: (t) => Math.ceil(t.length / 4) })
    const tokens = (messages: ReadonlyArray<Conversation.Message>) =>
      toBlocks(RenderAnthropic.render({ model, system: [], tools: sent, messages, toolOrder: "given" }).body).reduce(
        (n, b) => n + b.tokens,
        0,
      )
    const alone = tokens([user("hi")])
    const eagerOnly = toBlocks(
      RenderAnthropic.render({ model, system: [], tools: ToolSearch.loaded(sent), messages: [user("hi")], toolOrder: "given" }).body,
    ).reduce((n, b) => n + b.tokens, 0)
    expect(alone).toBe(eagerOnly)
    const found = (refs: ReadonlyArray<string>): Conversation.Message => ({
      role: "assistant",
      parts: [
        { type: "opaque", format: "anthropic", block: { type: "server_tool_use", id: "s1", name: search.name, input: { query: "issue" } } },
        {
          type: "opaque",
          format: "anthropic",
          block: {
            type: "tool_search_tool_result",
            tool_use_id: "s1",
            content: {
              type: "tool_search_tool_search_result",
              tool_references: refs.map((n) => ({ type: "tool_reference", tool_name: n })),
            },
          },
        },
        { type: "text", text: "Found it." },
      ],
    })
    const definition = (
      RenderAnthropic.render({ model, system: [], tools: sent, messages: [user("hi")], toolOrder: "given" }).body["tools"] as Array<unknown>
    ).at(-1)
    const referenced = tokens([user("hi"), found(["get_issue"]), user("go on")])
    const none = tokens([user("hi"), found([]), user("go on")])
    expect(referenced - none).toBeGreaterThanOrEqual(Math.ceil(`loaded:${JSON.stringify(definition)}`.length / 4))
  })
})
