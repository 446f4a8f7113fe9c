/**
 * The OpenAI exact backend against the real `openai` SDK pointed at the fake
 * provider (whose `input_tokens` ground truth is the same prompt tokens a
 * Responses request bills).
 */
import type { Conversation } from "@ctxd/contracts"
import { LocalCounter } from "@ctxd/tokens"
import { describe, expect, it } from "@effect/vitest"
import { FakeProvider } from "@ctxd/testing"
import { Effect } from "effect"
import OpenAI from "openai"
import { type ExactCounter, OpenAICounter } from "../src/index.ts"
import * as FakeProviderHooks from "./FakeProviderHooks.ts"
import * as Replay from "./Replay.ts"

const fake = FakeProviderHooks.fakeProvider()

const local = LocalCounter.make({ backend: "tiktoken" })
const weights = (messages: ReadonlyArray<Conversation.Message>) => messages.map((m) => local.countMessage(m, "o200k_base"))
const countCalls = () =>
  fake()
    .requests()
    .filter((r) => r.endpoint === "responses_input_tokens").length

/** The exact backend on the fake provider (the SDK's abort timer is real time: 30 s, never reached). */
const counter = (options: ExactCounter.Options = {}) =>
  OpenAICounter.make({ baseURL: `${fake().url}/v1`, apiKey: "test", timeoutMs: 30_000, ...options })

const turnInput = (session: Replay.Session, messages: ReadonlyArray<Conversation.Message>): ExactCounter.TurnInput => ({
  model: Replay.OPENAI_MODEL.name,
  system: session.system,
  tools: session.tools,
  messages,
  weights: weights(messages),
})

describe("OpenAICounter (fake provider)", () => {
  it.scopedLive("segment counts add up to the provider's count of the whole Responses prompt, turn after turn", () =>
    Effect.gen(function* () {
      const exact = yield* counter()
      const mismatches = yield* Replay.segmentMismatches(
        Replay.tauBench(6),
        (session, messages) => exact.countTurn(turnInput(session, messages)),
        (session, history) => Replay.groundTruthResponses(session, history),
      )
      expect(mismatches).toEqual([])
      expect(
        fake()
          .requests()
          .every((r) => r.status === 200),
      ).toBe(true)
    }),
  )

  it.scopedLive("a whole body's count equals the usage the fake bills for it; text segments count their text alone", () =>
    Effect.gen(function* () {
      const exact = yield* counter()
      const session = Replay.typical()
      const messages = session.turns.flat()
      const body = Replay.renderResponses(session, messages)
      // keys the endpoint does not take (store, prompt_cache_key, max_output_tokens) are dropped
      const tokens = yield* exact.countBody(Replay.OPENAI_MODEL.name, body)
      // the same body sent through the official SDK: what the fake bills for it
      const client = new OpenAI({ baseURL: `${fake().url}/v1`, apiKey: "test", maxRetries: 0 })
      const billed = yield* Effect.promise(() =>
        client.responses.create(body as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming),
      )
      expect(tokens).toBe(billed.usage?.input_tokens)
      expect(tokens).toBe(Replay.groundTruthResponses(session, messages))
      const text = "The quick brown fox jumps over the lazy dog."
      expect(yield* exact.countText(Replay.OPENAI_MODEL.name, text)).toBe(FakeProvider.countTextTokens(text))
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
      // cold: 2 baselines + prefix + tools + the batch; then one call per turn
      expect(perTurn[0]).toBe(5)
      expect(perTurn.slice(1).every((n) => n === 1)).toBe(true)
      expect(exact.stats().calls).toBe(countCalls())
    }),
  )

  it.scopedLive("unpaired tool calls and outputs are counted as messages and flagged approximate; every request is valid", () =>
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
        model: Replay.OPENAI_MODEL.name,
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
          .every((r) => r.status === 200),
      ).toBe(true)
    }),
  )
})
