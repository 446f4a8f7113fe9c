import type { Conversation } from "@ctxd/contracts"
import { FakeProvider } from "@ctxd/testing"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Redacted } from "effect"
import { TokenCounterConfig, TokenCounter } from "../src/index.ts"
import * as FakeProviderHooks from "./FakeProviderHooks.ts"
import * as Replay from "./Replay.ts"

const fake = FakeProviderHooks.fakeProvider()

const anthropic = () => ({ baseURL: fake().url, apiKey: Redacted.make("test") })
/** The count calls' timeout: the SDK's abort timer runs on real time even under the TestClock; long enough for a loaded machine's stalls. */
const TIMEOUT_MS = 30_000
const user = (text: string): Conversation.Message => ({ role: "user", parts: [{ type: "text", text }] })
const GPT = { provider: "openai", name: "gpt-4o" } as const

describe("TokenCounter routing", () => {
  it.scoped("auto without a provider configured counts with tiktoken; per-request overrides win", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make()
      const input = { model: Replay.MODEL, system: [], tools: [], messages: [user("hello world")] }
      const local = yield* service.countTurn(input)
      expect(local).toMatchObject({ backend: "tiktoken", encoding: "cl100k_base", exact: false, calibration: 1, messageTokens: [6] })
      expect(local.fallback).toBeUndefined()
      expect(yield* service.countTurn({ ...input, model: GPT })).toMatchObject({ backend: "tiktoken", encoding: "o200k_base" })
      expect(yield* service.countTurn({ ...input, backend: "heuristic" })).toMatchObject({
        backend: "heuristic",
        encoding: "heuristic",
        messageTokens: [7],
      })
      // asking for the provider's count without a provider: local, and the report says why
      expect(yield* service.countTurn({ ...input, backend: "anthropic_api" })).toMatchObject({
        backend: "tiktoken",
        exact: false,
        fallback: "not_configured",
      })
      expect((yield* service.metrics).fallbacks).toEqual({ not_configured: 1 })
    }),
  )

  it.scoped("auto with the provider configured counts exactly for Anthropic models, locally for OpenAI ones", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({ anthropic: anthropic(), timeoutMs: TIMEOUT_MS })
      const session = Replay.typical()
      const turn = session.turns[0]!
      const exact = yield* service.countTurn({ model: Replay.MODEL, system: session.system, tools: session.tools, messages: turn })
      expect(exact).toMatchObject({ backend: "anthropic_api", encoding: "anthropic", exact: true, calibration: 1 })
      expect(exact.systemTokens + exact.toolsTokens + exact.messageTokens.reduce((a, b) => a + b, 0)).toBe(
        Replay.groundTruth(session, turn),
      )
      const openai = yield* service.countTurn({ model: GPT, system: session.system, tools: session.tools, messages: turn })
      expect(openai).toMatchObject({ backend: "tiktoken", exact: false })
      expect(openai.fallback).toBeUndefined()
      expect(yield* service.countTurn({ model: GPT, backend: "anthropic_api", system: [], tools: [], messages: turn })).toMatchObject({
        backend: "tiktoken",
        fallback: "unsupported_provider",
      })
      const metrics = yield* service.metrics
      expect(metrics).toMatchObject({ turns: 3, exactTurns: 1, exactEver: true, breaker: { status: "closed" } })
    }),
  )

  it.scoped("counts whole bodies and segments exactly, or locally on request", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({ anthropic: anthropic(), timeoutMs: TIMEOUT_MS })
      const session = Replay.typical()
      const messages = session.turns.flat()
      const body = Replay.render(session, messages)
      const exact = yield* service.countRequest({ model: Replay.MODEL, body })
      expect(exact).toMatchObject({ tokens: Replay.groundTruth(session, messages), backend: "anthropic_api", exact: true })
      const texts = ["The quick brown fox jumps over the lazy dog.", "", "héllo wörld"]
      const segments = yield* service.countRequest({ model: Replay.MODEL, segments: texts })
      expect(segments.segments).toEqual(texts.map(FakeProvider.countTextTokens))
      expect(segments.tokens).toBe(texts.map(FakeProvider.countTextTokens).reduce((a, b) => a + b, 0))
      const estimate = yield* service.countRequest({ model: Replay.MODEL, body, backend: "tiktoken" })
      expect(estimate).toMatchObject({ backend: "tiktoken", exact: false })
      expect(Math.abs(estimate.tokens - exact.tokens) / exact.tokens).toBeLessThan(0.1)
      const openai = yield* service.countRequest({
        model: GPT,
        body: {
          model: "gpt-4o",
          messages: [
            { role: "user", content: "hello world" },
            { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }] },
          ],
        },
      })
      expect(openai).toMatchObject({ backend: "tiktoken", encoding: "o200k_base" })
      expect(openai.tokens).toBeGreaterThan(10)
      // an OpenAI Responses body: instructions and input items count like the Chat Completions messages
      const responses = yield* service.countRequest({
        model: GPT,
        body: {
          model: "gpt-4o",
          instructions: "be brief",
          input: [
            { type: "message", role: "user", content: [{ type: "input_text", text: "hello world" }] },
            { type: "reasoning", summary: [{ type: "summary_text", text: "think" }], encrypted_content: "gAAA" },
            { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
            { type: "function_call_output", call_id: "c1", output: "done" },
          ],
        },
      })
      expect(responses.tokens).toBeGreaterThan(openai.tokens)
      // a provider compaction starts the count: what precedes it is dropped by the provider
      const folded = { type: "message", role: "user", content: "a long task description ".repeat(40) }
      const item = { type: "compaction", encrypted_content: "gAAAAB-state" }
      const next = { type: "message", role: "user", content: "go on" }
      const from = (input: ReadonlyArray<unknown>) => service.countRequest({ model: GPT, body: { model: "gpt-4o", input } })
      const compacted = yield* from([item, next])
      expect((yield* from([folded, item, next])).tokens).toBe(compacted.tokens)
      expect((yield* from([folded, next])).tokens).toBeGreaterThan(compacted.tokens)
      const block = { type: "compaction", content: "the task so far" }
      const countAnthropic = (messages: ReadonlyArray<unknown>) =>
        service.countRequest({ model: Replay.MODEL, body: { model: Replay.MODEL.name, messages }, backend: "tiktoken" })
      const tail = [
        { role: "assistant", content: [block, { type: "text", text: "ok" }] },
        { role: "user", content: "go on" },
      ]
      expect((yield* countAnthropic([{ role: "user", content: folded.content }, ...tail])).tokens).toBe(
        (yield* countAnthropic(tail)).tokens,
      )
      // a Gemini body (as @google/genai takes it, and in the REST shape): counted locally for google models
      const contents = [
        { role: "user", parts: [{ text: "hello world" }] },
        { role: "model", parts: [{ functionCall: { name: "f", args: { q: "weather in Paris" } }, thoughtSignature: "c2ln".repeat(200) }] },
        { role: "user", parts: [{ functionResponse: { name: "f", response: { output: "sunny" } } }] },
      ]
      const tool = {
        functionDeclarations: [
          { name: "f", description: "look up", parametersJsonSchema: { type: "object", properties: { q: { type: "string" } } } },
        ],
      }
      const google = { provider: "google" as const, name: "gemini-2.5-flash" }
      const sdkShape = yield* service.countRequest({
        model: google,
        body: { model: "gemini-2.5-flash", contents, config: { systemInstruction: "be brief", tools: [tool], maxOutputTokens: 100 } },
      })
      const restShape = yield* service.countRequest({
        model: google,
        body: { contents, systemInstruction: { parts: [{ text: "be brief" }] }, tools: [tool] },
      })
      expect(sdkShape).toMatchObject({ backend: "tiktoken", exact: false })
      expect(restShape.tokens).toBe(sdkShape.tokens)
      const bare = yield* service.countRequest({ model: google, body: { contents } })
      // the system instruction and the declaration count; the 800-character signature does not
      expect(sdkShape.tokens).toBeGreaterThan(bare.tokens + 10)
      expect(bare.tokens).toBeLessThan(60)
    }),
  )
})

