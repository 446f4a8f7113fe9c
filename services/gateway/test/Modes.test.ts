/**
 * Modes and failure: active, shadow and off per tenant and agent; a port
 * that fails or does not answer in time under failOpen (the client's own
 * request goes, counted) and failClosed (a 503 in the API's error shape);
 * the provider's 429 relayed with its retry-after so the SDK retries on its
 * own while the gateway never does.
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { afterEach, describe, expect, it } from "vitest"
import { eventually, MARK, type Stack, stack } from "./Helpers.ts"
import type { Mode } from "../src/Options.ts"

let s: Stack | undefined
afterEach(async () => {
  await s?.close()
  s = undefined
})

const anthropicOf = (st: Stack, headers: Record<string, string> = {}, maxRetries = 0) =>
  new Anthropic({ baseURL: st.gateway.url, apiKey: "sk-ant-test-key-0001", maxRetries, defaultHeaders: headers })

const ask = (client: Anthropic) =>
  client.messages.create({
    model: "claude-sonnet-5",
    max_tokens: 32,
    system: "client system",
    messages: [{ role: "user", content: "hi" }],
  })

const sentSystem = (st: Stack) => (st.fake.requests().at(-1)!.body as Record<string, unknown>)["system"]

describe("modes", () => {
  it("per tenant and agent: active sends ctxd's body, shadow the client's (port still asked), off asks nothing", async () => {
    const modes: Record<string, Mode> = { "t1/a": "active", "t1/b": "shadow", "t2/a": "off" }
    s = await stack({ mode: (tenant, agent) => modes[`${tenant}/${agent}`] ?? "off" })
    s.fake.control({ replies: [{ text: "1" }, { text: "2" }, { text: "3" }] })
    await ask(anthropicOf(s, { "x-ctxd-tenant": "t1", "x-ctxd-agent": "a", "x-ctxd-session": "s1" }))
    expect(sentSystem(s)).toBe(MARK)
    expect(s.fake.requests().at(-1)!.headers).not.toHaveProperty("x-ctxd-tenant")
    await ask(anthropicOf(s, { "x-ctxd-tenant": "t1", "x-ctxd-agent": "b", "x-ctxd-session": "s1" }))
    expect(sentSystem(s)).toBe("client system")
    expect(s.port.prompts.map((p) => [p.mode, p.key.tenant, p.key.session, p.agent])).toEqual([
      ["active", "t1", "s1", "a"],
      ["shadow", "t1", "s1", "b"],
    ])
    await eventually(() => s!.port.usages.length === 2)
    expect(s.port.usages.map((u) => u.mode)).toEqual(["active", "shadow"])
    await ask(anthropicOf(s, { "x-ctxd-tenant": "t2", "x-ctxd-agent": "a" }))
    expect(sentSystem(s)).toBe("client system")
    expect(s.port.prompts).toHaveLength(2)
    await new Promise((r) => setTimeout(r, 20))
    expect(s.port.usages).toHaveLength(2)
  })

  it("shadow does not wait for the port: the client's request goes while the prompt is still running", async () => {
    s = await stack({ mode: () => "shadow" })
    let release: () => void = () => {}
    const base = s.port.answer
    s.port.answer = (request, signal) => new Promise((resolve) => (release = () => resolve(base(request, signal))))
    s.fake.control({ replies: [{ text: "shadowed" }] })
    const r = await ask(anthropicOf(s))
    expect(r.content[0]).toMatchObject({ text: "shadowed" })
    expect(s.port.usages).toHaveLength(0)
    release()
    await eventually(() => s!.port.usages.length === 1)
  })

  it("ctxd's required headers are merged in: anthropic-beta joined with the client's", async () => {
    s = await stack()
    const base = s.port.answer
    s.port.answer = async (request, signal) => ({
      ...(await base(request, signal)),
      headers: { "anthropic-beta": "context-1m-2025-08-07" },
    })
    s.fake.control({ replies: [{ text: "ok" }] })
    await ask(anthropicOf(s, { "anthropic-beta": "client-beta-1" }))
    expect(s.fake.requests().at(-1)!.headers["anthropic-beta"]).toBe("client-beta-1,context-1m-2025-08-07")
  })
})

describe("sessions", () => {
  it("a session function that refuses (gw-session's Named shape) is answered in the API's shape, nothing sent", async () => {
    s = await stack({
      sessionOf: (input) =>
        input.headers["x-ctxd-tenant"] === "bad!"
          ? { ok: false, error: { code: "BadTenant", status: 400, message: "x-ctxd-tenant must match [A-Za-z0-9_-]{1,128}" } }
          : { ok: true, key: { tenant: "t", session: "named", from: "header", side: false } },
    })
    const error = await ask(anthropicOf(s, { "x-ctxd-tenant": "bad!" })).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.BadRequestError)
    expect(s.fake.requests()).toHaveLength(0)
    s.fake.control({ replies: [{ text: "ok" }] })
    await ask(anthropicOf(s))
    expect(s.port.prompts[0]!.key.session).toBe("named")
  })
})

describe("failure", () => {
  it("failOpen (default): a port that fails sends the client's own request, counted", async () => {
    s = await stack()
    s.port.answer = () => Promise.reject(new Error("no responders"))
    s.fake.control({ replies: [{ text: "open" }] })
    const r = await ask(anthropicOf(s))
    expect(r.content[0]).toMatchObject({ text: "open" })
    expect(sentSystem(s)).toBe("client system")
    const metrics = await (await fetch(`${s.gateway.url}/metrics`)).text()
    expect(metrics).toMatch(/ctxd_gateway_fail_open_total\{api="anthropic-messages",reason="error"\} [1-9]/)
    expect(metrics).toMatch(/ctxd_gateway_requests_total\{api="anthropic-messages",mode="active",outcome="fail_open"\} [1-9]/)
  })

  it("failOpen: a port that does not answer within promptTimeoutMs is abandoned (and told so by its signal)", async () => {
    s = await stack({ promptTimeoutMs: 50 })
    let aborted = false
    s.port.answer = (_request, signal) =>
      new Promise((_resolve, reject) => signal.addEventListener("abort", () => ((aborted = true), reject(new Error("aborted")))))
    s.fake.control({ replies: [{ text: "late" }] })
    const started = Date.now()
    await ask(anthropicOf(s))
    expect(Date.now() - started).toBeLessThan(2_000)
    expect(aborted).toBe(true)
    expect(sentSystem(s)).toBe("client system")
  })

  it("a reply that is not one (no body object) is a failure: failOpen sends the client's request", async () => {
    s = await stack()
    s.port.answer = () => Promise.resolve({ body: "nonsense", headers: {}, turnId: "t" } as never)
    s.fake.control({ replies: [{ text: "open" }] })
    const r = await ask(anthropicOf(s))
    expect(r.content[0]).toMatchObject({ text: "open" })
    expect(sentSystem(s)).toBe("client system")
  })

  it("an internal error (here a logger that throws) is a 500 in the API's shape, not a crash", async () => {
    const boom = () => {
      throw new Error("logger down")
    }
    s = await stack({ logger: { info: () => {}, warn: boom, error: () => {} } })
    s.port.answer = () => Promise.reject(new Error("down"))
    const error = await ask(anthropicOf(s)).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.InternalServerError)
    expect((error as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: "error", error: { type: "api_error" } })
    expect((await fetch(`${s.gateway.url}/healthz`)).status).toBe(200)
  })

  it("promptTimeoutMs may be a function, read per request (hot-reloaded config)", async () => {
    let timeout = 5_000
    s = await stack({ promptTimeoutMs: () => timeout })
    s.port.answer = (_request, signal) =>
      new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(new Error("aborted"))))
    s.fake.control({ replies: [{ text: "a" }] })
    timeout = 30
    const started = Date.now()
    await ask(anthropicOf(s))
    expect(Date.now() - started).toBeLessThan(2_000)
    expect(sentSystem(s)).toBe("client system")
  })

  it("failClosed: 503 in each API's error shape, nothing sent upstream", async () => {
    s = await stack({ failure: () => "failClosed" })
    s.port.answer = () => Promise.reject(new Error("down"))
    const error = await ask(anthropicOf(s)).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.APIError)
    expect((error as InstanceType<typeof Anthropic.APIError>).status).toBe(503)
    expect((error as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: "error", error: { type: "api_error" } })
    const openai = new OpenAI({ baseURL: `${s.gateway.url}/v1`, apiKey: "sk-x", maxRetries: 0 })
    const oe = await openai.chat.completions
      .create({ model: "gpt-5-mini", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e)
    expect(oe).toBeInstanceOf(OpenAI.InternalServerError)
    expect((oe as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ message: expect.stringContaining("unavailable") })
    expect(s.fake.requests()).toHaveLength(0)
  })
})

describe("upstream errors", () => {
  it("a 429 goes back as sent, with retry-after; the SDK retries on its own, the gateway never does", async () => {
    s = await stack({}, { rateLimitNext: 1, retryAfterMs: 10 })
    s.fake.control({ replies: [{ text: "after retry" }] })
    const r = await ask(anthropicOf(s, {}, 1))
    expect(r.content[0]).toMatchObject({ text: "after retry" })
    expect(s.fake.requests().map((x) => x.status)).toEqual([429, 200])

    s.fake.control({ rateLimitNext: 1 })
    const error = await ask(anthropicOf(s, {}, 0)).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.RateLimitError)
    expect((error as InstanceType<typeof Anthropic.APIError>).headers?.get("retry-after")).toBeDefined()
    expect(s.fake.requests()).toHaveLength(3)
  })

  it("an unreachable upstream is a 502 in the API's shape", async () => {
    s = await stack({ upstreams: { anthropic: "http://127.0.0.1:1" } })
    const error = await ask(anthropicOf(s)).catch((e: unknown) => e)
    expect((error as InstanceType<typeof Anthropic.APIError>).status).toBe(502)
  })
})
