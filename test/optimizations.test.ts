// Cache-aware optimizations through a real worker, on the real GitHub MCP
// catalog: a toolset loaded through ctxd's virtual tool and used on the next
// turn; schema compression and observation masking in the reports; a masked
// result recalled through ctxd's virtual recall tool.
import { Workloads } from "@ctxd/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start()
})
afterAll(async () => {
  await h?.close()
})

const catalog = Workloads.githubCatalog()
const defaults = catalog.toolsets.filter((t) => t.default).map((t) => t.id)
const actionsRead = catalog.tools.find((t) => t.toolset === "actions" && t.annotations?.readOnlyHint === true)!
const toolNames = (body: { tools: Array<{ function: { name: string } }> }) => body.tools.map((t) => t.function.name)

const turn = (turnId: string, messages: unknown[], options: Record<string, unknown> = {}) => ({
  turnId,
  format: "openai",
  model: { provider: "openai", name: "gpt-4o" },
  system: "You are a GitHub assistant.",
  tools: catalog.tools,
  messages,
  options: { toolsets: { defaults }, ...options },
})

describe("on-demand toolsets", () => {
  it("starts with the default read-only toolsets plus load_toolset, loads one on request, and uses it next turn", async () => {
    const s = h.turnSubject("acme", "toolsets")
    const first = await h.request(s, turn("t1", [{ role: "user", content: "Why did my last workflow run fail?" }]))
    expect(first.ok).toBe(true)
    const names = toolNames(first.request)
    expect(names).toContain("load_toolset")
    expect(names).not.toContain(actionsRead.function.name)
    expect(first.report.tools.sent).toBeLessThan(catalog.tools.length / 2)

    const second = await h.request(
      s,
      turn("t2", [
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "v1", type: "function", function: { name: "load_toolset", arguments: '{"toolset":"actions"}' } }],
        },
      ]),
    )
    expect(second.ok).toBe(true)
    expect(second.report.virtualCalls).toEqual([{ tool: "load_toolset", callId: "v1", args: { toolset: "actions" }, ok: true }])
    const answer = second.request.messages.at(-1)
    expect(answer).toMatchObject({ role: "tool", tool_call_id: "v1" })
    expect(answer.content).toContain("Loaded toolset")
    const loadedNames = toolNames(second.request)
    expect(loadedNames).toContain(actionsRead.function.name)
    // A load only appends: the tools sent before stay a prefix (the cached prefix changes once).
    expect(loadedNames.slice(0, names.length)).toEqual(names)

    const third = await h.request(
      s,
      turn("t3", [
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: actionsRead.function.name, arguments: "{}" } }],
        },
        { role: "tool", tool_call_id: "c1", content: '{"workflow_runs": []}' },
      ]),
    )
    expect(third.ok).toBe(true)
    expect(toolNames(third.request)).toEqual(loadedNames)
    expect(third.report.waste.sentNeverCalled).not.toContain(actionsRead.function.name)
    expect(third.report.waste.ratio).toBeGreaterThan(0)
  })

  it("answers an unknown toolset with a helpful error listing the available ones", async () => {
    const s = h.turnSubject("acme", "toolsets-bad")
    await h.request(s, turn("t1", [{ role: "user", content: "hi" }]))
    const reply = await h.request(
      s,
      turn("t2", [
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "v1", type: "function", function: { name: "load_toolset", arguments: '{"toolset":"nope"}' } }],
        },
      ]),
    )
    expect(reply.report.virtualCalls[0].ok).toBe(false)
    expect(reply.request.messages.at(-1).content).toContain("Available toolsets")
  })
})

