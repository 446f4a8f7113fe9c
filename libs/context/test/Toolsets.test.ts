import type { Conversation } from "@ctxd/contracts"
import { Workloads } from "@ctxd/testing"
import { LocalCounter } from "@ctxd/tokens"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Knowledge from "../src/Knowledge.ts"
import * as Normalize from "../src/Normalize.ts"
import * as SchemaCompression from "../src/SchemaCompression.ts"
import * as Toolsets from "../src/Toolsets.ts"
import { user } from "./Helpers.ts"

const tool = (name: string, toolset?: string, readOnly?: boolean): Conversation.Tool => ({
  name,
  description: `${name} tool`,
  inputSchema: { type: "object", properties: {} },
  ...(toolset === undefined ? {} : { toolset }),
  ...(readOnly === undefined ? {} : { readOnly }),
})

const catalog: ReadonlyArray<Conversation.Tool> = [
  tool("get_issue", "issues", true),
  tool("list_issues", "issues", true),
  tool("create_issue", "issues", false),
  tool("get_repo", "repos", true),
  tool("delete_repo", "repos"),
  tool("run_workflow", "actions", false),
  tool("list_runs", "actions", true),
  tool("whoami"),
  tool("get_gist", "gists", true),
]
const config: Toolsets.Config = { defaultToolsets: ["repos"], descriptions: { issues: "Issues and comments" } }
const names = (tools: ReadonlyArray<Conversation.Tool>) => tools.map((t) => t.name)

const callMessage = (...calls: Array<[id: string, name: string, input: unknown]>): Conversation.Message => ({
  role: "assistant",
  parts: calls.map(([id, name, input]) => ({ type: "tool_call", id, name, input })),
})

describe("Toolsets.selectTools", () => {
  it("sends load_toolset, tools without a toolset and the default toolsets' read-only tools, sorted by name", () => {
    expect(names(Toolsets.selectTools(catalog, Toolsets.empty, config))).toEqual(["get_repo", "load_toolset", "whoami"])
    expect(names(Toolsets.selectTools(catalog, Toolsets.empty, { ...config, includeWriteByDefault: true }))).toEqual([
      "delete_repo",
      "get_repo",
      "load_toolset",
      "whoami",
    ])
  })

  it("appends each load as a group sorted by name, in load order", () => {
    const state: Toolsets.State = {
      loaded: [
        { toolset: "issues", write: false },
        { toolset: "actions", write: true },
        { toolset: "issues", write: true },
      ],
    }
    expect(names(Toolsets.selectTools(catalog, state, config))).toEqual([
      "get_repo",
      "load_toolset",
      "whoami",
      "get_issue",
      "list_issues",
      "list_runs",
      "run_workflow",
      "create_issue",
    ])
  })

  it("adds virtual tools to the first group, and sends everything sorted without toolsets", () => {
    expect(names(Toolsets.selectTools(catalog, Toolsets.empty, config, [Knowledge.tool]))).toEqual([
      "get_repo",
      "load_knowledge",
      "load_toolset",
      "whoami",
    ])
    const plain = [tool("b"), tool("a")]
    expect(names(Toolsets.selectTools(plain, Toolsets.empty, config))).toEqual(["a", "b"])
  })

  it("describes every toolset in a stable load_toolset schema", () => {
    const t = Toolsets.loadToolsetTool(catalog, config)
    expect(t).toEqual(Toolsets.loadToolsetTool([...catalog].reverse(), config))
    const schema = t.inputSchema as { properties: { toolset: { enum: Array<string> } }; required: Array<string> }
    expect(schema.properties.toolset.enum).toEqual(["actions", "gists", "issues", "repos"])
    expect(schema.required).toEqual(["toolset"])
    expect(t.description).toContain("- issues: Issues and comments (3 tools, 2 read-only)")
    expect(t.description).toContain("- actions: tools such as list_runs, run_workflow (2 tools, 1 read-only)")
    expect(SchemaCompression.compress(t, "aggressive")).toBe(t)
  })

  it("only appends: the tools sent before a load are a prefix of the tools sent after it (property)", () => {
    const ids = ["issues", "repos", "actions", "gists", "nope"]
    fc.assert(
      fc.property(
        fc.array(fc.record({ toolset: fc.constantFrom(...ids), write: fc.boolean() }), { maxLength: 8 }),
        fc.boolean(),
        (loads, includeWrite) => {
          const cfg = { ...config, includeWriteByDefault: includeWrite }
          let state = Toolsets.empty
          let before = names(Toolsets.selectTools(catalog, state, cfg))
          for (const [i, l] of loads.entries()) {
            const answered = Toolsets.answerVirtualCalls(
              [callMessage([`c${i}`, "load_toolset", { toolset: l.toolset, include_write_tools: l.write }])],
              state,
              { tools: catalog, config: cfg },
            )
            state = answered.state
            const after = names(Toolsets.selectTools(catalog, state, cfg))
            expect(after.slice(0, before.length)).toEqual(before)
            expect(new Set(after).size).toBe(after.length)
            before = after
          }
        },
      ),
      { numRuns: 200 },
    )
  })
})

