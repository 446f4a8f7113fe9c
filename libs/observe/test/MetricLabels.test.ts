import { describe, expect, it } from "@effect/vitest"
import { MetricLabels } from "../src/index.ts"

describe("MetricLabels", () => {
  it("admits the first `max` distinct values, then answers other", () => {
    const labels = MetricLabels.make(2)
    expect([labels.label("a"), labels.label("b"), labels.label("c"), labels.label("a"), labels.label("b")]).toEqual([
      "a",
      "b",
      "other",
      "a",
      "b",
    ])
    expect(labels.size()).toBe(2)
  })

  it("normalizes values: odd characters become _, long ones are cut, empty is _", () => {
    expect(MetricLabels.normalize('we"ird}\nname')).toBe("we_ird__name")
    expect(MetricLabels.normalize("x".repeat(500))).toHaveLength(MetricLabels.defaults.maxLength)
    expect(MetricLabels.normalize("")).toBe("_")
  })

  it("labels models as lowercase provider/name", () => {
    expect(MetricLabels.model({ provider: "anthropic", name: "Claude-Sonnet-4-5" })).toBe("anthropic/claude-sonnet-4-5")
  })
})
