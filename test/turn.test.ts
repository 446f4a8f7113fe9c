// End-to-end: a real worker process on the real NATS and Postgres, spoken to
// with plain NATS requests carrying the documented JSON.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start({ CTXD_MAX_PAYLOAD: String(64 * 1024) })
})
afterAll(async () => {
  await h?.close()
})

const openaiTurn = (turnId: string, messages: unknown[], extra: Record<string, unknown> = {}) => ({
  turnId,
  format: "openai",
  model: { provider: "openai", name: "gpt-4o" },
  system: "You are a helpful airline agent.",
  tools: [
    {
      type: "function",
      function: { name: "get_user", description: "Get a user", parameters: { type: "object", properties: { id: { type: "string" } } } },
    },
    { type: "function", function: { name: "book", description: "Book", parameters: { type: "object", properties: {} } } },
  ],
  messages,
  ...extra,
})

const anthropicTurn = (turnId: string, messages: unknown[]) => ({
  turnId,
  format: "anthropic",
  model: { provider: "anthropic", name: "claude-sonnet-4-5" },
  system: [
    { id: "policy", text: "Airline policy: be careful.", cache: "1h" },
    { id: "today", text: "Today is Monday.", cache: "5m" },
  ],
  tools: [
    { name: "zeta_search", description: "Search", input_schema: { type: "object", properties: { q: { type: "string" } } } },
    { name: "alpha_lookup", description: "Lookup", input_schema: { type: "object", properties: {} } },
  ],
  messages,
})

const count = async (table: string, tenant: string, session: string) => {
  const rows = await h.sql<{ n: string }>(
    `select count(*) as n from ${table} t join ctxd_sessions s on s.id = t.session_id where s.tenant = $1 and s.session = $2`,
    [tenant, session],
  )
  return Number(rows[0]!.n)
}

