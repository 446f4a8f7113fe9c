import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { forServer, sessionOf, type Input } from "../src/session/SessionOf.ts"
import { TOKEN, toToken } from "../src/session/Token.ts"

const tools = [{ name: "bash", description: "run", input_schema: { type: "object" } }]
const main = { model: "claude-sonnet-4-5", system: "You are Claude Code.", tools, messages: [{ role: "user", content: "fix the bug" }] }

const name = (input: Partial<Input> & { readonly headers?: Input["headers"] }) => {
  const named = sessionOf({ api: "anthropic-messages", headers: {}, body: main, ...input })
  if (!named.ok) throw new Error(named.error.message)
  return named.key
}

describe("sessionOf", () => {
  it("takes x-ctxd-session first, and the tenant from x-ctxd-tenant", () => {
    const key = name({ headers: { "x-ctxd-session": "s-1", "x-ctxd-tenant": "acme", "x-claude-code-session-id": "cc" } })
    expect(key).toEqual({ tenant: "acme", session: "s-1", from: "header", side: false, source: "x-ctxd-session" })
  })

  it("takes the gateway key's tenant, and refuses another in x-ctxd-tenant", () => {
    expect(name({ keyTenant: "acme", headers: { "x-ctxd-session": "s" } }).tenant).toBe("acme")
    expect(name({ keyTenant: "acme", headers: { "x-ctxd-tenant": "acme", "x-ctxd-session": "s" } }).tenant).toBe("acme")
    const other = sessionOf({ api: "anthropic-messages", headers: { "x-ctxd-tenant": "evil" }, body: main, keyTenant: "acme" })
    expect(other).toMatchObject({ ok: false, error: { code: "TenantMismatch", status: 403 } })
  })

  it("refuses a tenant header that is no subject token and a session header that is too long", () => {
    expect(sessionOf({ api: "gemini", headers: { "x-ctxd-tenant": "a.b" }, body: {} })).toMatchObject({
      ok: false,
      error: { code: "BadTenant", status: 400 },
    })
    expect(sessionOf({ api: "gemini", headers: { "x-ctxd-session": "x".repeat(1025) }, body: {} })).toMatchObject({
      ok: false,
      error: { code: "BadSession" },
    })
  })

  it("defaults the tenant", () => {
    expect(name({}).tenant).toBe("default")
    expect(name({ defaultTenant: "local" }).tenant).toBe("local")
  })

  it("reads the client CLIs' session headers, most specific first", () => {
    const uuid = "0b9d8c1e-6f0a-4f7e-9a51-3c2d1e0f9a8b"
    expect(name({ headers: { "x-claude-code-session-id": uuid } })).toMatchObject({ session: uuid, from: "client-header" })
    // Codex: the thread before the process's session
    const codex = { "session-id": "sess", "thread-id": "thread" }
    expect(
      name({ api: "openai-responses", headers: codex, body: { input: "hi", tools: [{ type: "function", name: "f" }] } }),
    ).toMatchObject({
      session: "thread",
      source: "thread-id",
    })
    for (const header of ["session_id", "x-session-id", "x-session-affinity"])
      expect(name({ headers: { [header]: "abc" } })).toMatchObject({ session: "abc", source: header })
  })

  it("reads prompt_cache_key and Claude Code's metadata.user_id from the body", () => {
    const responses = { input: [{ role: "user", content: "hi" }], tools: [{ type: "function", name: "f" }], prompt_cache_key: "conv-7" }
    expect(name({ api: "openai-responses", body: responses })).toMatchObject({ session: "conv-7", source: "body.prompt_cache_key" })
    const legacy = { ...main, metadata: { user_id: "user_ab12_account_cd34_session_9f1e" } }
    expect(name({ body: legacy })).toMatchObject({ session: "9f1e", source: "body.metadata.user_id" })
    const json = { ...main, metadata: { user_id: JSON.stringify({ device_id: "d", session_id: "s-json" }) } }
    expect(name({ body: json })).toMatchObject({ session: "s-json" })
    expect(name({ body: { ...main, metadata: { user_id: "just-a-user" } } }).from).toBe("derived")
  })

  it("derives the session from tenant, system and first user message, in every API", () => {
    const a = name({})
    expect(a.from).toBe("derived")
    expect(a.session).toMatch(/^d-[0-9a-f]{32}$/)
    // the same conversation one call later: the same session
    const later = { ...main, messages: [...main.messages, { role: "assistant", content: "ok" }, { role: "user", content: "more" }] }
    expect(name({ body: later }).session).toBe(a.session)
    expect(name({ body: { ...main, system: "other" } }).session).not.toBe(a.session)
    expect(name({ headers: { "x-ctxd-tenant": "t2" } }).session).not.toBe(a.session)
    const chat = {
      messages: [
        { role: "system", content: "You are Claude Code." },
        { role: "user", content: "fix the bug" },
      ],
      tools: [{}],
    }
    const responses = { instructions: "You are Claude Code.", input: "fix the bug", tools: [{ type: "function" }] }
    const gemini = {
      systemInstruction: { parts: [{ text: "You are Claude Code." }] },
      contents: [{ role: "user", parts: [{ text: "fix the bug" }] }],
      tools: [{ functionDeclarations: [] }],
    }
    // the same system and first message name the same session whatever the API
    expect(name({ api: "openai-chat", body: chat }).session).toBe(a.session)
    expect(name({ api: "openai-responses", body: responses }).session).toBe(a.session)
    expect(name({ api: "gemini", body: gemini }).session).toBe(a.session)
  })

  it("gives side requests a session of their own", () => {
    const headers = { "x-claude-code-session-id": "cc-1" }
    const title = { model: "claude-haiku-4-5", system: "Write a title", messages: [{ role: "user", content: "fix the bug" }] }
    const side = name({ headers, body: title })
    expect(side).toMatchObject({ side: true, sideReason: "single-toolless", from: "client-header" })
    expect(side.session).toMatch(/^cc-1-side-[0-9a-f]{12}$/)
    expect(name({ headers }).side).toBe(false)
    // a tool-less conversation of several messages is a turn (a plain chat)
    const chat = { ...title, messages: [...title.messages, { role: "assistant", content: "a" }, { role: "user", content: "b" }] }
    expect(name({ headers, body: chat }).side).toBe(false)
    // Codex's sub-agents, structured classifiers, and the explicit header
    expect(name({ headers: { ...headers, "x-openai-subagent": "compact" } }).sideReason).toBe("subagent")
    const check = {
      contents: [
        { role: "user", parts: [{ text: "who speaks next?" }] },
        { role: "model", parts: [{ text: "x" }] },
      ],
      generationConfig: { responseJsonSchema: { type: "object" } },
    }
    expect(name({ api: "gemini", body: check }).sideReason).toBe("structured")
    expect(name({ headers: { "x-ctxd-side": "1" } }).sideReason).toBe("header")
    expect(name({ headers: { ...headers, "x-ctxd-side": "false" }, body: title }).side).toBe(false)
    // Claude Code's title call, as captured: no tools, a JSON schema answer, the main loop's session header
    const claudeTitle = {
      model: "claude-haiku-4-5",
      tools: [],
      thinking: { type: "disabled" },
      output_config: { format: { type: "json_schema", schema: { type: "object", properties: { title: { type: "string" } } } } },
      system: [{ type: "text", text: "Generate a concise, sentence-case title (3-7 words)" }],
      messages: [{ role: "user", content: [{ type: "text", text: "<session>\nfix the bug\n</session>" }] }],
      metadata: { user_id: JSON.stringify({ device_id: "d", account_uuid: "", session_id: "cc-1" }) },
    }
    expect(name({ headers, body: claudeTitle })).toMatchObject({ side: true, sideReason: "structured" })
    // a derived single tool-less call is its own derived session already: not side
    expect(name({ body: title }).side).toBe(false)
  })

  it("never throws on bodies of any shape, and always names a token", () => {
    const apis = ["anthropic-messages", "openai-chat", "openai-responses", "gemini"] as const
    fc.assert(
      fc.property(fc.constantFrom(...apis), fc.object(), fc.string(), (api, body, value) => {
        const named = sessionOf({ api, headers: { "x-session-id": value }, body: body as Record<string, unknown> })
        return named.ok && TOKEN.test(named.key.session)
      }),
    )
  })
})

describe("forServer", () => {
  it("takes the identity's tenant as the key's, and the default for none", () => {
    const of = forServer({ defaultTenant: "local" })
    expect(of({ api: "anthropic-messages", headers: {}, body: main })).toMatchObject({ ok: true, key: { tenant: "local" } })
    expect(of({ api: "anthropic-messages", headers: {}, body: main, tenant: "acme" })).toMatchObject({ ok: true, key: { tenant: "acme" } })
    expect(of({ api: "anthropic-messages", headers: { "x-ctxd-tenant": "b" }, body: main, tenant: "acme" })).toMatchObject({
      ok: false,
      error: { code: "TenantMismatch" },
    })
  })
})

describe("toToken", () => {
  it("keeps tokens, cleans and hashes the rest, apart", () => {
    expect(toToken("abc-DEF_1")).toBe("abc-DEF_1")
    expect(toToken("a.b")).toMatch(/^a_b-[0-9a-f]{16}$/)
    expect(toToken("a.b")).not.toBe(toToken("a_b"))
    expect(toToken("   ")).toBeUndefined()
    fc.assert(fc.property(fc.string({ minLength: 1, maxLength: 1024 }), (s) => TOKEN.test(toToken(s) ?? "x")))
  })
})