describe("TokenCounter routing with OpenAI", () => {
  const openai = () => ({ baseURL: `${fake().url}/v1`, apiKey: Redacted.make("test") })

  it.scoped(
    "auto counts each model with its own provider's endpoint; Chat Completions turns and other providers' backends stay local",
    () =>
      Effect.gen(function* () {
        const service = yield* TokenCounter.make({ anthropic: anthropic(), openai: openai(), timeoutMs: TIMEOUT_MS })
        const session = Replay.typical()
        const turn = session.turns[0]!
        const input = { model: Replay.OPENAI_MODEL, system: session.system, tools: session.tools, messages: turn }
        const exact = yield* service.countTurn(input)
        expect(exact).toMatchObject({ backend: "openai_api", encoding: "openai", exact: true, calibration: 1 })
        expect(exact.fallback).toBeUndefined()
        expect(exact.systemTokens + exact.toolsTokens + exact.messageTokens.reduce((a, b) => a + b, 0)).toBe(
          Replay.groundTruthResponses(session, turn),
        )
        expect(yield* service.countTurn({ ...input, format: "openai-responses" })).toEqual(exact)
        // Claude through Anthropic's endpoint in the same process
        expect(yield* service.countTurn({ ...input, model: Replay.MODEL })).toMatchObject({ backend: "anthropic_api", exact: true })

        // Chat Completions has no count endpoint: o200k, silently under auto, with the reason when asked for by name
        const chat = yield* service.countTurn({ ...input, format: "openai" })
        expect(chat).toMatchObject({ backend: "tiktoken", encoding: "o200k_base", exact: false })
        expect(chat.fallback).toBeUndefined()
        expect(yield* service.countTurn({ ...input, format: "openai", backend: "openai_api" })).toMatchObject({
          backend: "tiktoken",
          fallback: "chat_completions",
        })
        // a provider's backend asked for another provider's model
        expect(yield* service.countTurn({ ...input, backend: "anthropic_api" })).toMatchObject({
          backend: "tiktoken",
          fallback: "unsupported_provider",
        })
        expect(yield* service.countTurn({ ...input, model: Replay.MODEL, backend: "openai_api" })).toMatchObject({
          backend: "tiktoken",
          fallback: "unsupported_provider",
        })

        // a Responses body counts exactly; text segments are their text alone
        const messages = session.turns.flat()
        const body = yield* service.countRequest({ model: Replay.OPENAI_MODEL, body: Replay.renderResponses(session, messages) })
        expect(body).toMatchObject({ tokens: Replay.groundTruthResponses(session, messages), backend: "openai_api", exact: true })
        const texts = ["The quick brown fox jumps over the lazy dog.", "", "héllo wörld"]
        const segments = yield* service.countRequest({ model: Replay.OPENAI_MODEL, segments: texts })
        expect(segments).toMatchObject({ backend: "openai_api", segments: texts.map(FakeProvider.countTextTokens) })

        const metrics = yield* service.metrics
        expect(Object.keys(metrics.providers).sort()).toEqual(["anthropic", "openai"])
        expect(metrics.calls).toBe(metrics.providers["anthropic"]!.calls + metrics.providers["openai"]!.calls)
      }),
  )
})