describe("Toolsets.answerVirtualCalls", () => {
  const context: Toolsets.Context = { tools: catalog, config }

  it("loads a toolset, appends its result after the assistant's results, and reports the call", () => {
    const incoming: Array<Conversation.Message> = [
      callMessage(["a", "load_toolset", { toolset: "issues" }], ["b", "whoami", {}]),
      { role: "tool", parts: [{ type: "tool_result", callId: "b", content: [{ type: "text", text: "me" }], isError: false }] },
      user("next"),
    ]
    const out = Toolsets.answerVirtualCalls(incoming, Toolsets.empty, context)
    expect(out.state).toEqual({ loaded: [{ toolset: "issues", write: false }] })
    expect(out.calls).toEqual([{ tool: "load_toolset", callId: "a", args: { toolset: "issues" }, ok: true }])
    expect(out.messages.map((m) => m.role)).toEqual(["assistant", "tool", "tool", "user"])
    const result = out.messages[2]!.parts[0] as Conversation.ToolResultPart
    expect(result).toMatchObject({ type: "tool_result", callId: "a", isError: false })
    expect((result.content[0] as Conversation.TextPart).text).toBe(
      'Loaded toolset "issues" (read-only): get_issue, list_issues. They can be called from your next step on.',
    )
    const pairing = Normalize.findPairingError(new Set(), new Set(), out.messages)
    expect(pairing).toBeUndefined()
  })

  it("answers an unknown toolset with an error that lists the toolsets", () => {
    const out = Toolsets.answerVirtualCalls([callMessage(["a", "load_toolset", { toolset: "wiki" }])], Toolsets.empty, context)
    expect(out.state).toBe(Toolsets.empty)
    expect(out.calls[0]!.ok).toBe(false)
    const result = out.messages[1]!.parts[0] as Conversation.ToolResultPart
    expect(result.isError).toBe(true)
    const text = (result.content[0] as Conversation.TextPart).text
    expect(text).toContain('unknown toolset "wiki"')
    for (const id of ["actions", "gists", "issues", "repos"]) expect(text).toContain(`- ${id}:`)
  })

  it("says when a toolset is already loaded, loads write tools later, and refuses a write-only toolset read-only", () => {
    const repos = Toolsets.answerVirtualCalls([callMessage(["a", "load_toolset", { toolset: "repos" }])], Toolsets.empty, context)
    expect(repos.state).toBe(Toolsets.empty)
    expect(repos.calls[0]!.ok).toBe(true)
    expect(JSON.stringify(repos.messages[1])).toContain("already loaded")
    const write = Toolsets.answerVirtualCalls(
      [callMessage(["a", "load_toolset", { toolset: "repos", include_write_tools: true }])],
      Toolsets.empty,
      context,
    )
    expect(write.state).toEqual({ loaded: [{ toolset: "repos", write: true }] })
    expect(JSON.stringify(write.messages[1])).toContain("delete_repo")
    const writeOnly = Toolsets.answerVirtualCalls(
      [callMessage(["a", "load_toolset", { toolset: "actions" }]), callMessage(["b", "load_toolset", {}])],
      Toolsets.empty,
      { tools: [tool("run", "ci", false), ...catalog], config },
    )
    expect(writeOnly.calls.map((c) => c.ok)).toEqual([true, false])
    const refused = Toolsets.answerVirtualCalls([callMessage(["a", "load_toolset", { toolset: "ci" }])], Toolsets.empty, {
      tools: [tool("run", "ci", false), ...catalog],
      config,
    })
    expect(refused.calls[0]!.ok).toBe(false)
    expect(JSON.stringify(refused.messages[1])).toContain("include_write_tools: true")
  })

  it("leaves calls the runtime answered itself, and calls of real tools, alone", () => {
    const incoming: Array<Conversation.Message> = [
      callMessage(["a", "load_toolset", { toolset: "issues" }], ["b", "get_repo", {}]),
      {
        role: "tool",
        parts: [
          { type: "tool_result", callId: "a", content: [{ type: "text", text: "unknown tool" }], isError: true },
          { type: "tool_result", callId: "b", content: [], isError: false },
        ],
      },
    ]
    const out = Toolsets.answerVirtualCalls(incoming, Toolsets.empty, context)
    expect(out.messages).toEqual(incoming)
    expect(out.calls).toEqual([])
    expect(out.state).toBe(Toolsets.empty)
  })

  it("answers load_knowledge when documents are registered, and not otherwise", () => {
    const docs: Array<Knowledge.Doc> = [{ id: "refunds", title: "Refund policy", text: "Refunds within 24h." }]
    const incoming = [callMessage(["k", "load_knowledge", { id: "refunds" }])]
    const out = Toolsets.answerVirtualCalls(incoming, Toolsets.empty, { ...context, knowledge: docs })
    expect(out.calls).toEqual([{ tool: "load_knowledge", callId: "k", args: { id: "refunds" }, ok: true }])
    expect(JSON.stringify(out.messages[1])).toContain("Refunds within 24h.")
    expect(Toolsets.answerVirtualCalls(incoming, Toolsets.empty, context).messages).toEqual(incoming)
  })
})

