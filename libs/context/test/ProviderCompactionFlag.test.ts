// The `providerCompaction` capability: the Anthropic rows the on-demand compaction docs list, and the price file
// setting it like the other flags.
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as CostModel from "../src/CostModel.ts"
import * as PriceFile from "../src/PriceFile.ts"

const flag = (name: string): boolean => CostModel.lookup(name).capabilities.providerCompaction === true

describe("providerCompaction", () => {
  it("is set on the models the compaction-on-demand page lists, and on no other", () => {
    for (const name of [
      "claude-opus-5-5",
      "claude-sonnet-5-5",
      "claude-haiku-5-5",
      "claude-fable-5-1",
      "claude-opus-4-6",
      "claude-sonnet-4-6",
    ]) {
      expect(flag(name), name).toBe(true)
    }
    for (const name of [
      "claude-sonnet-4-5",
      "claude-opus-4-5",
      "claude-haiku-4-5",
      "claude-fable-5-2",
      "claude-x-9",
      "gpt-5.6-sol",
      "gemini-3-pro",
    ]) {
      expect(flag(name), name).toBe(false)
    }
  })

  it("a price file row sets it, and refuses a value that is not a boolean", () => {
    const prices = Either.getOrThrow(
      PriceFile.decode({ models: [{ match: "claude-sonnet-4-5", capabilities: { providerCompaction: true } }] }),
    )
    expect(prices.lookup("claude-sonnet-4-5").capabilities.providerCompaction).toBe(true)
    expect(Either.isLeft(PriceFile.decode({ models: [{ match: "a", capabilities: { providerCompaction: "yes" } }] }))).toBe(true)
  })
})
