import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "vitest"
import type * as CachePlanner from "../src/CachePlanner.ts"
import * as Pipeline from "../src/Pipeline.ts"
import * as Proactive from "../src/Proactive.ts"
import { anthropicPairingProblems, call, input, stored, text, user } from "./Helpers.ts"

const base: Proactive.Level = { toolCompression: "none", maskKeep: undefined, pressure: false, dedupe: false }

describe("Proactive.ladder", () => {
  it("climbs compression, then a smaller mask window, then de-duplication", () => {
    expect(Proactive.ladder(base).map((r) => `${r.kind}=${r.value}`)).toEqual([
      "toolCompression=minify",
      "toolCompression=truncate",
      "toolCompression=aggressive",
      "maskKeep=3",
      "maskKeep=1",
      "dedupe=on",
    ])
    const rungs = Proactive.ladder({ ...base, toolCompression: "truncate", maskKeep: 8 })
    expect(rungs.map((r) => `${r.kind}=${r.value}`)).toEqual([
      "toolCompression=aggressive",
      "maskKeep=8",
      "maskKeep=4",
      "maskKeep=2",
      "maskKeep=1",
      "dedupe=on",
    ])
    expect(rungs.at(-1)!.level).toEqual({ toolCompression: "aggressive", maskKeep: 1, pressure: true, dedupe: true })
  })
})

describe("Proactive.escalate", () => {
  it("stops at the first rung under the threshold and reports each step", () => {
    const seen: Array<Proactive.Level> = []
    const out = Proactive.escalate(base, 0.85, (level) => {
      seen.push(level)
      return { result: seen.length, utilization: [1, 0.95, 0.9, 0.8][seen.length - 1]! }
    })
    expect(out.steps.map((s) => s.kind)).toEqual(["toolCompression", "toolCompression", "toolCompression"])
    expect(out.steps.map((s) => s.utilization)).toEqual([0.95, 0.9, 0.8])
    expect(out).toMatchObject({ result: 4, utilizationBefore: 1, utilizationAfter: 0.8 })
    expect(out.level.toolCompression).toBe("aggressive")
  })

  it("starts from the rung carried over from earlier turns (sticky)", () => {
    const levels: Array<Proactive.Level> = []
    const out = Proactive.escalate(base, 0.85, (level) => (levels.push(level), { result: 0, utilization: 0.5 }), 4)
    expect(levels).toEqual([Proactive.ladder(base)[3]!.level])
    expect(out).toMatchObject({ rung: 4, steps: [] })
    expect(Proactive.escalate(base, 0.85, () => ({ result: 0, utilization: 0.5 }), 99).rung).toBe(Proactive.ladder(base).length)
  })

  it("takes no step under the threshold, and every step when nothing helps", () => {
    expect(Proactive.escalate(base, 0.85, () => ({ result: 0, utilization: 0.5 })).steps).toEqual([])
    const all = Proactive.escalate(base, 0.85, () => ({ result: 0, utilization: 0.99 }))
    expect(all.steps).toHaveLength(Proactive.ladder(base).length)
  })
})

