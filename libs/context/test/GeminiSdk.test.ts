/**
 * The Gemini format against the official `@google/genai` SDK: tau-bench
 * sessions replayed turn by turn as Gemini contents (call ids left out, as
 * most Gemini clients do), each turn's ctxd-rendered body sent with
 * `ai.models.generateContent(body)` and counted with `ai.models.countTokens`
 * against the fake provider, which validates like the API (known fields,
 * roles, function responses after their calls, thought signatures for
 * Gemini 3).
 */
import { Gemini } from "@ctxd/contracts"
import { ApiError, GoogleGenAI } from "@google/genai"
import { FakeProvider, Workloads } from "@ctxd/testing"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Models from "../src/Models.ts"
import * as Normalize from "../src/Normalize.ts"
import * as Pipeline from "../src/Pipeline.ts"
import * as RenderGemini from "../src/providers/gemini/Render.ts"

type Json = Record<string, unknown>

const decodeContents = Schema.decodeUnknownSync(Schema.Array(Gemini.Content))
const decodeTools = Schema.decodeUnknownSync(Schema.Array(Gemini.Tool))
const estimate = (value: unknown): number => Math.ceil(JSON.stringify(value).length / 4)

let server: FakeProvider.FakeProviderServer
let ai: GoogleGenAI

beforeAll(async () => {
  server = await FakeProvider.start()
  ai = new GoogleGenAI({ apiKey: "test", httpOptions: { baseUrl: server.url, retryOptions: { attempts: 1 } } })
})
afterAll(() => server.close())

const replay = async (id: string, modelName: string, ids: boolean) => {
  const session = Workloads.toGemini(Workloads.tauBenchSession(id), { ids })
  const tools = Normalize.tools("gemini", decodeTools(session.tools))
  const system = Normalize.system(session.systemInstruction)
  const model = Models.resolve({ provider: "google", name: modelName })
  const options = Pipeline.resolveOptions({ windowMessages: 12, windowStep: 4, maskKeep: 3 })
  const history: Array<Pipeline.StoredMessage> = []
  const known = new Set<string>()
  const answered = new Set<string>()
  let cachedTurns = 0
  let generated = 0
  let calls = 0
  for (const [t, turn] of session.turns.entries()) {
    const open = () =>
      Normalize.openCalls(
        history.map((h) => h.message),
        known,
        answered,
      )
    const incoming = Normalize.fromGeminiIndexed(decodeContents(turn.contents), { seed: `turn-${t}`, open })
    expect(Normalize.findPairingError(known, answered, incoming, "contents")).toBeUndefined()
    for (const { message } of incoming) {
      for (const p of message.parts) {
        if (p.type !== "tool_call") continue
        calls++
        if (p.generatedId === true) generated++
      }
      history.push({ seq: history.length + 1, message, tokens: estimate(message) })
      Normalize.recordPairing(known, answered, message)
    }
    const out = Pipeline.run({
      tenant: "tau",
      session: session.id,
      format: "gemini",
      model,
      system,
      systemTokens: estimate(system),
      tools,
      toolsTokens: estimate(tools),
      history,
      options,
      counter: { backend: "estimate", encoding: "chars/4", exact: false, calibration: 1 },
    })
    const body = out.request as Json & { contents: Array<Json>; config: Json }
    expect(body).toMatchObject({ model: modelName, config: { maxOutputTokens: model.maxOutputTokens } })
    // a made-up id never reaches Gemini
    expect(JSON.stringify(body)).not.toMatch(/"id":"gc_/)
    const response = await ai.models.generateContent(body as unknown as Parameters<typeof ai.models.generateContent>[0])
    expect(response.candidates?.[0]?.content?.role).toBe("model")
    const usage = response.usageMetadata!
    expect(usage.promptTokenCount).toBeGreaterThan(0)
    expect(usage.totalTokenCount).toBe(usage.promptTokenCount! + usage.candidatesTokenCount!)
    if ((usage.cachedContentTokenCount ?? 0) > 0) cachedTurns++
    expect(FakeProvider.countRequestTokens("gemini", body)).toBe(usage.promptTokenCount)
    // the SDK counts contents only (systemInstruction and tools are Vertex-only in countTokens)
    const counted = await ai.models.countTokens({ model: modelName, contents: body.contents as never })
    expect(counted.totalTokens).toBe(FakeProvider.countRequestTokens("gemini", { contents: body.contents }))
    // the REST countTokens with the whole request (generateContentRequest) counts what generateContent bills
    const rest = await fetch(`${server.url}/v1beta/models/${modelName}:countTokens`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-goog-api-key": "test" },
      body: JSON.stringify({ generateContentRequest: { model: `models/${modelName}`, ...RenderGemini.toRest(body) } }),
    })
    expect(((await rest.json()) as { totalTokens: number }).totalTokens).toBe(usage.promptTokenCount)
  }
  return { turns: session.turns.length, cachedTurns, generated, calls }
}

