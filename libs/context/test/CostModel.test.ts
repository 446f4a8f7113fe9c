import { describe, expect, it } from "vitest"
import * as CostModel from "../src/CostModel.ts"

describe("CostModel.lookup", () => {
  const row = (name: string) => CostModel.lookup(name)

  it("finds Anthropic families with their minimum prefix", () => {
    expect(row("claude-sonnet-4-5-20250929")).toMatchObject({
      family: "claude-sonnet-4",
      inputPerMtok: 3,
      outputPerMtok: 15,
      minCacheableTokens: 1024,
    })
    expect(row("claude-3-5-sonnet-20241022").family).toBe("claude-sonnet-4")
    expect(row("claude-sonnet-4-6").minCacheableTokens).toBe(2048)
    expect(row("claude-opus-4-1-20250805")).toMatchObject({ inputPerMtok: 15, outputPerMtok: 75, minCacheableTokens: 1024 })
    expect(row("claude-opus-4-5")).toMatchObject({ inputPerMtok: 5, outputPerMtok: 25, minCacheableTokens: 4096 })
    expect(row("claude-haiku-4-5")).toMatchObject({ inputPerMtok: 1, minCacheableTokens: 4096 })
    expect(row("claude-3-5-haiku-latest")).toMatchObject({ inputPerMtok: 0.8, minCacheableTokens: 2048 })
    expect(row("claude-3-haiku-20240307").minCacheableTokens).toBe(2048)
    expect(row("Anthropic/Claude-Sonnet-4-5").family).toBe("claude-sonnet-4")
  })

  it("gives Anthropic 0.1× reads, 1.25× 5-minute and 2× 1-hour writes, explicit breakpoints", () => {
    const r = row("claude-sonnet-4-5")
    expect(r.cacheReadMultiplier).toBe(0.1)
    expect(CostModel.tier(r, "5m")).toMatchObject({ ttlSeconds: 300, writeMultiplier: 1.25 })
    expect(CostModel.tier(r, "1h")).toMatchObject({ ttlSeconds: 3600, writeMultiplier: 2 })
    expect(CostModel.tier(r).name).toBe("5m")
    expect(r).toMatchObject({ mechanism: "explicit", maxBreakpoints: 4, lookbackBlocks: 20 })
  })

  it("finds OpenAI families: cached-input discount, no write premium, 1,024 + 128-token steps", () => {
    expect(row("gpt-4o-2024-08-06")).toMatchObject({ family: "gpt-4o", cacheReadMultiplier: 0.5 })
    expect(row("gpt-4o-mini").family).toBe("gpt-4o-mini")
    expect(row("gpt-4.1")).toMatchObject({ cacheReadMultiplier: 0.25, inputPerMtok: 2 })
    expect(row("gpt-4.1-mini").family).toBe("gpt-4.1-mini")
    expect(row("gpt-5")).toMatchObject({ cacheReadMultiplier: 0.1, inputPerMtok: 1.25 })
    expect(row("gpt-5.1-codex-mini").family).toBe("gpt-5-mini")
    expect(row("gpt-5-nano").family).toBe("gpt-5-nano")
    expect(row("o4-mini").family).toBe("o4-mini")
    expect(row("o3").family).toBe("o3")
    const r = row("gpt-5.1")
    expect(r).toMatchObject({ mechanism: "automatic", minCacheableTokens: 1024, incrementTokens: 128 })
    expect(r.tiers.map((t) => t.name)).toEqual(["in_memory", "24h"])
    expect(r.tiers.every((t) => t.writeMultiplier === 1)).toBe(true)
    expect(row("gpt-4o").tiers.map((t) => t.name)).toEqual(["in_memory"])
  })

  it("finds Gemini implicit caching at 0.25×", () => {
    expect(row("gemini-2.5-flash")).toMatchObject({ provider: "gemini", cacheReadMultiplier: 0.25, mechanism: "automatic" })
    expect(row("gemini-2.5-pro").minCacheableTokens).toBe(2048)
  })

  it("falls back per family, then to the conservative default", () => {
    expect(row("claude-next-9")).toMatchObject({ family: "claude", minCacheableTokens: 4096 })
    expect(row("gpt-6")).toMatchObject({
      family: "gpt-5.6+",
      known: false,
      tiers: [{ name: "30m", ttlSeconds: 1800, writeMultiplier: 1.25 }],
    })
    expect(row("o9-pro")).toMatchObject({ family: "openai", cacheReadMultiplier: 0.1 })
    expect(row("llama-3.1-70b")).toBe(CostModel.conservative)
    expect(CostModel.conservative).toMatchObject({ cacheReadMultiplier: 0.1, minCacheableTokens: 4096, provider: "unknown" })
    expect(CostModel.conservative.tiers).toEqual([{ name: "5m", ttlSeconds: 300, writeMultiplier: 1.25 }])
  })

  it("applies overrides", () => {
    expect(CostModel.lookup("claude-sonnet-4-5", { inputPerMtok: 2 }).inputPerMtok).toBe(2)
    // an undefined field keeps the row's
    expect(CostModel.lookup("claude-sonnet-4-5", { inputPerMtok: undefined }).inputPerMtok).toBe(3)
  })
})

