import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import * as Pipeline from "../src/Pipeline.ts"
import * as CacheLayout from "../src/CacheLayout.ts"
import { anthropicPairingProblems, assistant, calls, input, results, stored, sys, user } from "./Helpers.ts"

type Json = Record<string, unknown>

const chat = (n: number): Array<Conversation.Message> =>
  Array.from({ length: n }, (_, i) => (i % 2 === 0 ? user(`u${i}`) : assistant(`a${i}`)))

describe("Pipeline.resolveOptions", () => {
  it("applies the defaults and keeps given values", () => {
    expect(Pipeline.resolveOptions(undefined)).toEqual({
      windowMessages: 40,
      windowStep: 20,
      freshTailMessages: 16,
      budgetTokens: undefined,
    })
    expect(Pipeline.resolveOptions({ windowMessages: 5, budgetTokens: 900, freshTailMessages: 0 })).toMatchObject({
      windowMessages: 5,
      windowStep: 20,
      freshTailMessages: 0,
      budgetTokens: 900,
    })
  })
})

describe("Pipeline.run", () => {
  it("reports what was stored, windowed and sent", () => {
    const history = stored([sys("policy"), ...chat(70)])
    const { request, report } = Pipeline.run(input(history, { systemTokens: 7, toolsTokens: 3 }))
    // 70 non-system messages, N 40, step 20: cut at the 20th non-system message (index 21).
    expect(report.messages).toEqual({
      stored: 71,
      window: 50,
      sent: 52,
      droppedByWindow: 19,
      droppedByBudget: 0,
      anchorSeq: 2,
      firstSentSeq: 1,
      lastSentSeq: 71,
    })
    expect(report.tokens).toEqual({ system: 7, tools: 3, memory: 0, history: 520, fullHistory: 710, total: 530, budget: 191_808 })
    expect(report.utilization).toBeCloseTo(530 / 191_808)
    expect(report.model).toEqual({
      provider: "anthropic",
      name: "claude-sonnet-4-5",
      contextWindow: 200_000,
      maxOutputTokens: 8_192,
      effectiveWindow: 191_808,
    })
    expect(report.overBudget).toBe(false)
    expect(report.orphans).toEqual({ calls: 0, results: 0 })
    expect(report.counter).toEqual({ backend: "test", encoding: "o200k_base", exact: false, calibration: 1 })
    expect(report.cache).toEqual({ breakpoints: 2, promptCacheKey: null })
    const messages = request["messages"] as Array<Json>
    // The anchor u0 and the first window message u20 (index 21) merge into one user message.
    expect(messages[0]).toEqual({
      role: "user",
      content: [
        { type: "text", text: "u0" },
        { type: "text", text: "u20" },
      ],
    })
    expect(messages[1]).toEqual({ role: "assistant", content: [{ type: "text", text: "a21" }] })
    expect((request["system"] as Array<Json>).map((b) => b["text"])).toEqual(["You are helpful.", "policy"])
  })

  it("lists each stage with the prompt's tokens before and after it", () => {
    const history = stored(chat(30), 100)
    const { report } = Pipeline.run(
      input(history, {
        systemTokens: 7,
        toolsTokens: 3,
        options: Pipeline.resolveOptions({ budgetTokens: 1_500, freshTailMessages: 4, windowStep: 5 }),
      }),
    )
    expect(report.stages?.map((s) => s.stage)).toEqual(Pipeline.STAGES.filter((s) => s !== "proactive"))
    const byName = Object.fromEntries((report.stages ?? []).map((s) => [s.stage, s]))
    // the window (40 of 30 messages) keeps everything; the budget cut takes 19 messages
    expect(byName["window"]).toEqual({ stage: "window", tokensIn: 3_010, tokensOut: 3_010 })
    expect(byName["budget"]).toEqual({ stage: "budget", tokensIn: 3_010, tokensOut: 1_110 })
    expect(byName["render"]!.tokensOut).toBe(report.tokens.total)
    // stages chain: what one hands on is what the next receives
    const stages = report.stages ?? []
    for (let i = 1; i < stages.length; i++) expect(stages[i]!.tokensIn).toBe(stages[i - 1]!.tokensOut)
  })

  it("renders OpenAI with a prompt cache key and no breakpoints", () => {
    const { request, report } = Pipeline.run(input(stored(chat(3)), { format: "openai" }))
    expect(report.cache).toEqual({ breakpoints: 0, promptCacheKey: CacheLayout.promptCacheKey("acme", "s1") })
    expect(request["prompt_cache_key"]).toBe(report.cache.promptCacheKey)
    expect(request["model"]).toBe("gpt-4o")
    expect((request["messages"] as Array<Json>).map((m) => m["role"])).toEqual(["system", "user", "assistant", "user"])
  })

  it("removes an unanswered call at the end and a stray result, counting them and their tokens", () => {
    const history = stored([user("q"), results("ghost"), calls("a", "b"), results("a")], 10)
    const { request, report } = Pipeline.run(input(history))
    expect(report.orphans).toEqual({ calls: 1, results: 1 })
    expect(report.messages.sent).toBe(3)
    expect(report.tokens.history).toBe(30)
    expect(anthropicPairingProblems(request)).toEqual([])
    expect(JSON.stringify(request)).not.toContain('"b"')
  })

  it("drops by budget, keeps the anchor, and reports it", () => {
    const history = stored(chat(30), 100)
    const { report } = Pipeline.run(
      input(history, { options: Pipeline.resolveOptions({ budgetTokens: 1_500, freshTailMessages: 4, windowStep: 5 }) }),
    )
    expect(report.overBudget).toBe(false)
    expect(report.tokens.total).toBeLessThanOrEqual(1_500)
    // 1,495 for history: anchor + tail = 500, 9 more fit (cut 17), rounded up to 20.
    expect(report.messages.droppedByBudget).toBe(19)
    expect(report.messages.sent).toBe(11)
    expect(report.messages.firstSentSeq).toBe(1)
    expect(report.tokens.history).toBe(1_100)
  })

  it("flags overBudget when the protected tail does not fit", () => {
    const { report } = Pipeline.run(input(stored(chat(30), 100), { options: Pipeline.resolveOptions({ budgetTokens: 1_000 }) }))
    expect(report.overBudget).toBe(true)
    expect(report.messages.sent).toBe(17)
    expect(report.tokens.total).toBeGreaterThan(1_000)
  })

  it("handles an empty history", () => {
    const { request, report } = Pipeline.run(input([]))
    expect(report.messages).toMatchObject({ stored: 0, sent: 0, anchorSeq: null, firstSentSeq: null, lastSentSeq: null })
    expect((request["messages"] as Array<Json>).length).toBe(1)
  })

  it("returns landmarks that make the next call scan only new messages", () => {
    const history = stored(chat(50))
    const first = Pipeline.run(input(history))
    expect(first.landmarks).toEqual({ anchor: 0, pinned: [], requests: Array.from({ length: 25 }, (_, i) => 2 * i), scanned: 50 })
    const grown = history.concat(stored(chat(3)).map((m, i) => ({ ...m, seq: 51 + i })))
    const next = Pipeline.run(input(grown, { landmarks: first.landmarks }))
    expect(next).toEqual(Pipeline.run(input(grown)))
    expect(next.landmarks.scanned).toBe(53)
  })
})
