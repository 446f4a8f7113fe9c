/**
 * Memory tools answered by ctxd through real turns (a real worker on real
 * NATS and Postgres, raw nats.js): with memories stored for the turn's
 * agent, the read tools are offered; the model's `memory_search` call (sent
 * back by the runtime without a result) is answered by ctxd and the reply's
 * prompt carries the result, in the Anthropic and OpenAI formats;
 * `memory_remember` is refused until the memory toolset is loaded with its
 * write tools, then stores once (a retried turn stores nothing more); on a
 * model with the provider's tool search it goes out deferred and is answered
 * once the model calls it (searching is its load); `memoryTools: false` turns
 * them off, and an agent without memories does not get them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start()
  const remember = (text: string, tags: string[] = []) =>
    h.request(`${h.root}.v1.memory.acme`, { op: "remember", agent: "travel", text, tags })
  expect(await remember("The customer always flies economy and sits by the window", ["seat"])).toMatchObject({ ok: true })
  expect(await remember("The customer's home airport is Seattle (SEA)")).toMatchObject({ ok: true })
  expect(await remember("Invoices go to finance@example.com")).toMatchObject({ ok: true })
}, 60_000)
afterAll(async () => {
  await h?.close()
})

const MEMORY_READ_TOOLS = ["memory_history", "memory_list", "memory_read", "memory_search"]

const openai = {
  turn: (turnId: string, messages: unknown[], options: Record<string, unknown> = {}) => ({
    turnId,
    format: "openai",
    model: { provider: "openai", name: "gpt-4o" },
    system: "You are a travel agent.",
    messages,
    options: { agent: "travel", ...options },
  }),
  call: (id: string, name: string, args: unknown) => ({
    role: "assistant",
    content: null,
    tool_calls: [{ id, type: "function", function: { name, arguments: JSON.stringify(args) } }],
  }),
  toolNames: (body: { tools?: Array<{ function: { name: string } }> }) => (body.tools ?? []).map((t) => t.function.name),
  /** The text of the tool result answering `id` in the provider body. */
  result: (body: { messages: Array<{ role: string; tool_call_id?: string; content: unknown }> }, id: string) =>
    String(body.messages.find((m) => m.role === "tool" && m.tool_call_id === id)?.content ?? ""),
}

const anthropic = {
  turn: (turnId: string, messages: unknown[], options: Record<string, unknown> = {}) => ({
    turnId,
    format: "anthropic",
    // a model without the provider's tool search: the memory toolset is loaded with load_toolset
    model: { provider: "anthropic", name: "claude-sonnet-4-0" },
    system: "You are a travel agent.",
    messages,
    options: { agent: "travel", ...options },
  }),
  call: (id: string, name: string, args: unknown) => ({ role: "assistant", content: [{ type: "tool_use", id, name, input: args }] }),
  toolNames: (body: { tools?: Array<{ name: string }> }) => (body.tools ?? []).map((t) => t.name),
  result: (body: { messages: Array<{ role: string; content: unknown }> }, id: string) => {
    for (const m of body.messages) {
      if (!Array.isArray(m.content)) continue
      for (const block of m.content as Array<{ type: string; tool_use_id?: string; content?: unknown }>) {
        if (block.type === "tool_result" && block.tool_use_id === id) return JSON.stringify(block.content)
      }
    }
    return ""
  },
}

