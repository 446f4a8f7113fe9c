import { describe, expect, it } from "vitest"
import * as Models from "../src/Models.ts"

describe("Models.resolve", () => {
  const limits = (name: string) => {
    const m = Models.resolve({ provider: "openai", name })
    return [m.contextWindow, m.maxOutputTokens]
  }

  it("uses the default table by name prefix", () => {
    expect(limits("claude-sonnet-4-5")).toEqual([200_000, 8_192])
    expect(limits("gpt-4o")).toEqual([128_000, 16_384])
    expect(limits("gpt-4o-mini")).toEqual([128_000, 16_384])
    expect(limits("gpt-4.1-mini")).toEqual([1_047_576, 32_768])
    expect(limits("gpt-5")).toEqual([400_000, 128_000])
    expect(limits("o3")).toEqual([200_000, 100_000])
    expect(limits("o4-mini")).toEqual([200_000, 100_000])
    expect(limits("gpt-4-turbo")).toEqual([128_000, 4_096])
    expect(limits("omni-model")).toEqual([128_000, 4_096])
    expect(limits("llama-3")).toEqual([128_000, 4_096])
  })

  it("lets explicit fields win and computes the effective window", () => {
    expect(Models.resolve({ provider: "anthropic", name: "claude-x", contextWindow: 100_000, maxOutputTokens: 1_000 })).toEqual({
      provider: "anthropic",
      name: "claude-x",
      contextWindow: 100_000,
      maxOutputTokens: 1_000,
      effectiveWindow: 99_000,
      // explicit limits do not make a model known: its prices still come from the catch-all `claude` row
      known: false,
      row: "claude",
    })
  })

  it("clamps an output reserve that does not fit to half the window", () => {
    const m = Models.resolve({ provider: "openai", name: "gpt-5", contextWindow: 8_193 })
    expect(m.maxOutputTokens).toBe(4_096)
    expect(m.effectiveWindow).toBe(4_097)
    expect(Models.resolve({ provider: "openai", name: "x", contextWindow: 2_000, maxOutputTokens: 2_000 }).maxOutputTokens).toBe(1_000)
  })
})
