// Calibration per tenant and model with a bounded global prior, and bounded
// labels: one tenant cannot poison another, callers' model names cannot grow
// the state or the metrics without bound.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { CalibrationState, TokenCounter } from "../src/index.ts"

const GPT = { provider: "openai", name: "gpt-4o" }
const report = (tenant: string | undefined, ratio: number, model = GPT) => ({
  tenant,
  model,
  estimate: 1_000,
  billed: Math.round(1_000 * ratio),
  backend: "tiktoken",
  calibration: 1,
})

describe("CalibrationState", () => {
  it("one tenant's 1,000 skewed reports do not move another tenant's factor, and move the global one by a bounded step", () => {
    const state = CalibrationState.make()
    for (let i = 0; i < 20; i++) CalibrationState.record(state, report("honest", 1.05))
    const honest = CalibrationState.factorOf(state, GPT, "tiktoken", "honest")
    const globalBefore = CalibrationState.globalFactorOf(state, GPT, "tiktoken")
    for (let i = 0; i < 1_000; i++) CalibrationState.record(state, report("skewed", 3))
    expect(CalibrationState.factorOf(state, GPT, "tiktoken", "skewed")).toBe(2) // its own factor: capped
    expect(Math.abs(CalibrationState.factorOf(state, GPT, "tiktoken", "honest") - honest)).toBeLessThan(1e-9)
    // a tenant with no reports starts from the global factor, which one tenant moves by at most (2 − 1) / (10 + 1)
    const fresh = CalibrationState.factorOf(state, GPT, "tiktoken", "fresh")
    expect(fresh).toBe(CalibrationState.globalFactorOf(state, GPT, "tiktoken"))
    expect(fresh - globalBefore).toBeLessThanOrEqual(1 / 11 + 1e-9)
    expect(fresh).toBeLessThan(1.15)
    // and its own first report starts from there
    const first = CalibrationState.record(state, report("fresh", 1.0))
    expect(first.factor).toBeCloseTo(1.0, 9)
  })

  it("a dry run records nothing", () => {
    const state = CalibrationState.make()
    const recorded = CalibrationState.record(state, report("a", 1.5), undefined, true)
    expect(recorded.factor).toBe(1)
    expect(state.drift.size).toBe(0)
    expect(state.tenants.size).toBe(0)
  })

  it("normalizes model labels and caps their number; later models share `other` and teach nothing", () => {
    const state = CalibrationState.make({ maxModels: 3 })
    expect(CalibrationState.normalize("GPT-4o Mini ✨".repeat(20))).toMatch(/^[a-z0-9._:/-]{1,64}$/)
    for (let i = 0; i < 3_000; i++)
      CalibrationState.record(state, report("t", 1.1, { provider: "openai", name: `Model-${i}-${"x".repeat(500)}` }))
    const snapshot = CalibrationState.snapshot(state)
    expect(Object.keys(snapshot.drift).length).toBe(4)
    expect(snapshot.drift.other!.count).toBe(2_997)
    expect(Object.keys(snapshot.factors).length).toBe(3)
    expect(snapshot.labels).toEqual({ used: 3, max: 3, overflow: 2_997 })
    expect(JSON.stringify(snapshot).length).toBeLessThan(20_000)
  })

  it("keeps at most maxTenantFactors tenant factors; the global sum follows evictions", () => {
    const state = CalibrationState.make({ maxTenantFactors: 10 })
    for (let i = 0; i < 100; i++) CalibrationState.record(state, report(`t${i}`, 1.5))
    expect(state.tenants.size).toBe(10)
    const g = CalibrationState.snapshot(state).factors["openai/gpt-4o#tiktoken"]!
    expect(g.tenants).toBe(10)
    expect(g.factor).toBeCloseTo((10 + 10 * 1.5) / 20, 9)
  })
})

