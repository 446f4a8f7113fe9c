import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { Calibration, CalibrationState } from "../src/index.ts"

const MODEL = { provider: "anthropic", name: "claude-sonnet-4-6" }

const problem = (usage: unknown): string => {
  const parsed = Calibration.parseUsage(usage)
  if (Either.isRight(parsed)) throw new Error(`expected a problem, got ${JSON.stringify(parsed.right)}`)
  return `${parsed.left.path}: ${parsed.left.message}`
}

describe("Calibration.parseUsage", () => {
  it("reads Anthropic usage: billed prompt = input + cache read + cache write", () => {
    const usage = {
      input_tokens: 120,
      cache_read_input_tokens: 4_000,
      cache_creation_input_tokens: 800,
      output_tokens: 55,
      service_tier: "standard",
    }
    expect(Calibration.parseUsage(usage)).toEqual(
      Either.right({ style: "anthropic", input: 120, cacheRead: 4_000, cacheWrite: 800, billedPrompt: 4_920, output: 55 }),
    )
    // cache fields may be absent or null
    expect(Either.map(Calibration.parseUsage({ input_tokens: 7, cache_read_input_tokens: null }), (u) => u.billedPrompt)).toEqual(
      Either.right(7),
    )
  })

  it("reads OpenAI usage: billed prompt = prompt_tokens (cached included)", () => {
    const usage = {
      prompt_tokens: 2_000,
      completion_tokens: 10,
      total_tokens: 2_010,
      prompt_tokens_details: { cached_tokens: 1_536, audio_tokens: 0 },
    }
    expect(Calibration.parseUsage(usage)).toEqual(
      Either.right({ style: "openai", input: 464, cacheRead: 1_536, cacheWrite: 0, billedPrompt: 2_000, output: 10 }),
    )
  })

  it("reads OpenAI Responses usage: input_tokens include input_tokens_details.cached_tokens", () => {
    const usage = {
      input_tokens: 2_000,
      input_tokens_details: { cached_tokens: 1_536 },
      output_tokens: 10,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 2_010,
    }
    expect(Calibration.parseUsage(usage)).toEqual(
      Either.right({ style: "openai", input: 464, cacheRead: 1_536, cacheWrite: 0, billedPrompt: 2_000, output: 10 }),
    )
    expect(problem({ input_tokens: 10, input_tokens_details: { cached_tokens: 11 } })).toContain("exceeds input_tokens")
    expect(problem({ input_tokens: 10, input_tokens_details: 3 })).toContain("must be an object")
  })

  it("reads Gemini usageMetadata: promptTokenCount includes cachedContentTokenCount; output = candidates + thoughts", () => {
    const usage = {
      promptTokenCount: 2_000,
      cachedContentTokenCount: 1_500,
      candidatesTokenCount: 10,
      thoughtsTokenCount: 30,
      totalTokenCount: 2_040,
    }
    expect(Calibration.parseUsage(usage)).toEqual(
      Either.right({ style: "openai", input: 500, cacheRead: 1_500, cacheWrite: 0, billedPrompt: 2_000, output: 40 }),
    )
    // no cache read: the whole prompt is uncached input
    expect(Calibration.parseUsage({ promptTokenCount: 64, candidatesTokenCount: 3 })).toEqual(
      Either.right({ style: "openai", input: 64, cacheRead: 0, cacheWrite: 0, billedPrompt: 64, output: 3 }),
    )
    expect(problem({ promptTokenCount: 10, cachedContentTokenCount: 11 })).toContain("exceeds promptTokenCount")
    expect(problem({ promptTokenCount: -1 })).toContain("must not be negative")
  })

  it("rejects negative, missing, fractional and non-numeric fields with a clear message", () => {
    expect(problem({ input_tokens: -5 })).toBe("usage.input_tokens: usage.input_tokens must not be negative, got -5")
    expect(problem({ input_tokens: 5, cache_read_input_tokens: -1 })).toContain("cache_read_input_tokens must not be negative")
    expect(problem({ prompt_tokens: "12" })).toBe('usage.prompt_tokens: usage.prompt_tokens must be a number of tokens, got "12"')
    expect(problem({ input_tokens: 1.5 })).toContain("whole number")
    expect(problem({ input_tokens: Number.NaN })).toContain("must be a number")
    expect(problem({ output_tokens: 5 })).toBe(
      "usage: usage has neither input_tokens (Anthropic) nor prompt_tokens (OpenAI) nor promptTokenCount (Gemini)",
    )
    expect(problem({ input_tokens: null })).toBe("usage.input_tokens: usage.input_tokens is missing")
    expect(problem({ prompt_tokens: 10, prompt_tokens_details: { cached_tokens: 11 } })).toContain("exceeds prompt_tokens")
    expect(problem({ prompt_tokens: 10, prompt_tokens_details: 3 })).toContain("must be an object")
    expect(problem(null)).toBe("usage: usage must be an object with the provider's token counts")
    expect(problem([1, 2])).toContain("must be an object")
  })
})

