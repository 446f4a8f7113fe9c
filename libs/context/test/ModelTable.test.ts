/** The model table: a row per family by name, alias and dated name; unknown models; GPT-5.6's write fee; price-file fields. */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as CachePlanner from "../src/CachePlanner.ts"
import * as CostModel from "../src/CostModel.ts"
import * as Models from "../src/Models.ts"
import * as PriceFile from "../src/PriceFile.ts"
import { candidate } from "./Helpers.ts"

const family = (name: string) => CostModel.lookup(name).family

describe("the model table", () => {
  it("has a row per current family, by name, alias and dated name", () => {
    expect(family("claude-fable-5-1")).toBe("claude-fable-5.1")
    expect(family("claude-mythos-5-1-20261001")).toBe("claude-fable-5.1")
    expect(family("claude-fable-5-2")).toBe("claude-fable-5.2+")
    expect(family("claude-fable-5")).toBe("claude-fable-5")
    expect(family("claude-opus-5-5")).toBe("claude-opus-5.5")
    expect(family("claude-opus-5")).toBe("claude-opus-5")
    expect(family("claude-opus-5-20260724")).toBe("claude-opus-5")
    expect(family("claude-opus-4-8")).toBe("claude-opus-4.8")
    expect(family("claude-opus-4-20250514")).toBe("claude-opus-4")
    expect(family("claude-sonnet-5-5")).toBe("claude-sonnet-5.5")
    expect(family("anthropic/claude-sonnet-5")).toBe("claude-sonnet-5")
    expect(family("claude-sonnet-4-20250514")).toBe("claude-sonnet-4")
    expect(family("claude-haiku-5-5")).toBe("claude-haiku-5.5")
    expect(family("claude-haiku-4-5-20251001")).toBe("claude-haiku-4.5")
    expect(family("gpt-5.6")).toBe("gpt-5.6-sol")
    expect(family("gpt-5.6-sol-2026-07-09")).toBe("gpt-5.6-sol")
    expect(family("openai/gpt-5.6-terra")).toBe("gpt-5.6-terra")
    expect(family("gpt-5.6-luna")).toBe("gpt-5.6-luna")
    expect(family("gpt-5.1")).toBe("gpt-5")
    expect(family("gemini-3.5-flash")).toBe("gemini-3.5-flash")
    expect(family("gemini-3.6-flash-preview")).toBe("gemini-3.6-flash")
    expect(family("gemini-3.1-pro-preview")).toBe("gemini-3")
  })

  it("carries each row's documented numbers and flags", () => {
    expect(CostModel.lookup("claude-opus-5-5")).toMatchObject({
      inputPerMtok: 4,
      outputPerMtok: 20,
      cacheReadMultiplier: 0.05,
      tiers: [
        { name: "5m", writeMultiplier: 1.25 },
        { name: "1h", writeMultiplier: 2 },
      ],
      contextWindow: 1_000_000,
      maxOutputTokens: 128_000,
      known: true,
      capabilities: { bindsReasoningToPrefix: true, toolSearch: true, midConversationSystem: true, explicitCacheBreakpoints: true },
    })
    // Fable 5 and Opus 5 do not run the prefix check; the 5.1 / 5.5 models do
    for (const name of ["claude-fable-5", "claude-opus-5", "claude-sonnet-5", "claude-opus-4-8"])
      expect(CostModel.lookup(name).capabilities.bindsReasoningToPrefix, name).toBe(false)
    for (const name of ["claude-fable-5-1", "claude-mythos-5-1", "claude-sonnet-5-5", "claude-haiku-5-5"])
      expect(CostModel.lookup(name).capabilities.bindsReasoningToPrefix, name).toBe(true)
    expect(CostModel.lookup("gpt-5.6-luna")).toMatchObject({
      inputPerMtok: 0.2,
      outputPerMtok: 1.2,
      maxBreakpoints: 4,
      contextWindow: 1_050_000,
    })
    expect(CostModel.lookup("gpt-5.6-luna").capabilities).toMatchObject({ explicitCacheBreakpoints: true, toolSearch: true })
    expect(CostModel.lookup("gemini-3.5-flash")).toMatchObject({ minCacheableTokens: 4096, mechanism: "automatic" })
    expect(Models.resolve({ provider: "anthropic", name: "claude-sonnet-5-5" })).toMatchObject({
      contextWindow: 1_000_000,
      maxOutputTokens: 128_000,
    })
  })

  it("bills cache writes on GPT-5.6 and later, not before", () => {
    for (const name of ["gpt-5.6", "gpt-5.6-terra", "gpt-5.6-luna", "gpt-6-sol", "gpt-5.7"])
      expect(CostModel.tier(CostModel.lookup(name)).writeMultiplier, name).toBe(1.25)
    for (const name of ["gpt-5.1", "gpt-5.5", "gpt-4.1", "gpt-4o"])
      expect(CostModel.tier(CostModel.lookup(name)).writeMultiplier, name).toBe(1)
    const usage: CostModel.Usage = { cacheRead: 0, cacheWrite: { "24h": 1_000_000 }, uncached: 0, output: 0 }
    expect(CostModel.cost(CostModel.lookup("gpt-5.6-sol"), usage)).toBeCloseTo(5) // 1M written at $4 × 1.25
  })

  it("an unknown model gets the conservative row and is flagged; a provider's catch-all is flagged too", () => {
    expect(CostModel.lookup("llama-4-400b")).toBe(CostModel.conservative)
    expect(CostModel.conservative).toMatchObject({ known: false, contextWindow: 128_000, maxOutputTokens: 4_096, minCacheableTokens: 4096 })
    expect(Models.resolve({ provider: "openai", name: "llama-4-400b" })).toMatchObject({ contextWindow: 128_000, maxOutputTokens: 4_096 })
    for (const name of ["claude-next-9", "gpt-6.2-sol", "gemini-4-argon", "o9"]) expect(CostModel.lookup(name).known, name).toBe(false)
    expect(CostModel.lookup("claude-sonnet-5").known).toBe(true)
    expect(CostModel.make([{ match: "llama-4", inputPerMtok: 0 }]).lookup("llama-4-400b").known).toBe(true)
  })
})