describe("compression and masking in the report", () => {
  it("compresses tool schemas per request and masks old tool outputs", async () => {
    const s = h.turnSubject("acme", "masking")
    const big = (i: number) => JSON.stringify({ run: i, log: "step output ".repeat(400) })
    await h.request(s, turn("t0", [{ role: "user", content: "look at the runs" }], { toolCompression: "truncate", maskBatchTokens: 500 }))
    let reply
    for (let i = 1; i <= 8; i++) {
      reply = await h.request(
        s,
        turn(
          `t${i}`,
          [
            {
              role: "assistant",
              content: null,
              tool_calls: [{ id: `c${i}`, type: "function", function: { name: "get_me", arguments: "{}" } }],
            },
            { role: "tool", tool_call_id: `c${i}`, content: big(i) },
          ],
          { toolCompression: "truncate", maskBatchTokens: 500 },
        ),
      )
      expect(reply.ok).toBe(true)
    }
    expect(reply.report.tools.compression).toBe("truncate")
    expect(reply.report.tools.saved).toBeGreaterThan(0)
    expect(reply.report.masking.masked).toBeGreaterThanOrEqual(4)
    expect(reply.report.masking.tokensSaved).toBeGreaterThan(1000)
    const masked = reply.request.messages.filter(
      (m: { role: string; content: string }) => m.role === "tool" && m.content.startsWith("[get_me: "),
    )
    expect(masked.length).toBe(reply.report.masking.masked)
    // The last results stay whole; the originals stay in Postgres.
    expect(reply.request.messages.at(-1).content).toContain("step output")
    const stored = await h.sql<{ n: string }>(
      "select count(*) as n from ctxd_messages m join ctxd_sessions s on s.id = m.session_id where s.session = 'masking' and m.content::text like '%step output%'",
    )
    expect(Number(stored[0]!.n)).toBe(8)
  })
})

describe("restorable masking", () => {
  it("offers recall once a result is masked, answers it from the stored original (Anthropic format) and stores the answer", async () => {
    const s = h.turnSubject("acme", "recall")
    const request = (turnId: string, messages: unknown[]) => ({
      turnId,
      format: "anthropic",
      model: { provider: "anthropic", name: "claude-sonnet-4-5" },
      system: "You are a CI assistant.",
      tools: [
        {
          name: "get_run",
          description: "Get a workflow run's log",
          input_schema: { type: "object", properties: { id: { type: "integer" } } },
        },
      ],
      messages,
      // a 1 s cache TTL: offering recall changes the tool list, so it waits for a cold cache
      options: { maskKeep: 1, maskBatchTokens: 500, cacheTtlSeconds: 1 },
    })
    const log = (i: number) => `run ${i}: step passed, artifact uploaded\n`.repeat(60)
    const use = (i: number) => ({ role: "assistant", content: [{ type: "tool_use", id: `c${i}`, name: "get_run", input: { id: i } }] })
    const result = (i: number) => ({ role: "user", content: [{ type: "tool_result", tool_use_id: `c${i}`, content: log(i) }] })
    const names = (body: { tools: Array<{ name: string }> }) => body.tools.map((t) => t.name)

    const first = await h.request(s, request("t0", [{ role: "user", content: "Why is CI slow?" }, use(1)]))
    expect(first.ok).toBe(true)
    expect(names(first.request)).not.toContain("recall")
    let reply = first
    for (let i = 1; i <= 3; i++) {
      // the worker's own clock decides when the cache is cold: let more than the TTL pass before the last
      if (i === 3) await new Promise((resolve) => setTimeout(resolve, 1_100))
      reply = await h.request(s, request(`t${i}`, [result(i), use(i + 1)]))
      expect(reply.ok).toBe(true)
    }
    expect(reply.report.masking.masked).toBeGreaterThan(0)
    expect(reply.report.cache.reason).toBe("ttl_expired")
    expect(names(reply.request)).toContain("recall")
    const text = JSON.stringify(reply.request.messages)
    const step = Number(/tokens — recall\((\d+)\)\]/.exec(text)![1])
    expect(step).toBeGreaterThan(0)

    const recalled = await h.request(
      s,
      request("t4", [result(4), { role: "assistant", content: [{ type: "tool_use", id: "r1", name: "recall", input: { step } }] }]),
    )
    expect(recalled.ok).toBe(true)
    expect(recalled.report.virtualCalls).toEqual([{ tool: "recall", callId: "r1", args: { step }, ok: true }])
    const answer = recalled.request.messages.at(-1)
    expect(answer.role).toBe("user")
    expect(answer.content[0]).toMatchObject({ type: "tool_result", tool_use_id: "r1" })
    const answered = JSON.stringify(answer.content[0].content)
    expect(answered).toContain(`[Recalled step ${step}: get_run — ok]`)
    expect(answered).toContain("run 1: step passed")
    const stored = await h.sql<{ n: string }>(
      "select count(*) as n from ctxd_messages m join ctxd_sessions s on s.id = m.session_id where s.session = 'recall' and m.content::text like '%Recalled step%'",
    )
    expect(Number(stored[0]!.n)).toBe(1)

    const unknown = await h.request(
      s,
      request("t5", [{ role: "assistant", content: [{ type: "tool_use", id: "r2", name: "recall", input: { step: 9999 } }] }]),
    )
    expect(unknown.report.virtualCalls).toEqual([{ tool: "recall", callId: "r2", args: { step: 9999 }, ok: false }])
    expect(names(unknown.request)).toEqual(names(recalled.request))
  })
})