describe("CostModel.make: configured rows over the built-in table", () => {
  it("the built-in table alone answers as lookup does", () => {
    for (const name of ["claude-sonnet-4-5", "gpt-4o", "anthropic/claude-opus-4-5", "llama-3"]) {
      expect(CostModel.builtIn.lookup(name)).toEqual(CostModel.lookup(name))
    }
    expect(CostModel.builtIn.rows).toEqual([])
  })

  it("checks the configured rows first, in order, first match wins; others fall through to the built-in rows", () => {
    const prices = CostModel.make([
      { match: "claude-sonnet-4-5", inputPerMtok: 2.4 },
      { match: "claude-sonnet*", inputPerMtok: 9 },
      { match: "CLAUDE-", minCacheableTokens: 1 },
    ])
    expect(prices.lookup("claude-sonnet-4-5-20250929").inputPerMtok).toBe(2.4)
    expect(prices.lookup("claude-sonnet-4-6").inputPerMtok).toBe(9)
    expect(prices.lookup("claude-haiku-4-5")).toMatchObject({ inputPerMtok: 1, minCacheableTokens: 1 })
    expect(prices.lookup("gpt-4o")).toEqual(CostModel.lookup("gpt-4o"))
    expect(prices.lookup("llama-3")).toBe(CostModel.conservative)
  })

  it("a partial row inherits the rest from the built-in row of the model's name (else conservative)", () => {
    const prices = CostModel.make([
      { match: "claude", cacheReadMultiplier: 0.2 },
      { match: "my-llama*", inputPerMtok: 0, mechanism: "automatic" },
    ])
    // claude-opus-4-5 keeps its own built-in row (not the generic `claude-` one) under the override
    expect(prices.lookup("claude-opus-4-5")).toEqual({ ...CostModel.lookup("claude-opus-4-5"), cacheReadMultiplier: 0.2 })
    expect(prices.lookup("claude-3-haiku")).toEqual({ ...CostModel.lookup("claude-3-haiku"), cacheReadMultiplier: 0.2 })
    expect(prices.lookup("my-llama-70b")).toEqual({ ...CostModel.conservative, known: true, inputPerMtok: 0, mechanism: "automatic" })
  })

  it("matches case-insensitively, with or without the provider/ prefix, and * matches every model", () => {
    const prices = CostModel.make([
      { match: "openrouter/gpt-4o", outputPerMtok: 11 },
      { match: "GPT-4O*", outputPerMtok: 12 },
      { match: "*", minCacheableTokens: 0 },
    ])
    expect(prices.lookup("OpenRouter/GPT-4o-mini").outputPerMtok).toBe(11)
    expect(prices.lookup("azure/gpt-4o").outputPerMtok).toBe(12)
    expect(prices.lookup("gpt-4o-2024-08-06").outputPerMtok).toBe(12)
    expect(prices.lookup("gemini-2.5-pro")).toEqual({ ...CostModel.lookup("gemini-2.5-pro"), minCacheableTokens: 0 })
  })

  it("a row's tiers replace the whole tier list (the first is the default)", () => {
    const tiers = [{ name: "1h", ttlSeconds: 3600, writeMultiplier: 2 }]
    const row = CostModel.make([{ match: "claude-sonnet-4-5", tiers }]).lookup("claude-sonnet-4-5")
    expect(row.tiers).toEqual(tiers)
    expect(CostModel.tier(row).name).toBe("1h")
  })
})

