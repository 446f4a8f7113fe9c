/**
 * The summarizer with the real Anthropic and OpenAI SDKs against the fake
 * provider: modes, JSON validation and repair, truncation, hierarchy,
 * retries, and every request fitting the summarizer's window.
 */
import type { Conversation } from "@ctxd/contracts"
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@effect/vitest"
import { Chunk, Clock, Effect, Fiber, TestClock } from "effect"
import { Llm, Summarizer } from "../src/index.ts"
import * as Fixture from "./Fixture.ts"

let server: FakeProvider.FakeProviderServer
beforeAll(async () => {
  server = await FakeProvider.start()
})
afterAll(() => server.close())
beforeEach(() => server.reset())

const calls = () =>
  server.requests().filter((r) => r.endpoint === "messages" || r.endpoint === "chat_completions" || r.endpoint === "gemini_generate")

const snapshot = {
  currentTask: {
    description: "Rebook the user's flight HAT001 to Friday",
    state: "waiting for the user to confirm",
    nextSteps: ["confirm", "book"],
  },
  keyFindings: ["user id mia_li_3668", "reservation NO6JO3 is economy"],
  activeHypotheses: ["the basic economy fare cannot be changed"],
  entities: [{ name: "NO6JO3", type: "reservation", description: "JFK → SFO, 2 passengers" }],
  relations: [{ from: "mia_li_3668", relation: "owns", to: "NO6JO3" }],
  userPreferences: ["prefers window seats"],
  openQuestions: ["does the user want travel insurance?"],
}

