// End-to-end: `format: "gemini"` turns through a real worker on the real NATS
// and Postgres; the bodies it returns go to the fake provider with the
// official @google/genai SDK's `models.generateContent`.
import { ApiError, GoogleGenAI } from "@google/genai"
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
let provider: FakeProvider.FakeProviderServer
let ai: GoogleGenAI
beforeAll(async () => {
  provider = await FakeProvider.start()
  // the worker's summarizer reaches Gemini at the fake provider
  h = await Harness.start({ GOOGLE_GEMINI_BASE_URL: provider.url, GEMINI_API_KEY: "test" })
  ai = new GoogleGenAI({ apiKey: "test", httpOptions: { baseUrl: provider.url, retryOptions: { attempts: 1 } } })
})
afterAll(async () => {
  await h?.close()
  await provider?.close()
})

const getUser = {
  name: "get_user",
  description: "Get a user",
  parametersJsonSchema: { type: "object", properties: { id: { type: "string" } } },
}

const geminiTurn = (turnId: string, contents: unknown[], model = "gemini-3-pro-preview") => ({
  turnId,
  format: "gemini",
  model: { provider: "google", name: model },
  system: "You are a helpful airline agent.",
  systemInstruction: { parts: [{ text: "Answer briefly." }] },
  tools: [{ functionDeclarations: [getUser] }, { googleSearch: {} }],
  contents,
})

type Body = Parameters<GoogleGenAI["models"]["generateContent"]>[0]

describe("gemini turns over NATS", () => {
  it("answers with generateContent parameters the SDK accepts; signatures and thoughts go back; ids are never made up on the wire; pairing is enforced", async () => {
    const subject = h.turnSubject("acme", "gem-1")
    const first = await h.request(subject, geminiTurn("g1", [{ role: "user", parts: [{ text: "I want to book a flight." }] }]))
    expect(first.ok).toBe(true)
    expect(first.report.format).toBe("gemini")
    expect(first.report.model).toMatchObject({ provider: "google", contextWindow: 1_048_576, maxOutputTokens: 65_536 })
    expect(first.report.cache.promptCacheKey).toBeNull()
    expect(first.request).toEqual({
      model: "gemini-3-pro-preview",
      contents: [{ role: "user", parts: [{ text: "I want to book a flight." }] }],
      config: {
        systemInstruction: { parts: [{ text: "You are a helpful airline agent." }, { text: "Answer briefly." }] },
        tools: [{ functionDeclarations: [getUser] }, { googleSearch: {} }],
        maxOutputTokens: 65_536,
      },
    })
    // the model answers with a signed call (no id, as Gemini does); the agent runs it
    provider.control({ replies: [{ provider: "google", toolCalls: [{ name: "get_user", input: { id: "u1" } }] }] })
    const answer = await ai.models.generateContent(first.request as Body)
    const modelContent = answer.candidates![0]!.content!
    expect(modelContent.parts![0]!.thoughtSignature).toBeDefined()
    const thought = { text: "look the user up", thought: true }
    const second = await h.request(
      subject,
      geminiTurn("g2", [
        { role: "model", parts: [thought, ...modelContent.parts!] },
        { role: "user", parts: [{ functionResponse: { name: "get_user", response: { output: '{"name":"Mia"}' } } }] },
      ]),
    )
    expect(second.ok).toBe(true)
    expect(second.request.contents).toEqual([
      { role: "user", parts: [{ text: "I want to book a flight." }] },
      { role: "model", parts: [thought, ...modelContent.parts!] },
      { role: "user", parts: [{ functionResponse: { name: "get_user", response: { output: '{"name":"Mia"}' } } }] },
    ])
    const response = await ai.models.generateContent(second.request as Body)
    expect(response.usageMetadata?.promptTokenCount).toBeGreaterThan(0)
    // the usage in usageMetadata names reads as automatic-cache usage: cached tokens are reads
    const usage = { ...response.usageMetadata, cachedContentTokenCount: 3 }
    const billed = await h.request(`${h.root}.v1.usage.acme.gem-1`, { turnId: "g2", usage })
    expect(billed).toMatchObject({ ok: true, turnId: "g2", counted: true })
    expect(billed.billed).toBe(response.usageMetadata?.promptTokenCount)
    if (billed.cache !== undefined) expect(billed.cache.billedReadTokens).toBe(3)

    // the next step's call arrives in one request, its response in the next one (no ids): paired by name
    const third = await h.request(
      subject,
      geminiTurn("g3", [{ role: "model", parts: [{ functionCall: { name: "get_user", args: { id: "u2" } }, thoughtSignature: "c2ln" }] }]),
    )
    expect(third.ok).toBe(true)
    const fourth = await h.request(
      subject,
      geminiTurn("g4", [{ role: "user", parts: [{ functionResponse: { name: "get_user", response: { error: "not found" } } }] }]),
    )
    expect(fourth.ok).toBe(true)
    const contents = fourth.request.contents as Array<{ role: string; parts: Array<Record<string, unknown>> }>
    expect(contents.at(-1)).toEqual({ role: "user", parts: [{ functionResponse: { name: "get_user", response: { error: "not found" } } }] })
    expect(JSON.stringify(contents)).not.toMatch(/"id":"gc_/)
    expect((await ai.models.generateContent(fourth.request as Body)).candidates).toHaveLength(1)

    // a response nobody asked for: a BadRequest naming contents[i]
    const orphan = await h.request(
      subject,
      geminiTurn("g5", [
        { role: "user", parts: [{ text: "and?" }] },
        { role: "user", parts: [{ functionResponse: { name: "book", response: {} } }] },
      ]),
    )
    expect(orphan).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    expect(orphan.error.message).toContain("book")
    expect(orphan.error.path).toBe("contents[1]")

    const malformed = await h.request(subject, geminiTurn("g6", [{ role: "assistant", parts: [{ text: "x" }] }]))
    expect(malformed).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    expect(malformed.error.path).toContain("contents[0]")
  })

  it("the fake provider refuses a Gemini 3 step whose call lost its signature", async () => {
    const contents = [
      { role: "user", parts: [{ text: "hi" }] },
      { role: "model", parts: [{ functionCall: { name: "get_user", args: {} } }] },
      { role: "user", parts: [{ functionResponse: { name: "get_user", response: { output: "x" } } }] },
    ]
    const error = await ai.models.generateContent({ model: "gemini-3-pro-preview", contents } as Body).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ApiError)
    expect((error as ApiError).status).toBe(400)
    // through ctxd, a call that came without a signature carries the documented placeholder
    const reply = await h.request(h.turnSubject("acme", "gem-2"), geminiTurn("x1", contents))
    expect(reply.ok).toBe(true)
    expect((await ai.models.generateContent(reply.request as Body)).candidates).toHaveLength(1)
  })
})

