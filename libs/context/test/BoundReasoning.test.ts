/**
 * Reasoning bound to its prefix: on a binding model every body ctxd builds
 * passes the fake provider's prefix check, request after request, whatever
 * ctxd edits (masking, the window, the tools); older models keep today's
 * behaviour.
 */
import { describe, expect, it } from "vitest"
import * as Pipeline from "../src/Pipeline.ts"
import { play, type Sent } from "./BoundSession.ts"

const BINDING = "claude-sonnet-5-5"
const loop = (calls: number, size = 4_000) => [{ results: Array.from({ length: calls }, () => size), blocks: 1 }]
const prefixFailures = (sent: ReadonlyArray<Sent>) =>
  sent.flatMap((s, i) =>
    !s.outcome.ok
      ? [`request ${i}: ${s.outcome.message}`]
      : s.outcome.dropped.length > 0 && s.report.reasoning?.blockBinding === undefined
        ? [`request ${i}: dropped ${s.outcome.dropped.map((d) => d.path).join(", ")} without drop_block`]
        : [],
  )

describe("reasoning bound to its prefix", () => {
  it("a tool-use loop with masking on a binding model: every body passes the prefix check", () => {
    const options = Pipeline.resolveOptions({ maskKeep: 2, windowMessages: 200 })
    const sent = play({ model: BINDING, options, planner: false }, [...loop(12), ...loop(6)])
    expect(prefixFailures(sent)).toEqual([])
    // masking without the planner advances inside the loop: the reasoning after the edit goes, counted
    const changed = sent.reduce((n, s) => n + (s.report.reasoning?.leftOut?.prefixChanged ?? 0), 0)
    expect(changed).toBeGreaterThan(0)
  })

  it("a window cut and a tool list change leave the reasoning after them out, never a 400", () => {
    const options = Pipeline.resolveOptions({ windowMessages: 8, windowStep: 2 })
    const turns = [...loop(5, 100), { results: [100, 100], blocks: 2, newTool: true }, { results: [100], blocks: 1, nudge: true }]
    const sent = play({ model: BINDING, options, planner: false, memory: "remember: blue" }, turns)
    expect(prefixFailures(sent)).toEqual([])
  })

  it("the continuation's final block is kept under drop_block when a forced edit would take it", () => {
    const options = Pipeline.resolveOptions({ maskKeep: 1, windowMessages: 200 })
    const sent = play({ model: BINDING, options, planner: false }, loop(6, 4_000))
    const forced = sent.filter((s) => s.report.reasoning?.blockBinding !== undefined)
    expect(forced.length).toBeGreaterThan(0)
    for (const s of forced) {
      expect(s.report.reasoning?.blockBinding).toEqual({
        prefixMismatchBehavior: "drop_block",
        betaHeader: "thinking-binding-controls-2026-08-01",
      })
      expect((s.body["thinking"] as Record<string, unknown>)["block_binding"]).toEqual({ prefix_mismatch_behavior: "drop_block" })
    }
    expect(prefixFailures(sent)).toEqual([])
  })

  it("the option drop_block sets it in every body", () => {
    const options = Pipeline.resolveOptions({ thinkingPrefixMismatch: "drop_block" })
    const sent = play({ model: BINDING, options, planner: false }, loop(2, 10))
    for (const s of sent)
      expect((s.body["thinking"] as Record<string, unknown>)["block_binding"]).toEqual({ prefix_mismatch_behavior: "drop_block" })
    // by default, none: nothing forced it
    const plain = play({ model: BINDING, options: Pipeline.resolveOptions({}), planner: false }, loop(2, 10))
    for (const s of plain) expect((s.body["thinking"] as Record<string, unknown>)["block_binding"]).toBeUndefined()
  })

  it("the planner prices invalidated reasoning: in a long loop with a roomy window the latest thinking goes valid in nearly every request", () => {
    // 30 results of ~4,000 tokens: masking pays in cache terms well inside the loop, but an edit there would
    // invalidate the loop's thinking (and, forced, every later block of the loop); priced at the output
    // price it waits for the next user turn, where the frontier has let that reasoning go anyway.
    // Threshold 95 %: with room in the window no edit is forced, so only a rare edit that pays may cost one.
    const options = Pipeline.resolveOptions({ maskKeep: 3, windowMessages: 400 })
    const turns = [
      { results: Array.from({ length: 30 }, () => 16_000), blocks: 1 },
      { results: [16_000, 16_000], blocks: 1 },
    ]
    const sent = play({ model: BINDING, options, planner: true }, turns)
    expect(prefixFailures(sent)).toEqual([])
    const loop = sent.slice(1, 31)
    const valid = loop.filter((s) => s.keptLatest && s.report.reasoning?.blockBinding === undefined).length
    expect(valid / loop.length).toBeGreaterThanOrEqual(0.95)
    // the edit is made at the first request of the next user turn
    expect(sent[31]!.report.masking?.masked ?? 0).toBeGreaterThan(0)
  })

  it("an older model: no record, no causes, today's behaviour", () => {
    const options = Pipeline.resolveOptions({ maskKeep: 2 })
    const sent = play({ model: "claude-sonnet-4-6", options, planner: false }, loop(6))
    for (const s of sent) {
      expect(s.report.reasoning?.leftOut).toBeUndefined()
      expect(s.report.reasoning?.blockBinding).toBeUndefined()
    }
  })
})