describe("CostModel.cost", () => {
  const sonnet = CostModel.lookup("claude-sonnet-4-5")

  it("prices reads, writes by TTL, uncached input and output", () => {
    const usage: CostModel.Usage = { cacheRead: 10_000, cacheWrite: { "5m": 1_000, "1h": 500 }, uncached: 200, output: 100 }
    // 10,000 × 0.1 + 1,000 × 1.25 + 500 × 2 + 200 = 3,450 input units; 100 × 15/3 = 500 output units.
    expect(CostModel.inputUnits(sonnet, usage)).toBeCloseTo(3_450)
    expect(CostModel.outputUnits(sonnet, usage)).toBeCloseTo(500)
    expect(CostModel.cost(sonnet, usage)).toBeCloseTo((3_950 * 3) / 1e6, 12)
    expect(CostModel.written(usage)).toBe(1_500)
  })

  it("charges an unknown tier the highest premium on offer", () => {
    expect(CostModel.inputUnits(sonnet, { cacheRead: 0, cacheWrite: { "2h": 100 }, uncached: 0, output: 0 })).toBe(200)
  })

  it("prices OpenAI cached input at the family discount without a write premium", () => {
    const gpt4o = CostModel.lookup("gpt-4o")
    const usage: CostModel.Usage = { cacheRead: 2_048, cacheWrite: {}, uncached: 1_000, output: 0 }
    expect(CostModel.cost(gpt4o, usage)).toBeCloseTo(((2_048 * 0.5 + 1_000) * 2.5) / 1e6, 12)
  })

  it("prices a free model (input price 0) without dividing by it", () => {
    const free = { ...CostModel.conservative, inputPerMtok: 0, outputPerMtok: 1 }
    expect(CostModel.cost(free, { cacheRead: 100, cacheWrite: { "5m": 100 }, uncached: 100, output: 1_000_000 })).toBe(1)
  })

  it("adds usages tier by tier", () => {
    const a: CostModel.Usage = { cacheRead: 1, cacheWrite: { "5m": 2 }, uncached: 3, output: 4 }
    const b: CostModel.Usage = { cacheRead: 10, cacheWrite: { "5m": 20, "1h": 5 }, uncached: 30, output: 40 }
    expect(CostModel.add(a, b)).toEqual({ cacheRead: 11, cacheWrite: { "5m": 22, "1h": 5 }, uncached: 33, output: 44 })
    expect(CostModel.add(CostModel.zero, a)).toEqual(a)
  })
})

describe("CostModel.edit", () => {
  const sonnet = CostModel.lookup("claude-sonnet-4-5")

  it("a warm edit pays its re-write back over later turns", () => {
    // Re-writing 20,000 tokens to drop 10,000: now 20,000 × 1.25 − 30,000 × 0.1 = 22,000; saves 1,000 a turn.
    const e = CostModel.edit(sonnet, { rewritten: 20_000, removed: 10_000, warm: true })
    expect(e.now).toBeCloseTo(22_000)
    expect(e.perTurn).toBeCloseTo(1_000)
    expect(e.breakEvenTurns).toBeCloseTo(22)
    expect(CostModel.edit(sonnet, { rewritten: 20_000, removed: 10_000, warm: true, tier: "1h" }).now).toBeCloseTo(37_000)
  })

  it("a cold edit is free: it only writes less", () => {
    const e = CostModel.edit(sonnet, { rewritten: 20_000, removed: 10_000, warm: false })
    expect(e.now).toBeCloseTo(-12_500)
    expect(e.breakEvenTurns).toBe(0)
  })

  it("an edit that removes nothing never pays; without a write premium a warm edit costs only the lost discount", () => {
    expect(CostModel.edit(sonnet, { rewritten: 5_000, removed: 0, warm: true }).breakEvenTurns).toBe(Number.POSITIVE_INFINITY)
    const gpt5 = CostModel.lookup("gpt-5")
    const e = CostModel.edit(gpt5, { rewritten: 20_000, removed: 10_000, warm: true })
    expect(e.now).toBeCloseTo(20_000 - 3_000)
    expect(e.breakEvenTurns).toBeCloseTo(17)
  })
})