describe("Calibration factors", () => {
  it("converges to billed / estimate and stays within [0.5, 2]", () => {
    let f = Calibration.initialFactor
    for (let i = 0; i < 20; i++) f = Calibration.updateFactor(f, 1.22)
    expect(f.factor).toBeCloseTo(1.22, 6)
    expect(f.reports).toBe(20)
    for (let i = 0; i < 100; i++) {
      f = Calibration.updateFactor(f, 10)
      expect(f.factor).toBeLessThanOrEqual(2)
    }
    expect(f.factor).toBeCloseTo(2, 3)
    for (let i = 0; i < 100; i++) {
      f = Calibration.updateFactor(f, 0.01)
      expect(f.factor).toBeGreaterThanOrEqual(0.5)
    }
    expect(f.factor).toBeCloseTo(0.5, 3)
    // garbage observations are ignored
    expect(Calibration.updateFactor(f, Number.NaN)).toBe(f)
    expect(Calibration.updateFactor(f, -1)).toBe(f)
  })

  it("weighs early reports more, then follows with weight alpha", () => {
    const first = Calibration.updateFactor(Calibration.initialFactor, 1.2)
    expect(first.factor).toBeCloseTo(1.2, 9)
    const second = Calibration.updateFactor(first, 1.0)
    expect(second.factor).toBeCloseTo(1.1, 9)
    let f = second
    for (let i = 0; i < 100; i++) f = Calibration.updateFactor(f, 1.1)
    const jump = Calibration.updateFactor(f, 1.5, { alpha: 0.1, minFactor: 0.5, maxFactor: 2 })
    expect(jump.factor).toBeCloseTo(1.1 + 0.1 * 0.4, 6)
  })

  it("records drift for every backend but learns only from local ones, per model and backend", () => {
    const state = CalibrationState.make()
    let recorded: CalibrationState.Recorded
    recorded = CalibrationState.record(state, { model: MODEL, estimate: 900, billed: 1_000, backend: "tiktoken", calibration: 1 })
    expect(recorded.drift).toBeCloseTo(-0.1, 9)
    expect(recorded.factor).toBeCloseTo(1_000 / 900, 9)
    // an exact count teaches nothing
    recorded = CalibrationState.record(state, { model: MODEL, estimate: 1_000, billed: 1_000, backend: "anthropic_api", calibration: 1 })
    expect(recorded).toEqual({ drift: 0, factor: 1 })
    expect(CalibrationState.factorOf(state, MODEL, "tiktoken")).toBeCloseTo(1_000 / 900, 9)
    expect(CalibrationState.factorOf(state, MODEL, "heuristic")).toBe(1)
    // a calibrated estimate is divided back to the raw one before learning
    recorded = CalibrationState.record(state, {
      model: MODEL,
      estimate: 1_000,
      billed: 1_000,
      backend: "tiktoken",
      calibration: 1_000 / 900,
    })
    expect(recorded.drift).toBeCloseTo(0, 9)
    expect(recorded.factor).toBeCloseTo(1_000 / 900, 9)
    const summary = Calibration.summarize(state.drift.get("anthropic/claude-sonnet-4-6")!)
    expect(summary.count).toBe(3)
    expect(summary.absP99).toBeCloseTo(0.1, 9)
    const raw = Calibration.summarize(state.rawDrift.get("anthropic/claude-sonnet-4-6")!)
    expect(raw.count).toBe(2)
    expect(raw.absP50).toBeCloseTo(0.1, 9)
  })

  it("keeps histograms bounded", () => {
    let h = Calibration.emptyHistogram
    for (let i = 0; i < 3_000; i++) h = Calibration.observe(h, ((i % 200) - 100) / 100)
    expect(h.count).toBe(3_000)
    expect(h.recent.length).toBe(Calibration.WINDOW)
    expect(h.counts.length).toBe(Calibration.BUCKETS.length + 1)
    expect(h.counts.reduce((a, b) => a + b, 0)).toBe(3_000)
    const s = Calibration.summarize(h)
    expect(s.buckets.at(-1)).toEqual({ le: "+Inf", count: h.counts.at(-1) })
  })
})