describe("gemini bodies through the official SDK", () => {
  it("a replayed tau-bench session without call ids: every turn's body is accepted, counted, and its prefix cached", async () => {
    const { turns, cachedTurns, generated, calls } = await replay("tau-airline-19-3", "gemini-2.5-flash", false)
    expect(turns).toBeGreaterThan(3)
    expect(calls).toBeGreaterThan(0)
    expect(generated).toBe(calls)
    expect(cachedTurns).toBeGreaterThan(0)
  })

  it("with call ids, on a Gemini 3 model (calls from elsewhere carry the documented placeholder signature)", async () => {
    const { turns, generated, calls } = await replay("tau-airline-19-3", "gemini-3-pro-preview", true)
    expect(turns).toBeGreaterThan(3)
    expect(calls).toBeGreaterThan(0)
    expect(generated).toBe(0)
  })

  it("the fake provider refuses what the API refuses", async () => {
    const rejection = async (model: string, contents: Array<Json>, config: Json = {}): Promise<ApiError> => {
      try {
        await ai.models.generateContent({ model, contents: contents as never, config })
      } catch (e) {
        if (e instanceof ApiError) return e
        throw e
      }
      throw new Error("expected a 400")
    }
    const user = { role: "user", parts: [{ text: "hi" }] }
    const call = (name: string, extra: Json = {}) => ({ functionCall: { name, args: {} }, ...extra })
    const response = (name: string) => ({ functionResponse: { name, response: { output: "x" } } })
    const cases: Array<[string, string, Array<Json>, string]> = [
      ["a bad role", "gemini-2.5-flash", [{ role: "assistant", parts: [{ text: "x" }] }], "valid role"],
      ["empty parts", "gemini-2.5-flash", [user, { role: "model", parts: [] }], "must not be empty"],
      [
        "fewer responses than calls",
        "gemini-2.5-flash",
        [user, { role: "model", parts: [call("f"), call("g")] }, { role: "user", parts: [response("f")] }],
        "number of function response parts",
      ],
      [
        "a response without its call turn",
        "gemini-2.5-flash",
        [user, { role: "user", parts: [response("f")] }],
        "immediately after a function call turn",
      ],
      [
        "a response for another function",
        "gemini-2.5-flash",
        [user, { role: "model", parts: [call("f")] }, { role: "user", parts: [response("g")] }],
        "'g'",
      ],
      [
        "an unsigned call in the current turn (Gemini 3)",
        "gemini-3-pro-preview",
        [user, { role: "model", parts: [call("f")] }, { role: "user", parts: [response("f")] }],
        "thought_signature",
      ],
    ]
    for (const [what, model, contents, mention] of cases) {
      const error = await rejection(model, contents)
      expect(error.status, what).toBe(400)
      expect(error.message, what).toContain(mention)
    }
    // signed: accepted
    const ok = await ai.models.generateContent({
      model: "gemini-3-pro-preview",
      contents: [
        user,
        { role: "model", parts: [call("f", { thoughtSignature: "c2ln" })] },
        { role: "user", parts: [response("f")] },
      ] as never,
    })
    expect(ok.text?.length).toBeGreaterThan(0)
    // an unknown top-level field (the SDK drops unknown config keys, so over plain HTTP)
    const raw = await fetch(`${server.url}/v1beta/models/gemini-2.5-flash:generateContent`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-goog-api-key": "test" },
      body: JSON.stringify({ contents: [user], cache_control: {} }),
    })
    expect(raw.status).toBe(400)
    expect(await raw.json()).toMatchObject({
      error: { code: 400, status: "INVALID_ARGUMENT", message: expect.stringContaining("cache_control") },
    })
  })
})