describe("Toolsets on the GitHub MCP catalog", () => {
  const github = Workloads.githubCatalog()
  const tools = Normalize.tools("openai", github.tools)
  const cfg: Toolsets.Config = {
    defaultToolsets: github.toolsets.filter((t) => t.default).map((t) => t.id),
    descriptions: Object.fromEntries(github.toolsets.map((t) => [t.id, t.description])),
  }
  const counter = LocalCounter.make({ backend: "tiktoken" })

  it("the default context (default toolsets read-only + load_toolset) costs at most 20 % of all tools, truncated", () => {
    const all = counter.countTools(tools, "o200k_base")
    const selected = Toolsets.selectTools(tools, Toolsets.empty, cfg)
    expect(selected.every((t) => t.toolset === undefined || (cfg.defaultToolsets.includes(t.toolset) && t.readOnly === true))).toBe(true)
    const truncated = counter.countTools(SchemaCompression.compressAll(selected, "truncate"), "o200k_base")
    expect(truncated / all).toBeLessThanOrEqual(0.2)
    // Uncompressed, read-only default toolsets alone are about 30 % of the catalog.
    expect(counter.countTools(selected, "o200k_base") / all).toBeLessThan(0.32)
  })

  it("a load changes the tools once: later turns send the same list", () => {
    const answered = Toolsets.answerVirtualCalls([callMessage(["a", "load_toolset", { toolset: "actions" }])], Toolsets.empty, {
      tools,
      config: cfg,
    })
    const first = Toolsets.selectTools(tools, answered.state, cfg)
    expect(Toolsets.selectTools(tools, answered.state, cfg)).toEqual(first)
    expect(names(first).slice(-3)).toEqual(["actions_get", "actions_list", "get_job_logs"])
  })
})

describe("Toolsets.replay", () => {
  it("rebuilds the state answerVirtualCalls produced from the stored history", () => {
    const tools: Array<Conversation.Tool> = [
      { name: "a_read", inputSchema: { type: "object" }, toolset: "alpha", readOnly: true },
      { name: "a_write", inputSchema: { type: "object" }, toolset: "alpha" },
      { name: "b_read", inputSchema: { type: "object" }, toolset: "beta", readOnly: true },
    ]
    const context = { tools, config: { defaultToolsets: [] } }
    const incoming: Array<Conversation.Message> = [
      { role: "user", parts: [{ type: "text", text: "go" }] },
      { role: "assistant", parts: [{ type: "tool_call", id: "v1", name: "load_toolset", input: { toolset: "beta" } }] },
      {
        role: "assistant",
        parts: [{ type: "tool_call", id: "v2", name: "load_toolset", input: { toolset: "alpha", include_write_tools: true } }],
      },
      { role: "assistant", parts: [{ type: "tool_call", id: "v3", name: "load_toolset", input: { toolset: "nope" } }] },
    ]
    const answered = Toolsets.answerVirtualCalls(incoming, Toolsets.empty, context)
    expect(answered.state.loaded).toEqual([
      { toolset: "beta", write: false },
      { toolset: "alpha", write: true },
    ])
    expect(Toolsets.replay(answered.messages, context)).toEqual(answered.state)
  })
})