describe("turn requests over NATS", () => {
  it("answers an OpenAI turn with a provider-ready body and a report, and stores the messages", async () => {
    const reply = await h.request(h.turnSubject("acme", "s1"), openaiTurn("t1", [{ role: "user", content: "I want to book a flight." }]))
    expect(reply.ok).toBe(true)
    expect(reply.turnId).toBe("t1")
    expect(reply.request.model).toBe("gpt-4o")
    expect(reply.request.messages[0]).toEqual({ role: "system", content: "You are a helpful airline agent." })
    expect(reply.request.messages.at(-1)).toEqual({ role: "user", content: "I want to book a flight." })
    expect(reply.request.tools.map((t: { function: { name: string } }) => t.function.name)).toEqual(["book", "get_user"])
    expect(reply.request.prompt_cache_key).toMatch(/^ctxd-[0-9a-f]{32}$/)
    expect(reply.report.tokens.total).toBe(
      reply.report.tokens.system + reply.report.tokens.tools + reply.report.tokens.memory + reply.report.tokens.history,
    )
    expect(reply.report.messages).toMatchObject({ stored: 1, sent: 1 })
    expect(await count("ctxd_messages", "acme", "s1")).toBe(1)

    const second = await h.request(
      h.turnSubject("acme", "s1"),
      openaiTurn("t2", [
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "get_user", arguments: '{"id":"u1"}' } }],
        },
        { role: "tool", tool_call_id: "c1", content: '{"name":"Mia"}' },
      ]),
    )
    expect(second.ok).toBe(true)
    expect(second.request.messages.map((m: { role: string }) => m.role)).toEqual(["system", "user", "assistant", "tool"])
    expect(second.request.prompt_cache_key).toBe(reply.request.prompt_cache_key)
    expect(await count("ctxd_messages", "acme", "s1")).toBe(3)
  })

  it("answers an Anthropic turn with cache breakpoints, sorted tools and merged tool results", async () => {
    const s = "anth-1"
    await h.request(h.turnSubject("acme", s), anthropicTurn("a1", [{ role: "user", content: "find flights" }]))
    const reply = await h.request(
      h.turnSubject("acme", s),
      anthropicTurn("a2", [
        {
          role: "assistant",
          content: [
            { type: "text", text: "Searching." },
            { type: "tool_use", id: "x1", name: "zeta_search", input: { q: "SEA" } },
            { type: "tool_use", id: "x2", name: "alpha_lookup", input: {} },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "x1", content: "3 flights" },
            { type: "tool_result", tool_use_id: "x2", content: "boom", is_error: true },
            { type: "text", text: "and hurry" },
          ],
        },
      ]),
    )
    expect(reply.ok).toBe(true)
    const body = reply.request
    expect(body.model).toBe("claude-sonnet-4-5")
    expect(body.max_tokens).toBeGreaterThan(0)
    expect(body.tools.map((t: { name: string }) => t.name)).toEqual(["alpha_lookup", "zeta_search"])
    expect(body.tools.at(-1).cache_control).toBeDefined()
    expect(body.system[0].cache_control).toEqual({ type: "ephemeral", ttl: "1h" })
    expect(body.messages.map((m: { role: string }) => m.role)).toEqual(["user", "assistant", "user"])
    const last = body.messages.at(-1).content
    expect(last.map((b: { type: string }) => b.type)).toEqual(["tool_result", "tool_result", "text"])
    expect(last[1].is_error).toBe(true)
    expect(reply.report.cache.breakpoints).toBeLessThanOrEqual(4)
  })

  it("returns the stored reply for a repeated turnId and appends nothing", async () => {
    const body = openaiTurn("idem-1", [{ role: "user", content: "hello" }])
    const first = await h.request(h.turnSubject("acme", "idem"), body)
    const again = await h.request(h.turnSubject("acme", "idem"), body)
    expect(again).toEqual(first)
    expect(await count("ctxd_messages", "acme", "idem")).toBe(1)
    expect(await count("ctxd_turns", "acme", "idem")).toBe(1)
  })

  it("answers Conflict for a repeated turnId with different content", async () => {
    await h.request(h.turnSubject("acme", "conf"), openaiTurn("c-1", [{ role: "user", content: "hello" }]))
    const reply = await h.request(h.turnSubject("acme", "conf"), openaiTurn("c-1", [{ role: "user", content: "bye" }]))
    expect(reply).toMatchObject({ ok: false, error: { code: "Conflict" } })
    expect(await count("ctxd_messages", "acme", "conf")).toBe(1)
  })

  it("keeps tenants apart: the same session id under two tenants is two sessions", async () => {
    await h.request(h.turnSubject("tenantA", "shared"), openaiTurn("x", [{ role: "user", content: "A's secret" }]))
    const b = await h.request(h.turnSubject("tenantB", "shared"), openaiTurn("x", [{ role: "user", content: "B" }]))
    expect(b.ok).toBe(true)
    expect(JSON.stringify(b.request)).not.toContain("A's secret")
  })
})