describe("Summarizer", () => {
  it.live("rolling: previous summary + new span → at most N bullets, through the Anthropic SDK", () =>
    Effect.gen(function* () {
      const summarizer = yield* Fixture.make(server, { bullets: 5 })
      const bullets = Array.from({ length: 9 }, (_, i) => `- point ${i + 1}`).join("\n")
      server.control({ replies: [{ text: `Here you go:\n${bullets}` }] })
      const result = yield* summarizer.summarize({
        items: Fixture.tauItems(12),
        sessionModel: Fixture.CLAUDE,
        mode: "rolling",
        previous: "- the user wants to change a reservation",
      })
      expect(result.text).toBe(["- point 1", "- point 2", "- point 3", "- point 4", "- point 5"].join("\n"))
      expect(result).toMatchObject({
        mode: "rolling",
        depth: 1,
        calls: 1,
        provider: "anthropic",
        model: "claude-sonnet-4-6",
        fallback: null,
      })
      expect(result.tokensIn).toBeGreaterThan(0)
      const [request] = calls()
      const prompt = Fixture.promptOf(request!.body)
      expect(prompt.system).toContain("at most 5 bullets")
      expect(prompt.user).toContain("<previous_summary>\n- the user wants to change a reservation")
      expect(prompt.user).toContain('<conversation messages="1–12">')
      expect(prompt.user).toMatch(/\[1\] USER:/)
      expect(prompt.user).toMatch(/→ call \w+\(/)
      expect(prompt.user).toMatch(/← result of \w+/)
    }),
  )

  it.live("one-shot through the OpenAI SDK, and an OpenAI-compatible base URL for a self-hosted model", () =>
    Effect.gen(function* () {
      const openai = yield* Fixture.make(server)
      const result = yield* openai.summarize({ items: Fixture.tauItems(6), sessionModel: Fixture.GPT, mode: "one_shot" })
      expect(result).toMatchObject({ mode: "one_shot", depth: 1, provider: "openai", model: "gpt-4o" })
      expect(result.text).toMatch(/^Summary of 2 messages/)
      expect(calls()[0]!.path).toBe("/v1/chat/completions")
      expect(calls()[0]!.body).toMatchObject({ model: "gpt-4o", max_completion_tokens: 2_048 })

      const selfHosted = yield* Fixture.make(server, {
        model: "llama-3.1-8b-instruct",
        compatible: { baseURL: server.openaiBaseURL },
        contextWindow: 8_192,
      })
      const local = yield* selfHosted.summarize({ items: Fixture.tauItems(6), sessionModel: Fixture.CLAUDE, mode: "one_shot" })
      expect(local).toMatchObject({ provider: "openai_compatible", model: "llama-3.1-8b-instruct" })
      expect(calls()[1]!.body).toMatchObject({ model: "llama-3.1-8b-instruct", max_tokens: 2_048 })
      expect(calls()[1]!.headers["authorization"]).toBeDefined()
    }),
  )

  it.live("a Gemini session summarizes through @google/genai (generateContent), and its failures are classified", () =>
    Effect.gen(function* () {
      const summarizer = yield* Fixture.make(server, { retries: 1 })
      server.control({ replies: [{ text: "- the user changed a flight" }] })
      const result = yield* summarizer.summarize({ items: Fixture.tauItems(6), sessionModel: Fixture.GEMINI, mode: "one_shot" })
      expect(result).toMatchObject({
        mode: "one_shot",
        depth: 1,
        calls: 1,
        provider: "google",
        model: "gemini-2.5-flash",
        text: "- the user changed a flight",
      })
      expect(result.tokensIn).toBeGreaterThan(0)
      const [request] = calls()
      expect(request!.path).toMatch(/^\/v1(?:beta)?\/models\/gemini-2\.5-flash:generateContent$/)
      expect(request!.headers["x-goog-api-key"]).toBeDefined()
      const body = request!.body as {
        contents: Array<{ role: string; parts: Array<{ text: string }> }>
        systemInstruction: { parts: Array<{ text: string }> }
        generationConfig: Record<string, unknown>
      }
      expect(body.generationConfig).toMatchObject({ maxOutputTokens: 2_048 })
      expect(body.systemInstruction.parts[0]!.text.length).toBeGreaterThan(0)
      expect(body.contents[0]!.role).toBe("user")
      expect(body.contents[0]!.parts[0]!.text).toMatch(/\[1\] USER:/)
      // a 503 is retried, a 400 is not
      server.control({ replies: [{ error: { status: 503 } }, { text: "- again" }] })
      const retried = yield* summarizer.summarize({ items: Fixture.tauItems(6), sessionModel: Fixture.GEMINI, mode: "one_shot" })
      expect(retried).toMatchObject({ calls: 2, text: "- again" })
      server.control({ replies: [{ error: { status: 400, message: "bad" } }] })
      const failed = yield* Effect.either(
        summarizer.summarize({ items: Fixture.tauItems(6), sessionModel: Fixture.GEMINI, mode: "one_shot" }),
      )
      expect(failed._tag).toBe("Left")
      expect(JSON.stringify(failed)).toContain("rejected")
    }),
  )

  it.live("the loop judge's JSON call through the google client asks for application/json", () =>
    Effect.gen(function* () {
      server.control({ replies: [{ text: '{"looping": false}' }] })
      const google = Llm.make(Fixture.config(server)).client("google")
      const answer = yield* google.complete({
        model: "gemini-2.5-flash",
        system: "judge",
        prompt: "is this a loop?",
        maxTokens: 200,
        json: true,
      })
      expect(answer).toMatchObject({ text: '{"looping": false}', stopReason: "stop" })
      expect(answer.inputTokens).toBeGreaterThan(0)
      expect(calls()[0]!.body).toMatchObject({
        generationConfig: { maxOutputTokens: 200, responseMimeType: "application/json" },
        systemInstruction: { parts: [{ text: "judge" }] },
      })
    }),
  )

  it.live("structured: the model's JSON is validated against the schema and rendered", () =>
    Effect.gen(function* () {
      const summarizer = yield* Fixture.make(server)
      server.control({ replies: [{ text: "```json\n" + JSON.stringify(snapshot) + "\n```" }] })
      const result = yield* summarizer.summarize({ items: Fixture.tauItems(10), sessionModel: Fixture.CLAUDE, mode: "structured" })
      expect(result.fallback).toBeNull()
      expect(result.snapshot).toEqual(snapshot)
      expect(result.text).toContain("Current task: Rebook the user's flight HAT001 to Friday")
      expect(result.text).toContain("Relations:\n- mia_li_3668 —owns→ NO6JO3")
      expect(Fixture.promptOf(calls()[0]!.body).system).toContain('"currentTask"')
      // lists the model leaves out default to empty
      server.control({ replies: [{ text: JSON.stringify({ currentTask: { description: "d", state: "s" } }) }] })
      const sparse = yield* summarizer.summarize({ items: Fixture.tauItems(4), sessionModel: Fixture.GPT, mode: "structured" })
      expect(sparse.snapshot).toMatchObject({ keyFindings: [], entities: [], currentTask: { nextSteps: [] } })
      // OpenAI is asked for a JSON object
      expect(calls().at(-1)!.body).toMatchObject({ response_format: { type: "json_object" } })
    }),
  )

  it.live("structured: invalid JSON gets one repair call, then falls back to the text", () =>
    Effect.gen(function* () {
      const summarizer = yield* Fixture.make(server)
      server.control({ replies: [{ text: "{ not json at all" }, { text: JSON.stringify(snapshot) }] })
      const repaired = yield* summarizer.summarize({ items: Fixture.tauItems(8), sessionModel: Fixture.CLAUDE, mode: "structured" })
      expect(repaired).toMatchObject({ calls: 2, fallback: null, snapshot })
      expect(Fixture.promptOf(calls()[1]!.body).user).toContain("{ not json at all")

      server.control({ replies: [{ text: '{"currentTask": 3}' }, { text: "The user wants to rebook; still unsure." }] })
      const fallback = yield* summarizer.summarize({ items: Fixture.tauItems(8), sessionModel: Fixture.CLAUDE, mode: "structured" })
      expect(fallback).toMatchObject({ calls: 2, fallback: "invalid_json", snapshot: null, text: '{"currentTask": 3}' })
    }),
  )

  it.live("tool results are cut to tool_result_max_pct of the summarizer input, and the request fits", () =>
    Effect.gen(function* () {
      server.control({ contextWindow: 8_192 })
      const summarizer = yield* Fixture.make(server, { contextWindow: 8_192, toolResultMaxPct: 0.1 })
      const target = summarizer.target(Fixture.CLAUDE)
      const huge = Array.from({ length: 4_000 }, (_, i) => `line ${i}: {"status": "ok", "value": ${i * 7}}`).join("\n")
      const items: Array<{ seq: number; message: Conversation.Message }> = [
        { seq: 1, message: { role: "user", parts: [{ type: "text", text: "list the records" }] } },
        { seq: 2, message: { role: "assistant", parts: [{ type: "tool_call", id: "c1", name: "list_records", input: {} }] } },
        {
          seq: 3,
          message: {
            role: "tool",
            parts: [{ type: "tool_result", callId: "c1", content: [{ type: "text", text: huge }], isError: false }],
          },
        },
        { seq: 4, message: { role: "assistant", parts: [{ type: "text", text: "There are 4000 records." }] } },
      ]
      const result = yield* summarizer.summarize({ items, sessionModel: Fixture.CLAUDE, mode: "one_shot" })
      expect(result).toMatchObject({ truncatedToolResults: 1, depth: 1, calls: 1 })
      const prompt = Fixture.promptOf(calls()[0]!.body).user
      expect(prompt).toContain("line 0:")
      expect(prompt).toContain("line 3999:")
      expect(prompt).toMatch(/\[\d+ of \d+ tokens cut\]/)
      expect(FakeProvider.countTextTokens(prompt)).toBeLessThan(target.inputBudget)
      expect(calls().every((r) => r.status === 200)).toBe(true)
    }),
  )

  it.live("a span larger than the summarizer's window is summarized hierarchically, every request fitting", () =>
    Effect.gen(function* () {
      server.control({ contextWindow: 4_096 })
      const summarizer = yield* Fixture.make(server, { contextWindow: 4_096, maxOutputTokens: 512 })
      const items = Fixture.tauItems(400)
      const result = yield* summarizer.summarize({ items, sessionModel: Fixture.GPT, mode: "rolling", previous: "- earlier: nothing yet" })
      expect(result.depth).toBeGreaterThanOrEqual(2)
      expect(result.calls).toBe(calls().length)
      expect(result.calls).toBeGreaterThan(3)
      // the fake provider rejects any prompt above its 4,096-token window with a 400: none was
      expect(calls().every((r) => r.status === 200)).toBe(true)
      const last = Fixture.promptOf(calls().at(-1)!.body)
      expect(last.user).toContain("<previous_summary>")
      expect(last.user).toMatch(/<part index="1" messages="1–\d+">/)
      expect(last.user).toContain(`–${items.at(-1)!.seq}">`)
    }),
  )

  it.live("the depth is bounded: beyond maxDepth the span fails as too large", () =>
    Effect.gen(function* () {
      server.control({ contextWindow: 4_096 })
      const summarizer = yield* Fixture.make(server, { contextWindow: 4_096, maxOutputTokens: 512, maxDepth: 1 })
      const error = yield* Effect.flip(summarizer.summarize({ items: Fixture.tauItems(200), sessionModel: Fixture.GPT }))
      expect(error).toMatchObject({ _tag: "SummarizeFailed", reason: "too_large" })
    }),
  )

  it.live("provider errors are retried 3 times, then fail", () =>
    Effect.gen(function* () {
      const summarizer = yield* Fixture.make(server)
      server.control({ failNext: 2, errorStatus: 529 })
      const ok = yield* summarizer.summarize({ items: Fixture.tauItems(4), sessionModel: Fixture.CLAUDE })
      expect(ok.calls).toBe(3)
      expect(calls().map((r) => r.status)).toEqual([529, 529, 200])

      server.control({ clearRequests: true, failNext: 10, errorStatus: 500 })
      const failed = yield* Effect.flip(summarizer.summarize({ items: Fixture.tauItems(4), sessionModel: Fixture.CLAUDE }))
      expect(failed).toMatchObject({ reason: "provider" })
      expect(calls()).toHaveLength(4)

      // a rejected request (400) is not retried
      server.control({ reset: true, replies: [{ error: { status: 400, message: "bad" } }] })
      yield* Effect.flip(summarizer.summarize({ items: Fixture.tauItems(4), sessionModel: Fixture.CLAUDE }))
      expect(calls()).toHaveLength(1)
    }),
  )

  it.effect("the retry backoff is exponential (TestClock)", () =>
    Effect.gen(function* () {
      // a call's timeout far beyond the backoffs, so the only sleep due soon is the backoff's
      const summarizer = yield* Fixture.make(server, { retryBaseMs: 10_000, timeoutMs: 600_000 })
      server.control({ failNext: 2 })
      const fiber = yield* Effect.fork(summarizer.summarize({ items: Fixture.tauItems(4), sessionModel: Fixture.CLAUDE }))
      /** The sleeps due within a minute of the test clock's now, as durations. */
      const dueSoon = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        return Chunk.toReadonlyArray(yield* TestClock.sleeps())
          .map((end) => end - now)
          .filter((ms) => ms > 0 && ms < 60_000)
      })
      /** Waits until `n` calls reached the provider and the summarizer sleeps on the clock before the next; its length. */
      const backoffAfter = (n: number) =>
        Effect.gen(function* () {
          const deadline = Date.now() + 20_000
          for (;;) {
            const due = yield* dueSoon
            if (calls().length >= n && due.length === 1) return due[0]!
            if (Date.now() > deadline)
              return yield* Effect.dieMessage(`no backoff after ${n} call(s): ${calls().length} call(s), ${due.join(", ")}`)
            yield* Effect.promise(() => new Promise((r) => setTimeout(r, 10)))
          }
        })
      const first = yield* backoffAfter(1)
      expect(calls()).toHaveLength(1)
      expect(first).toBeGreaterThanOrEqual(8_000) // jitter: 0.8–1.2 × 10 s
      expect(first).toBeLessThanOrEqual(12_000)
      // just short of it the summarizer still sleeps there, so it cannot have called again
      yield* TestClock.adjust(first - 1)
      expect(yield* dueSoon).toEqual([1])
      expect(calls()).toHaveLength(1)
      yield* TestClock.adjust(1)
      const second = yield* backoffAfter(2)
      expect(calls()).toHaveLength(2)
      expect(second).toBeGreaterThanOrEqual(16_000) // 0.8–1.2 × 20 s
      expect(second).toBeLessThanOrEqual(24_000)
      yield* TestClock.adjust(second)
      const result = yield* Fiber.join(fiber)
      expect(result.calls).toBe(3)
    }),
  )

  it("the target: the session's model unless one is configured, with its budget", () => {
    const base = Fixture.config({ url: "http://x", openaiBaseURL: "http://x/v1" } as FakeProvider.FakeProviderServer)
    expect(Summarizer.target(base, Fixture.CLAUDE)).toMatchObject({
      provider: "anthropic",
      name: "claude-sonnet-4-6",
      contextWindow: 200_000,
      maxOutputTokens: 2_048,
    })
    expect(Summarizer.target({ ...base, model: "claude-haiku-4-5" }, Fixture.GPT)).toMatchObject({
      provider: "anthropic",
      name: "claude-haiku-4-5",
    })
    expect(Summarizer.target({ ...base, model: "gpt-4o-mini" }, Fixture.CLAUDE)).toMatchObject({ provider: "openai" })
    expect(Summarizer.target({ ...base, model: "gemini-2.5-flash" }, Fixture.CLAUDE)).toMatchObject({
      provider: "google",
      contextWindow: 1_048_576,
    })
    expect(Summarizer.target(base, Fixture.GEMINI)).toMatchObject({ provider: "google", name: "gemini-2.5-flash" })
    expect(Summarizer.target({ ...base, model: "qwen", compatible: { baseURL: "http://gpu:8000/v1" } }, Fixture.CLAUDE).provider).toBe(
      "openai_compatible",
    )
    const t = Summarizer.target({ ...base, contextWindow: 10_000, maxOutputTokens: 1_000 }, Fixture.GPT)
    expect(t.inputBudget).toBe(Math.floor(9_000 * 0.9) - 64)
  })
})