describe.each([
  ["openai", openai],
  ["anthropic", anthropic],
] as const)("memory tools (%s)", (format, f) => {
  it("offers the read tools, answers memory_search itself and the prompt carries the result", async () => {
    const s = h.turnSubject("acme", `memory-${format}`)
    const first = await h.request(s, f.turn("t1", [{ role: "user", content: "Book my usual seat to Boston." }]))
    expect(first.ok).toBe(true)
    const names = f.toolNames(first.request)
    for (const name of MEMORY_READ_TOOLS) expect(names).toContain(name)
    expect(names).not.toContain("memory_remember")

    const second = await h.request(s, f.turn("t2", [f.call("m1", "memory_search", { query: "seat preference window" })]))
    expect(second.ok).toBe(true)
    expect(second.report.virtualCalls).toEqual([
      { tool: "memory_search", callId: "m1", args: { query: "seat preference window" }, ok: true },
    ])
    const answer = f.result(second.request, "m1")
    expect(answer).toContain("economy and sits by the window")
    expect(answer).not.toContain("finance@example.com")
  }, 60_000)

  it("refuses memory_remember until the memory toolset is loaded with its write tools, then stores", async () => {
    const s = h.turnSubject("acme", `remember-${format}`)
    await h.request(s, f.turn("t1", [{ role: "user", content: "Remember that I prefer aisle seats now." }]))
    const refused = await h.request(s, f.turn("t2", [f.call("r1", "memory_remember", { text: `prefers aisle seats (${format})` })]))
    expect(refused.report.virtualCalls).toMatchObject([{ tool: "memory_remember", callId: "r1", ok: false }])
    expect(f.result(refused.request, "r1")).toContain("load_toolset")

    const loaded = await h.request(s, f.turn("t3", [f.call("l1", "load_toolset", { toolset: "memory", include_write_tools: true })]))
    expect(loaded.report.virtualCalls).toMatchObject([{ tool: "load_toolset", ok: true }])
    expect(f.toolNames(loaded.request)).toContain("memory_remember")
    const t4 = f.turn("t4", [f.call("r2", "memory_remember", { text: `The customer prefers aisle seats (${format})` })])
    const stored = await h.request(s, t4)
    expect(stored.report.virtualCalls).toMatchObject([{ tool: "memory_remember", callId: "r2", ok: true }])
    // the same turn again (a client retry) stores nothing more
    expect(await h.request(s, t4)).toEqual(stored)
    const found = await h.request(`${h.root}.v1.memory.acme`, { op: "search", agent: "travel", query: `aisle ${format}` })
    expect(found.results.filter((r: { text: string }) => r.text === `The customer prefers aisle seats (${format})`)).toHaveLength(1)
  }, 60_000)
})

describe("memory tools under the provider's tool search (anthropic, claude-sonnet-4-5)", () => {
  const searching = {
    ...anthropic,
    turn: (turnId: string, messages: unknown[]) => ({
      ...anthropic.turn(turnId, messages),
      model: { provider: "anthropic", name: "claude-sonnet-4-5" },
    }),
  }
  it("sends memory_remember deferred, with the search tool, and answers a call of it", async () => {
    const s = h.turnSubject("acme", "remember-search")
    const first = await h.request(s, searching.turn("t1", [{ role: "user", content: "Remember that I prefer window seats." }]))
    const tools = (first.request as { tools: Array<{ name: string; type?: string; defer_loading?: boolean }> }).tools
    expect(tools.find((t) => t.name === "memory_remember")?.defer_loading).toBe(true)
    expect(tools.some((t) => t.type?.startsWith("tool_search_tool") === true)).toBe(true)
    expect(tools.map((t) => t.name)).not.toContain("load_toolset")
    const t2 = searching.turn("t2", [searching.call("r1", "memory_remember", { text: "The customer prefers window seats (search)" })])
    const stored = await h.request(s, t2)
    expect(stored.report.virtualCalls).toMatchObject([{ tool: "memory_remember", callId: "r1", ok: true }])
  }, 60_000)
})

describe("memory tools are offered only when", () => {
  it("not turned off, and the agent has memories (or the turn asks for them)", async () => {
    const off = await h.request(
      h.turnSubject("acme", "memory-off"),
      openai.turn("t1", [{ role: "user", content: "hi" }], { memoryTools: false }),
    )
    expect(openai.toolNames(off.request).filter((n) => n.startsWith("memory_"))).toEqual([])
    const none = await h.request(
      h.turnSubject("acme", "memory-none"),
      openai.turn("t1", [{ role: "user", content: "hi" }], { agent: "empty" }),
    )
    expect(openai.toolNames(none.request).filter((n) => n.startsWith("memory_"))).toEqual([])
    const asked = await h.request(
      h.turnSubject("acme", "memory-asked"),
      openai.turn("t1", [{ role: "user", content: "hi" }], { agent: "empty", memoryTools: true }),
    )
    expect(
      openai
        .toolNames(asked.request)
        .filter((n) => n.startsWith("memory_"))
        .sort(),
    ).toEqual(MEMORY_READ_TOOLS)
  }, 60_000)
})