describe("loop check and summarize in gemini contents", () => {
  it("flags repeated function calls with the same response", async () => {
    const step = [
      { role: "model", parts: [{ functionCall: { name: "search", args: { q: "flights" } } }] },
      { role: "user", parts: [{ functionResponse: { name: "search", response: { output: "no results" } } }] },
    ]
    const contents = [{ role: "user", parts: [{ text: "find me a flight" }] }, ...step, ...step, ...step]
    const reply = await h.request(`${h.root}.v1.loop.check`, { format: "gemini", contents })
    expect(reply.ok).toBe(true)
    expect(reply.verdict.looping).toBe(true)
    expect(reply.verdict.findings[0]).toMatchObject({ pattern: "repeated_call", repeats: 3 })
    const calm = await h.request(`${h.root}.v1.loop.check`, { format: "gemini", contents: contents.slice(0, 3) })
    expect(calm.verdict.looping).toBe(false)
  })

  it('ctx.v1.summarize takes {format: "gemini", contents} and summarizes through the Gemini client', async () => {
    provider.control({ replies: [{ provider: "google", text: "- the user wants a flight to Paris" }] })
    const contents = [
      { role: "user", parts: [{ text: "I want a flight to Paris." }] },
      { role: "model", parts: [{ functionCall: { name: "search", args: { to: "CDG" } } }] },
      { role: "user", parts: [{ functionResponse: { name: "search", response: { output: "AF 123" } } }] },
    ]
    const reply = await h.request(
      `${h.root}.v1.summarize`,
      { format: "gemini", model: { provider: "google", name: "gemini-2.5-flash" }, contents, mode: "one_shot" },
      30_000,
    )
    expect(reply).toMatchObject({ ok: true, provider: "google", model: "gemini-2.5-flash", text: "- the user wants a flight to Paris" })
    const sent = provider
      .requests()
      .filter((r) => r.endpoint === "gemini_generate")
      .at(-1)
    expect(JSON.stringify(sent?.body)).toContain("AF 123")
    const malformed = await h.request(`${h.root}.v1.summarize`, {
      format: "gemini",
      model: { provider: "google", name: "gemini-2.5-flash" },
      contents: [],
    })
    expect(malformed).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    expect(malformed.error.path).toContain("contents")
  })
})
