/** A turn of a model the table does not name: its report says so and ctxd_unknown_model_turns_total counts it. */
import { Models, Pipeline } from "@ctxd/context"
import { Effect, Metric } from "effect"
import { describe, expect, it } from "vitest"
import * as TurnMetrics from "../src/TurnMetrics.ts"

const unknownTurns = (provider: string): number =>
  Effect.runSync(Metric.snapshot)
    .filter((p) => p.metricKey.name === "ctxd_unknown_model_turns_total")
    .filter((p) => p.metricKey.tags.some((t) => t.key === "provider" && t.value === provider))
    .map((p) => (p.metricState as { count?: number }).count ?? 0)
    .reduce((a, b) => a + b, 0)

const report = (name: string, provider: "anthropic" | "openai" = "openai") =>
  Pipeline.run({
    tenant: "acme",
    session: "s1",
    format: provider,
    model: Models.resolve({ provider, name }),
    system: [{ id: "system", text: "You are helpful.", cache: "5m" }],
    systemTokens: 5,
    tools: [],
    toolsTokens: 0,
    history: [{ seq: 1, message: { role: "user", parts: [{ type: "text", text: "hi" }] }, tokens: 3 }],
    options: Pipeline.resolveOptions(undefined),
    counter: { backend: "test", encoding: "o200k_base", exact: false, calibration: 1 },
  }).report

describe("an unknown model", () => {
  it("is flagged in the turn report with the conservative row, a known one is not", () => {
    expect(report("llama-4-400b").model).toMatchObject({ known: false, row: "unknown", contextWindow: 128_000, maxOutputTokens: 4_096 })
    expect(report("claude-next-9", "anthropic").model).toMatchObject({ known: false, row: "claude" })
    const known = report("gpt-5.6-sol").model
    expect(known.contextWindow).toBe(1_050_000)
    expect("known" in known || "row" in known).toBe(false)
  })

  it("is counted by provider in ctxd_unknown_model_turns_total", () => {
    const before = unknownTurns("openai")
    TurnMetrics.record(report("llama-4-400b"))
    TurnMetrics.record(report("gpt-5.6-sol"))
    expect(unknownTurns("openai")).toBe(before + 1)
  })
})
