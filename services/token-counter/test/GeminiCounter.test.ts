/**
 * The Gemini exact backend against the fake provider: contents through the
 * real `@google/genai` SDK (`ai.models.countTokens`), the prefix through the
 * REST `generateContentRequest` form the SDK does not send to the Developer
 * API; the fake's ground truth is the prompt a `generateContent` bills.
 */
import type { Conversation } from "@ctxd/contracts"
import { GoogleGenAI } from "@google/genai"
import { FakeProvider } from "@ctxd/testing"
import { LocalCounter } from "@ctxd/tokens"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type ExactCounter, GeminiCounter } from "../src/index.ts"
import * as FakeProviderHooks from "./FakeProviderHooks.ts"
import * as Replay from "./Replay.ts"

const fake = FakeProviderHooks.fakeProvider()

const local = LocalCounter.make({ backend: "tiktoken" })
const weights = (messages: ReadonlyArray<Conversation.Message>) => messages.map((m) => local.countMessage(m, "cl100k_base"))
const countCalls = () =>
  fake()
    .requests()
    .filter((r) => r.endpoint === "gemini_count_tokens").length

/** The exact backend on the fake provider (the SDK's abort timer is real time: 30 s, never reached). */
const counter = (options: ExactCounter.Options = {}) =>
  GeminiCounter.make({ baseURL: fake().url, apiKey: "test", timeoutMs: 30_000, ...options })

const turnInput = (
  session: Replay.Session,
  messages: ReadonlyArray<Conversation.Message>,
  model: string = Replay.GEMINI_MODEL.name,
): ExactCounter.TurnInput => ({
  model,
  system: session.system,
  tools: session.tools,
  messages,
  weights: weights(messages),
})

describe("GeminiCounter (fake provider)", () => {
  for (const model of ["gemini-2.5-flash", "gemini-3-pro-preview"]) {
    it.scopedLive(`${model}: segment counts add up to the provider's count of the whole prompt, turn after turn`, () =>
      Effect.gen(function* () {
        const exact = yield* counter()
        const mismatches = yield* Replay.segmentMismatches(
          Replay.tauBench(6),
          (session, messages) => exact.countTurn(turnInput(session, messages, model)),
          (session, history) => Replay.groundTruthGemini(session, history, model),
        )
        expect(mismatches).toEqual([])
        expect(
          fake()
            .requests()
            .filter((r) => r.status !== 200),
        ).toEqual([])
      }),
    )
  }

  it.scopedLive(
    "a whole body's count equals the usage the fake bills for it through @google/genai; text segments count their text alone",
    () =>
      Effect.gen(function* () {
        const exact = yield* counter()
        const session = Replay.typical()
        const messages = session.turns.flat()
        const body = Replay.renderGemini(session, messages)
        const tokens = yield* exact.countBody(Replay.GEMINI_MODEL.name, body)
        const ai = new GoogleGenAI({ apiKey: "test", httpOptions: { baseUrl: fake().url, retryOptions: { attempts: 1 } } })
        const billed = yield* Effect.promise(() =>
          ai.models.generateContent(body as unknown as Parameters<typeof ai.models.generateContent>[0]),
        )
        expect(tokens).toBe(billed.usageMetadata?.promptTokenCount)
        expect(tokens).toBe(Replay.groundTruthGemini(session, messages))
        // contents alone: through the SDK, the same count as the SDK's own call
        const contents = { contents: body["contents"] }
        const sdk = yield* Effect.promise(() =>
          ai.models.countTokens({ model: Replay.GEMINI_MODEL.name, contents: body["contents"] as never }),
        )
        expect(yield* exact.countBody(Replay.GEMINI_MODEL.name, contents)).toBe(sdk.totalTokens)
        const text = "The quick brown fox jumps over the lazy dog."
        expect(yield* exact.countText(Replay.GEMINI_MODEL.name, text)).toBe(FakeProvider.countTextTokens(text))
      }),
  )

  it.scopedLive("a warm session makes at most one count call per turn", () =>
    Effect.gen(function* () {
      const exact = yield* counter()
      const session = Replay.typical()
      const perTurn: Array<number> = []
      for (const messages of session.turns) {
        const before = countCalls()
        yield* exact.countTurn(turnInput(session, messages))
        perTurn.push(countCalls() - before)
      }
      // cold: 3 baselines + prefix + tools + the batch; then one call per turn
      expect(perTurn[0]).toBe(6)
      expect(perTurn.slice(1).every((n) => n === 1)).toBe(true)
      expect(exact.stats().calls).toBe(countCalls())
    }),
  )

  it.scopedLive("unpaired function calls and responses are counted as text and flagged approximate; every request is valid", () =>
    Effect.gen(function* () {
      const exact = yield* counter()
      const orphanResult: Conversation.Message = {
        role: "tool",
        parts: [{ type: "tool_result", callId: "call_old", isError: false, content: [{ type: "text", text: "42 degrees" }] }],
      }
      const openCall: Conversation.Message = {
        role: "assistant",
        parts: [{ type: "tool_call", id: "call_new", name: "get_weather", input: { city: "Paris" } }],
      }
      const next: Conversation.Message = { role: "user", parts: [{ type: "text", text: "and tomorrow?" }] }
      const counts = yield* exact.countTurn({
        model: Replay.GEMINI_MODEL.name,
        system: [],
        tools: [],
        messages: [orphanResult, openCall, next],
        weights: [1, 1, 1],
      })
      expect(counts.approximate).toBe(true)
      expect(counts.messageTokens.every((n) => n > 0)).toBe(true)
      expect(
        fake()
          .requests()
          .filter((r) => r.status !== 200),
      ).toEqual([])
    }),
  )
})