describe("proactive compression in the pipeline", () => {
  const bigTool: Conversation.Tool = {
    name: "search",
    description: "Search. ".repeat(50),
    inputSchema: {
      type: "object",
      properties: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`p${i}`, { type: "string", description: "word ".repeat(30) }])),
    },
  }
  const history = (() => {
    const out: Array<Conversation.Message> = [user("task")]
    for (let i = 0; i < 12; i++) {
      out.push({ role: "assistant", parts: [text(`step ${i}`), call(`c${i}`, "search")] })
      out.push({
        role: "tool",
        parts: [{ type: "tool_result", callId: `c${i}`, content: [text(`{"rows":[${i}]}`.padEnd(800, " "))], isError: false }],
      })
    }
    return stored(out, (i) => (i % 2 === 0 && i > 0 ? 400 : 10))
  })()
  const estimate = (tools: ReadonlyArray<Conversation.Tool>) => Math.ceil(JSON.stringify(tools).length / 4)
  const inputAt = (budgetTokens: number, threshold?: number, over: Partial<Pipeline.Input> = {}) =>
    input(history, {
      tools: [bigTool],
      toolsTokens: estimate([bigTool]),
      countTools: estimate,
      countText: (t) => Math.ceil(t.length / 4),
      options: Pipeline.resolveOptions({
        budgetTokens,
        maskKeep: 3,
        ...(threshold === undefined ? {} : { proactiveThreshold: threshold }),
      }),
      ...over,
    })
  const run = (budgetTokens: number, threshold?: number) => Pipeline.run(inputAt(budgetTokens, threshold))

  it("escalates until the window fits under the threshold, and reports the steps", () => {
    const out = run(3_000, 0.85)
    const proactive = out.report.proactive!
    expect(proactive.utilizationBefore).toBeGreaterThan(0.85)
    expect(proactive.utilizationAfter).toBeLessThanOrEqual(0.85)
    expect(proactive.steps.length).toBeGreaterThan(0)
    expect(proactive.steps.at(-1)!.utilization).toBe(proactive.utilizationAfter)
    expect(out.report.tools!.compression).not.toBe("none")
    expect(out.report.tools!.saved).toBeGreaterThan(0)
    expect(anthropicPairingProblems(out.request)).toEqual([])
    expect(out.proactiveRung).toBe(proactive.rung)
    expect(proactive.rung).toBe(proactive.steps.length)
  })

  it("stays at the rung reached on later turns, even without pressure", () => {
    const pressed = run(3_000, 0.85)
    const later = Pipeline.run(inputAt(1_000_000, 0.85, { proactiveRung: pressed.proactiveRung }))
    expect(later.report.proactive).toMatchObject({ steps: [], carried: pressed.proactiveRung, rung: pressed.proactiveRung })
    expect(later.report.tools!.compression).toBe(pressed.report.tools!.compression)
  })

  it("under the cache planner, climbs a rung on a warm cache only once it is earned, at once when cold", () => {
    const plan = { read: 0.1, write: 1.25, expectedTurns: 50, cold: false, ttlSeconds: 300, minCacheable: 0 }
    const planned = (previous: CachePlanner.Candidate | undefined, over: Partial<CachePlanner.Plan> = {}) =>
      Pipeline.run(inputAt(3_000, 0.85, { cachePlan: { ...plan, previous, ...over } }))
    // the previous prompt: the same history one turn earlier, sent at rung 0 (no pressure then)
    const before = Pipeline.run(inputAt(1_000_000, 0.85, { history: history.slice(0, -2), cachePlan: plan }))
    const held = planned(before.shape)
    expect(held.report.proactive).toMatchObject({ steps: [], rung: 0 })
    expect(held.report.proactive!.utilizationBefore).toBeGreaterThan(0.85)
    expect(held.shape?.rent?.rung).toBeGreaterThan(0)
    const earned = planned({ ...before.shape!, rent: { window: 0, mask: 0, rung: 1e9 } })
    expect(earned.report.proactive!.steps.length).toBeGreaterThan(0)
    expect(earned.shape?.rent?.rung).toBe(0)
    const cold = planned(before.shape, { cold: true })
    expect(cold.report.proactive!.rung).toBe(earned.report.proactive!.rung)
  })

  it("changes nothing but the report under the threshold", () => {
    const calm = run(1_000_000, 0.85)
    expect(calm.report.proactive).toEqual({
      threshold: 0.85,
      utilizationBefore: calm.report.proactive!.utilizationBefore,
      utilizationAfter: calm.report.proactive!.utilizationBefore,
      steps: [],
      carried: 0,
      rung: 0,
    })
    expect(calm.proactiveRung).toBe(0)
    const plain = run(1_000_000)
    expect(calm.request).toEqual(plain.request)
    expect(calm.report.tokens).toEqual(plain.report.tokens)
  })
})
