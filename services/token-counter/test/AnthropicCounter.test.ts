/**
 * The exact backend against the real Anthropic SDK pointed at the fake
 * provider (whose `count_tokens` ground truth is the Claude tokenizer).
 */
import type { Conversation } from "@ctxd/contracts"
import { LocalCounter } from "@ctxd/tokens"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { AnthropicCounter } from "../src/index.ts"
import * as FakeProviderHooks from "./FakeProviderHooks.ts"
import * as Replay from "./Replay.ts"

const fake = FakeProviderHooks.fakeProvider()

const local = LocalCounter.make({ backend: "tiktoken" })
const weights = (messages: ReadonlyArray<Conversation.Message>) => messages.map((m) => local.countMessage(m, "cl100k_base"))
const countCalls = () =>
  fake()
    .requests()
    .filter((r) => r.endpoint === "count_tokens").length

/**
 * The exact backend on the fake provider. The SDK's abort timer runs on real
 * time even under the TestClock: long enough (30 s) that a loaded machine's
 * stalls never turn a count into a timeout.
 */
const counter = (options: AnthropicCounter.Options = {}) =>
  AnthropicCounter.make({ baseURL: fake().url, apiKey: "test", timeoutMs: 30_000, ...options })

const turnInput = (session: Replay.Session, messages: ReadonlyArray<Conversation.Message>): AnthropicCounter.TurnInput => ({
  model: Replay.MODEL.name,
  system: session.system,
  tools: session.tools,
  messages,
  weights: weights(messages),
})

describe("AnthropicCounter (fake provider)", () => {
  it.scopedLive("segment counts add up to the provider's count of the whole prompt, turn after turn", () =>
    Effect.gen(function* () {
      const exact = yield* counter()
      const mismatches = yield* Replay.segmentMismatches(
        Replay.tauBench(6),
        (session, messages) => exact.countTurn(turnInput(session, messages)),
        (session, history) => Replay.groundTruth(session, history),
      )
      expect(mismatches).toEqual([])
    }),
  )

  it.scopedLive("a warm session makes at most one count call per turn, for the new messages only", () =>
    Effect.gen(function* () {
      const exact = yield* counter()
      const [first, second] = Replay.tauBench(2)
      const perTurn: Array<number> = []
      for (const session of [first!, second!]) {
        for (const messages of session.turns) {
          const before = countCalls()
          yield* exact.countTurn(turnInput(session, messages))
          perTurn.push(countCalls() - before)
        }
      }
      // cold: 3 baselines + tools + system + the batch, all at once; then one call per turn
      expect(perTurn[0]).toBe(6)
      expect(perTurn.slice(1).every((n) => n === 1)).toBe(true)
      const stats = exact.stats()
      expect(stats.calls).toBe(countCalls())
      expect(stats.cacheHits).toBeGreaterThanOrEqual(2 * (perTurn.length - 1))
      // replaying the same turn again is a pure cache hit
      const before = countCalls()
      yield* exact.countTurn(turnInput(first!, first!.turns[1]!))
      expect(countCalls()).toBe(before)
    }),
  )

  it.scopedLive("10 concurrent identical counts make one call (single-flight)", () =>
    Effect.gen(function* () {
      fake().control({ latencyMs: 50 })
      const exact = yield* counter()
      const session = Replay.typical()
      const body = Replay.render(session, session.turns.flat())
      const counts = yield* Effect.all(
        Array.from({ length: 10 }, () => exact.countBody(Replay.MODEL.name, body)),
        { concurrency: "unbounded" },
      )
      expect(new Set(counts)).toEqual(new Set([Replay.groundTruth(session, session.turns.flat())]))
      expect(countCalls()).toBe(1)
      expect(exact.stats().shared).toBe(9)

      // and for a turn: 10 concurrent counts of the same new messages
      yield* exact.countTurn(turnInput(session, session.turns[0]!))
      const before = countCalls()
      const turns = yield* Effect.all(
        Array.from({ length: 10 }, () => exact.countTurn(turnInput(session, session.turns[1]!))),
        {
          concurrency: "unbounded",
        },
      )
      expect(countCalls() - before).toBe(1)
      expect(new Set(turns.map((t) => JSON.stringify(t))).size).toBe(1)
    }),
  )

  it.scopedLive("unpaired tool blocks are counted as text and flagged approximate", () =>
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
      const counts = yield* exact.countTurn({
        model: Replay.MODEL.name,
        system: [],
        tools: [],
        messages: [orphanResult, openCall],
        weights: [1, 1],
      })
      expect(counts.approximate).toBe(true)
      expect(counts.messageTokens.every((n) => n > 0)).toBe(true)
      // every request the fake saw was valid
      expect(
        fake()
          .requests()
          .every((r) => r.status === 200),
      ).toBe(true)
    }),
  )
})