describe("bad input never crashes the worker and never writes", () => {
  const expectServing = async () => {
    const ok = await h.request(
      h.turnSubject("acme", `alive-${Math.random().toString(36).slice(2)}`),
      openaiTurn("z", [{ role: "user", content: "still there?" }]),
    )
    expect(ok.ok).toBe(true)
  }

  it("malformed JSON → BadRequest", async () => {
    const reply = await h.request(h.turnSubject("bad", "json"), '{"turnId": "x", ')
    expect(reply).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    expect(reply.error.message).toMatch(/malformed JSON/)
    await expectServing()
  })

  it("schema violation → BadRequest naming the path", async () => {
    const reply = await h.request(h.turnSubject("bad", "schema"), openaiTurn("x", [{ role: "user" }]))
    expect(reply).toMatchObject({ ok: false, error: { code: "BadRequest", path: "messages[0].content" } })
    expect(await count("ctxd_messages", "bad", "schema")).toBe(0)
    await expectServing()
  })

  it("unknown format → BadRequest naming format", async () => {
    const reply = await h.request(h.turnSubject("bad", "format"), { ...openaiTurn("x", []), format: "bedrock" })
    expect(reply).toMatchObject({ ok: false, error: { code: "BadRequest", path: "format" } })
    expect(reply.error.message).toContain("bedrock")
  })

  it("bad subject tokens → BadRequest", async () => {
    const reply = await h.request(`${h.root}.v1.turn.te@nant.s1`, openaiTurn("x", [{ role: "user", content: "hi" }]))
    expect(reply).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    const deep = await h.request(`${h.root}.v1.turn.a.b.c`, openaiTurn("x", [{ role: "user", content: "hi" }]))
    expect(deep).toMatchObject({ ok: false, error: { code: "BadRequest" } })
  })

  it("an empty first turn → BadRequest naming messages, nothing stored; an empty later turn is fine", async () => {
    const reply = await h.request(h.turnSubject("bad", "empty"), openaiTurn("e1", []))
    expect(reply).toMatchObject({ ok: false, error: { code: "BadRequest", path: "messages" } })
    expect(await count("ctxd_turns", "bad", "empty")).toBe(0)
    expect((await h.request(h.turnSubject("bad", "empty"), openaiTurn("e2", [{ role: "user", content: "hi" }]))).ok).toBe(true)
    const later = await h.request(h.turnSubject("bad", "empty"), openaiTurn("e3", []))
    expect(later.ok).toBe(true)
    expect(later.request.messages.at(-1)).toEqual({ role: "user", content: "hi" })
    await expectServing()
  })

  it("a tool result for an unknown call → BadRequest naming the message index, nothing stored", async () => {
    const reply = await h.request(
      h.turnSubject("bad", "pairing"),
      openaiTurn("x", [
        { role: "user", content: "hi" },
        { role: "tool", tool_call_id: "nope", content: "orphan" },
      ]),
    )
    expect(reply).toMatchObject({ ok: false, error: { code: "BadRequest", path: "messages[1]" } })
    expect(reply.error.message).toContain("nope")
    expect(await count("ctxd_messages", "bad", "pairing")).toBe(0)
    await expectServing()
  })

  it("a payload over the limit → TooLarge, nothing stored", async () => {
    const reply = await h.request(h.turnSubject("bad", "large"), openaiTurn("x", [{ role: "user", content: "x".repeat(70 * 1024) }]))
    expect(reply).toMatchObject({ ok: false, error: { code: "TooLarge" } })
    expect(await count("ctxd_messages", "bad", "large")).toBe(0)
    await expectServing()
  })

  it("NUL characters → BadRequest (Postgres jsonb cannot hold them)", async () => {
    const reply = await h.request(h.turnSubject("bad", "nul"), openaiTurn("x", [{ role: "user", content: "a\u0000b" }]))
    expect(reply).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    await expectServing()
  })
})

describe("health", () => {
  it("answers with the worker's state", async () => {
    const reply = await h.request(`${h.root}.v1.health`, {})
    expect(reply).toMatchObject({ ok: true, postgres: true, draining: false })
    expect(reply.uptimeMs).toBeGreaterThan(0)
  })
})

describe("loop check", () => {
  it("flags a history that repeats the same call and result, with a nudge", async () => {
    const call = (i: number) => [
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: `c${i}`, type: "function", function: { name: "search", arguments: '{"q": "flights"}' } }],
      },
      { role: "tool", tool_call_id: `c${i}`, content: "no results" },
    ]
    const messages = [{ role: "user", content: "find me a flight" }, ...call(1), ...call(2), ...call(3)]
    const reply = await h.request(`${h.root}.v1.loop.check`, { format: "openai", messages })
    expect(reply.ok).toBe(true)
    expect(reply.verdict.looping).toBe(true)
    expect(reply.verdict.findings[0]).toMatchObject({ pattern: "repeated_call", repeats: 3 })
    expect(reply.nudge).toContain("search")
    const calm = await h.request(`${h.root}.v1.loop.check`, { format: "openai", messages: messages.slice(0, 5) })
    expect(calm.verdict.looping).toBe(false)
  })

  it("answers BadRequest for a malformed check", async () => {
    const reply = await h.request(`${h.root}.v1.loop.check`, { format: "openai", messages: "nope" })
    expect(reply).toMatchObject({ ok: false, error: { code: "BadRequest" } })
  })
})