describe("TokenCounter routing with Gemini", () => {
  it.scoped("auto counts google models with Gemini's endpoint; other formats and other providers' backends stay local", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({ google: { baseURL: fake().url, apiKey: Redacted.make("test") }, timeoutMs: TIMEOUT_MS })
      const session = Replay.typical()
      const turn = session.turns[0]!
      const input = { model: Replay.GEMINI_MODEL, system: session.system, tools: session.tools, messages: turn }
      const exact = yield* service.countTurn({ ...input, format: "gemini" })
      expect(exact).toMatchObject({ backend: "google_api", encoding: "google", exact: true, calibration: 1 })
      expect(exact.systemTokens + exact.toolsTokens + exact.messageTokens.reduce((a, b) => a + b, 0)).toBe(
        Replay.groundTruthGemini(session, turn),
      )
      expect(yield* service.countTurn({ ...input, format: "openai", backend: "google_api" })).toMatchObject({
        backend: "tiktoken",
        fallback: "unsupported_format",
      })
      expect(yield* service.countTurn({ ...input, backend: "openai_api" })).toMatchObject({
        backend: "tiktoken",
        fallback: "unsupported_provider",
      })
      // OpenAI is not configured here: asked for by name, it says so
      expect(yield* service.countTurn({ ...input, model: Replay.OPENAI_MODEL, backend: "openai_api" })).toMatchObject({
        backend: "tiktoken",
        fallback: "not_configured",
      })
      // the local fallback of a Gemini model: cl100k times the Gemini family's starting ratio
      const estimate = yield* service.countTurn({ ...input, backend: "tiktoken" })
      expect(estimate).toMatchObject({ backend: "tiktoken", encoding: "cl100k_base", calibration: 1.05 })
      // a whole body in the SDK's shape, exactly
      const messages = session.turns.flat()
      expect(yield* service.countRequest({ model: Replay.GEMINI_MODEL, body: Replay.renderGemini(session, messages) })).toMatchObject({
        tokens: Replay.groundTruthGemini(session, messages),
        backend: "google_api",
        exact: true,
      })
    }),
  )
})