describe("on-demand knowledge", () => {
  it("registers documents, indexes them in the prompt and answers load_knowledge", async () => {
    const k = `${h.root}.v1.knowledge.acme`
    const added = await h.request(k, {
      op: "add",
      agent: "support",
      doc: { id: "refunds", title: "Refund policy for cancelled flights", text: "Refunds go back to the original payment within 7 days." },
    })
    expect(added).toMatchObject({ ok: true, docs: [{ id: "refunds", title: "Refund policy for cancelled flights" }] })
    expect(await h.request(k, { op: "list", agent: "support" })).toMatchObject({ ok: true, docs: [{ id: "refunds" }] })
    expect(await h.request(k, { op: "add", doc: { id: "bad id!", title: "x", text: "y" } })).toMatchObject({
      ok: false,
      error: { code: "BadRequest" },
    })

    const s = h.turnSubject("acme", "knowledge")
    const options = { agent: "support" }
    const first = await h.request(s, turn("t1", [{ role: "user", content: "Can I get a refund?" }], options))
    expect(first.request.messages[0].content).toContain("refunds")
    expect(toolNames(first.request)).toContain("load_knowledge")
    const second = await h.request(
      s,
      turn(
        "t2",
        [
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "k1", type: "function", function: { name: "load_knowledge", arguments: '{"id":"refunds"}' } }],
          },
        ],
        options,
      ),
    )
    expect(second.report.virtualCalls).toEqual([{ tool: "load_knowledge", callId: "k1", args: { id: "refunds" }, ok: true }])
    expect(second.request.messages.at(-1).content).toContain("within 7 days")

    expect(await h.request(k, { op: "remove", agent: "support", id: "refunds" })).toMatchObject({ ok: true, removed: true, docs: [] })
    const third = await h.request(h.turnSubject("acme", "knowledge-2"), turn("t1", [{ role: "user", content: "hi" }], options))
    expect(toolNames(third.request)).not.toContain("load_knowledge")
  })
})

describe("metrics", () => {
  it("reports turns, tokens saved by mechanism, waste and the token counter's state", async () => {
    const reply = await h.request(`${h.root}.v1.metrics`, {})
    expect(reply.ok).toBe(true)
    const find = (name: string, tags: Record<string, string> = {}) =>
      reply.metrics.find(
        (m: { name: string; tags: Record<string, string> }) => m.name === name && Object.entries(tags).every(([k, v]) => m.tags[k] === v),
      )
    expect(find("ctxd_turns_total", { backend: "tiktoken", exact: "false" }).value).toBeGreaterThan(5)
    expect(find("ctxd_tokens_saved_total", { kind: "masking" }).value).toBeGreaterThan(1000)
    expect(find("ctxd_tokens_saved_total", { kind: "compression" }).value).toBeGreaterThan(0)
    expect(find("ctxd_virtual_calls_total").value).toBeGreaterThanOrEqual(5)
    expect(find("ctxd_tool_waste_ratio").count).toBeGreaterThan(0)
    expect(reply.tokens.breaker).toBeDefined()
  })
})