describe("CalibrationState families", () => {
  const SONNET = { provider: "anthropic", name: "claude-sonnet-4-6" }
  const OPUS = { provider: "anthropic", name: "claude-opus-4-7" }

  it("names families by model name, else by provider", () => {
    expect(CalibrationState.familyOf(SONNET)).toBe("claude")
    expect(CalibrationState.familyOf({ provider: "openai", name: "anthropic/claude-3-haiku" })).toBe("claude")
    expect(CalibrationState.familyOf({ provider: "openai", name: "o3-mini" })).toBe("gpt")
    expect(CalibrationState.familyOf({ provider: "openai", name: "google/gemini-2.5-pro" })).toBe("gemini")
    expect(CalibrationState.familyOf({ provider: "openai", name: "llama-3.1-70b" })).toBe("gpt")
    expect(CalibrationState.familyOf({ provider: "mistral", name: "mistral-large" })).toBeUndefined()
  })

  it("a new model starts from its family's learned factor (not 1), then learns its own", () => {
    const state = CalibrationState.make()
    // before any report, each family's documented start
    expect(CalibrationState.globalFactorOf(state, OPUS, "tiktoken")).toBe(1)
    expect(CalibrationState.globalFactorOf(state, { provider: "google", name: "gemini-2.5-pro" }, "tiktoken")).toBe(
      CalibrationState.FAMILY_START.gemini,
    )
    // 20 tenants learn Sonnet at 1.2
    for (let t = 0; t < 20; t++) CalibrationState.record(state, report(`t${t}`, 1.2, SONNET))
    const sonnet = CalibrationState.globalFactorOf(state, SONNET, "tiktoken")
    expect(sonnet).toBeCloseTo((10 + 20 * 1.2) / 30, 9)
    // Opus has never been seen: it starts from the Claude family's factor, for every tenant
    expect(CalibrationState.globalFactorOf(state, OPUS, "tiktoken")).toBeCloseTo(sonnet, 9)
    expect(CalibrationState.factorOf(state, OPUS, "tiktoken", "newcomer")).toBeCloseTo(sonnet, 9)
    expect(CalibrationState.snapshot(state).families).toEqual({ "claude#tiktoken": { factor: sonnet, models: 1 } })
    // other families and backends are untouched
    expect(CalibrationState.globalFactorOf(state, GPT, "tiktoken")).toBe(1)
    expect(CalibrationState.globalFactorOf(state, OPUS, "heuristic")).toBe(1)
    // Opus then learns its own: its global factor moves from the family's toward its tenants'
    const first = CalibrationState.record(state, report("o1", 1.0, OPUS))
    expect(first.factor).toBeCloseTo(1.0, 9)
    expect(CalibrationState.globalFactorOf(state, OPUS, "tiktoken")).toBeCloseTo((10 * sonnet + 1.0) / 11, 9)
    // a model's own tenants never move its own family prior: Sonnet's prior is now Opus's learned factor alone
    const opusAlone = (10 * 1 + 1.0) / 11
    expect(CalibrationState.globalFactorOf(state, SONNET, "tiktoken")).toBeCloseTo((10 * opusAlone + 20 * 1.2) / 30, 9)
  })

  it("one tenant poisoning many models of a family moves a new model's start by a bounded step", () => {
    const state = CalibrationState.make()
    for (let m = 0; m < 50; m++)
      for (let i = 0; i < 20; i++) CalibrationState.record(state, report("mallory", 3, { provider: "openai", name: `gpt-x-${m}` }))
    // each model's factor is bounded per tenant, so is their mean
    expect(CalibrationState.globalFactorOf(state, { provider: "openai", name: "gpt-5" }, "tiktoken")).toBeCloseTo(1 + 1 / 11, 9)
  })
})

describe("TokenCounter calibration across tenants", () => {
  it.scoped("1,000 skewed gpt-4o reports from one tenant leave another tenant's estimates within 10 %", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({ backend: "tiktoken" })
      const turn = (tenant: string) =>
        service.countTurn({
          tenant,
          model: { provider: "openai", name: "gpt-4o" },
          system: [],
          tools: [],
          messages: [{ role: "user", parts: [{ type: "text", text: "hello" }] }],
        })
      for (let i = 0; i < 1_000; i++) {
        yield* service.recordUsage({
          tenant: "mallory",
          session: "s",
          turnId: `t${i}`,
          model: { provider: "openai", name: "gpt-4o" },
          usage: { prompt_tokens: 5_000 },
          estimate: 1_000,
          backend: "tiktoken",
          calibration: 1,
        })
      }
      expect((yield* turn("mallory")).calibration).toBe(2)
      const other = yield* turn("alice")
      expect(other.calibration).toBeLessThanOrEqual(1.1)
      // without an explicit tenant, the turn's `tenant` log annotation (set by the assembler) names it
      const annotated = service.countTurn({ model: { provider: "openai", name: "gpt-4o" }, system: [], tools: [], messages: [] })
      expect((yield* annotated.pipe(Effect.annotateLogs({ tenant: "mallory" }))).calibration).toBe(2)
      expect((yield* annotated.pipe(Effect.annotateLogs({ tenant: "alice" }))).calibration).toBe(other.calibration)
    }),
  )

  it.scoped("a Claude model never reported on estimates with the Claude family's factor", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({ backend: "tiktoken" })
      const sonnet = { provider: "anthropic", name: "claude-sonnet-4-6" } as const
      for (let t = 0; t < 10; t++) {
        yield* service.recordUsage({
          tenant: `t${t}`,
          session: "s",
          turnId: "x",
          model: sonnet,
          usage: { input_tokens: 1_300 },
          estimate: 1_000,
          backend: "tiktoken",
          calibration: 1,
        })
      }
      const messages = [{ role: "user" as const, parts: [{ type: "text" as const, text: "hello world, how are you today?" }] }]
      const count = (name: string) =>
        service.countTurn({ tenant: "new", model: { provider: "anthropic", name }, system: [], tools: [], messages })
      const learned = (yield* count("claude-sonnet-4-6")).calibration
      expect(learned).toBeCloseTo((10 + 10 * 1.3) / 20, 9)
      const opus = yield* count("claude-opus-4-7")
      expect(opus.calibration).toBeCloseTo(learned, 9)
      const raw = yield* service.countTurn({
        model: { provider: "anthropic", name: "claude-opus-4-7" },
        backend: "heuristic",
        system: [],
        tools: [],
        messages,
      })
      expect(raw.calibration).toBe(1)
      expect(opus.messageTokens[0]).toBe(Math.round(service.local.countMessage(messages[0]!, "cl100k_base") * learned))
      expect((yield* service.metrics).families["claude#tiktoken"]).toEqual({ factor: learned, models: 1 })
    }),
  )
})