describe("TokenCounter config", () => {
  it.scoped("reads the environment: backend, cache size, timeout, breaker, calibration, Anthropic", () =>
    Effect.gen(function* () {
      const env = new Map([
        ["CTXD_TOKEN_BACKEND", "heuristic"],
        ["CTXD_TOKEN_CACHE_SIZE", "64"],
        ["CTXD_TOKEN_TIMEOUT_MS", "500"],
        ["CTXD_TOKEN_BREAKER_OPEN_MS", "1000"],
        ["CTXD_TOKEN_CALIBRATION", "false"],
        ["ANTHROPIC_BASE_URL", "http://127.0.0.1:9"],
        ["OPENAI_API_KEY", "sk-test"],
        ["GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:8"],
      ])
      const config = yield* Effect.withConfigProvider(TokenCounterConfig.config, ConfigProvider.fromMap(env))
      expect(config).toMatchObject({
        backend: "heuristic",
        cacheCapacity: 64,
        timeoutMs: 500,
        maxInFlight: 16,
        breaker: { failureThreshold: 3, openForMs: 1_000, maxOpenForMs: 300_000 },
        calibration: false,
        calibrationAlpha: 0.1,
        anthropic: { baseURL: "http://127.0.0.1:9", apiKey: undefined },
        openai: { baseURL: undefined },
        google: { baseURL: "http://127.0.0.1:8", apiKey: undefined },
      })
      expect(Redacted.value(config.openai!.apiKey!)).toBe("sk-test")
      const none = yield* Effect.withConfigProvider(
        TokenCounterConfig.config,
        ConfigProvider.fromMap(
          new Map([
            ["ANTHROPIC_API_KEY", " "],
            ["OPENAI_BASE_URL", ""],
          ]),
        ),
      )
      expect(none).toEqual(TokenCounterConfig.defaults)
      const bad = yield* Effect.either(
        Effect.withConfigProvider(TokenCounterConfig.config, ConfigProvider.fromMap(new Map([["CTXD_TOKEN_BACKEND", "exact"]]))),
      )
      expect(bad._tag).toBe("Left")
      const service = yield* Effect.provide(
        TokenCounter.TokenCounter,
        TokenCounter.layerConfig.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(env)))),
      )
      expect(yield* service.countTurn({ model: Replay.MODEL, system: [], tools: [], messages: [user("abcdefgh")] })).toMatchObject({
        backend: "heuristic",
        messageTokens: [6],
      })
    }),
  )
})