describe("GPT-5.6's write fee in the cache planner", () => {
  // the previous prompt: 1,000 of system and tools, then messages of 100, 1,000 and 100 tokens
  const previous = candidate()
  const appended = { index: 3, masked: false, tokens: 50 }
  const held: CachePlanner.Candidate = { ...previous, sent: [...previous.sent, appended], total: 2_250 }
  // masking message 1 (1,000 → 10 tokens) re-writes everything after message 0
  const masked: CachePlanner.Candidate = {
    ...previous,
    maskBoundary: 2,
    sent: [previous.sent[0]!, { index: 1, masked: true, tokens: 10 }, previous.sent[2]!, appended],
    total: 1_260,
    advances: ["mask"],
  }
  const planFor = (name: string): CachePlanner.Plan => {
    const prices = CostModel.lookup(name)
    return {
      previous,
      read: prices.cacheReadMultiplier,
      write: CostModel.tier(prices).writeMultiplier,
      expectedTurns: 5,
      cold: false,
      ttlSeconds: CostModel.tier(prices).ttlSeconds,
      minCacheable: prices.minCacheableTokens,
    }
  }

  it("masks at once on GPT-5.1 (free writes) and holds the mask until it is earned on GPT-5.6 (writes 1.25×)", () => {
    // premium of the mask: 110 × (write − 1) — nothing on GPT-5.1, 27.5 tokens' worth on GPT-5.6 with no rent yet
    expect(CachePlanner.choose(planFor("gpt-5.1"), [held, masked]).chosen).toBe(masked)
    expect(CachePlanner.choose(planFor("gpt-5.6-sol"), [held, masked]).chosen).toBe(held)
  })
})

describe("the price file sets the table's new fields", () => {
  it("sets the window, the output reserve and each capability flag", () => {
    const prices = Either.getOrThrow(
      PriceFile.decode({
        models: [
          {
            match: "gpt-5.6-luna",
            contextWindow: 400_000,
            maxOutputTokens: 32_000,
            tiers: [{ name: "24h", ttlSeconds: 86_400, writeMultiplier: 1.5 }],
            capabilities: { toolSearch: true, midConversationSystem: true, bindsReasoningToPrefix: true, explicitCacheBreakpoints: false },
          },
          { match: "claude-opus-5-5", capabilities: { toolSearch: false } },
        ],
      }),
    )
    const luna = prices.lookup("gpt-5.6-luna")
    expect(luna).toMatchObject({ contextWindow: 400_000, maxOutputTokens: 32_000, known: true })
    expect(luna.capabilities).toEqual({
      toolSearch: true,
      midConversationSystem: true,
      bindsReasoningToPrefix: true,
      explicitCacheBreakpoints: false,
    })
    expect(CostModel.tier(luna).writeMultiplier).toBe(1.5)
    expect(Models.resolve({ provider: "openai", name: "gpt-5.6-luna" }, luna)).toMatchObject({
      contextWindow: 400_000,
      effectiveWindow: 368_000,
    })
    // a flag the row leaves out keeps the built-in row's
    expect(prices.lookup("claude-opus-5-5").capabilities).toEqual({
      ...CostModel.lookup("claude-opus-5-5").capabilities,
      toolSearch: false,
    })
  })

  it("refuses bad values with the coded error naming the row and the key", () => {
    const error = Either.getOrThrow(
      Either.flip(
        PriceFile.decode({
          models: [
            { match: "a", contextWindow: 0 },
            { match: "b", maxOutputTokens: 1.5 },
            { match: "c", capabilities: { toolSearch: "yes" } },
            { match: "d", capabilities: { deferLoading: true } },
            { match: "e", known: true },
          ],
        }),
      ),
    )
    expect(error._tag).toBe("InvalidPriceFile")
    expect(error.problems.map((p) => [p.row, p.field])).toEqual([
      [0, "contextWindow"],
      [1, "maxOutputTokens"],
      [2, "capabilities.toolSearch"],
      [3, "capabilities.deferLoading"],
      [4, "known"],
    ])
    expect(error.message).toContain('models[2] (match "c"), field capabilities.toolSearch: Expected boolean, actual "yes"')
  })
})
