/**
 * MemoryTools: arguments become store operations or an error the model
 * sees; `memory_remember` needs the write tools; a runtime's own tool or
 * answer wins; a rendered result stays within the memory budget and says
 * what it left out.
 */
import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { MemoryTools, Toolsets } from "../src/index.ts"

const countText = (t: string): number => Math.ceil(t.length / 4)

const call = (id: string, name: string, input: unknown): Conversation.Message => ({
  role: "assistant",
  parts: [{ type: "tool_call", id, name, input }],
})

describe("MemoryTools.parse", () => {
  it("turns arguments into operations with clamped limits, or says what is wrong", () => {
    expect(MemoryTools.parse("memory_search", { query: " seats ", limit: 500 })).toEqual({
      op: "search",
      query: "seats",
      limit: MemoryTools.defaults.maxSearchLimit,
    })
    expect(MemoryTools.parse("memory_search", {})).toMatch(/query/)
    expect(MemoryTools.parse("memory_read", { id: "m-1" })).toEqual({ op: "read", id: "m-1" })
    expect(MemoryTools.parse("memory_history", { id: "bad id" })).toMatch(/id/)
    expect(MemoryTools.parse("memory_list", { limit: 0 })).toEqual({ op: "list", cursor: undefined, limit: 1 })
    expect(MemoryTools.parse("memory_remember", { text: "x", tags: ["a", 3], id: "m-2" })).toEqual({
      op: "remember",
      text: "x",
      tags: ["a"],
      id: "m-2",
    })
    expect(MemoryTools.parse("memory_remember", { text: "  " })).toMatch(/text/)
  })
})

describe("MemoryTools.pending", () => {
  const incoming = [
    call("a", "memory_search", { query: "seat" }),
    call("b", "memory_remember", { text: "aisle" }),
    call("c", "memory_read", {}),
    call("d", "memory_list", {}),
    {
      role: "tool",
      parts: [{ type: "tool_result", callId: "d", content: [{ type: "text", text: "runtime's own" }], isError: false }],
    } satisfies Conversation.Message,
  ]

  it("runs well-formed calls, answers malformed ones and memory_remember without write tools at once, leaves runtime-answered ones", () => {
    const out = MemoryTools.pending(incoming, false)
    expect(out.calls.map((c) => c.callId)).toEqual(["a"])
    expect(out.answers.get("b")).toMatchObject({ ok: false, text: expect.stringContaining("load_toolset") })
    expect(out.answers.get("c")).toMatchObject({ ok: false })
    expect(out.answers.has("d")).toBe(false)
    expect(MemoryTools.pending(incoming, true).calls.map((c) => c.callId)).toEqual(["a", "b"])
  })

  it("leaves a tool of the request's own with a memory tool's name to the runtime", () => {
    const own: Conversation.Tool = { name: "memory_search", inputSchema: { type: "object" } }
    expect(MemoryTools.pending(incoming, true, [own]).calls.map((c) => c.callId)).toEqual(["b"])
  })

  it("Toolsets answers the calls from the rendered answers, after the assistant message, pairing intact", () => {
    const answers = new Map([
      [
        "a",
        MemoryTools.render(
          { op: "search", hits: [{ id: "m1", text: "window seat", tags: [], updatedAt: "2026-01-02T00:00:00Z" }] },
          countText,
        ),
      ],
    ])
    const out = Toolsets.answerVirtualCalls([incoming[0]!], Toolsets.empty, {
      tools: MemoryTools.tools,
      config: { defaultToolsets: ["memory"] },
      memory: { answers },
    })
    expect(out.calls).toEqual([{ tool: "memory_search", callId: "a", args: { query: "seat" }, ok: true }])
    expect(out.messages[1]).toMatchObject({
      role: "tool",
      parts: [{ type: "tool_result", callId: "a", content: [{ type: "text", text: expect.stringContaining("window seat") }] }],
    })
  })

  it("the memory toolset's defaults are its read tools; loading it with write tools adds memory_remember", () => {
    const config = { defaultToolsets: ["memory"] }
    const names = (state: Toolsets.State) => Toolsets.selectTools(MemoryTools.tools, state, config).map((t) => t.name)
    expect(names(Toolsets.empty)).toEqual(["load_toolset", "memory_history", "memory_list", "memory_read", "memory_search"])
    const loaded = Toolsets.load({ toolset: "memory", include_write_tools: true }, Toolsets.empty, { tools: MemoryTools.tools, config })
    expect(names(loaded.state)).toEqual([
      "load_toolset",
      "memory_history",
      "memory_list",
      "memory_read",
      "memory_search",
      "memory_remember",
    ])
  })
})

describe("MemoryTools.render", () => {
  const hit = (i: number, text: string) => ({ id: `m${i}`, text, tags: [], updatedAt: "2026-01-02T00:00:00Z" })

  it("keeps whole hits while they fit and says how many it left out", () => {
    const hits = Array.from({ length: 10 }, (_, i) => hit(i, `memory number ${i} ${"x".repeat(400)}`))
    const answer = MemoryTools.render({ op: "search", hits }, countText, 400)
    expect(answer.ok).toBe(true)
    expect(answer.text).toContain("m0")
    expect(answer.text).not.toContain("m9")
    expect(answer.text).toMatch(/\[\d more matches left out to fit the memory budget/)
    expect(MemoryTools.render({ op: "search", hits: hits.slice(0, 2) }, countText, 10_000).text).not.toContain("left out")
  })

  it("property: a result never exceeds the budget by more than its notice line", () => {
    fc.assert(
      fc.property(fc.array(fc.string({ maxLength: 3_000 }), { maxLength: 30 }), fc.integer({ min: 50, max: 3_000 }), (texts, budget) => {
        const answer = MemoryTools.render({ op: "search", hits: texts.map((t, i) => hit(i, t)) }, countText, budget)
        expect(countText(answer.text)).toBeLessThanOrEqual(budget + 40)
      }),
    )
  })

  it("an unknown id and a store failure are errors", () => {
    expect(MemoryTools.render({ op: "read" }, countText).ok).toBe(false)
    expect(MemoryTools.render({ op: "history" }, countText).ok).toBe(false)
    expect(MemoryTools.render({ op: "error", message: "down" }, countText)).toEqual({ ok: false, text: "Error: down" })
  })
})
