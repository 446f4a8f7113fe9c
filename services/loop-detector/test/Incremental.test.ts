import type { Conversation } from "@ctxd/contracts"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as LoopConfig from "../src/LoopConfig.ts"
import * as Detector from "../src/Detector.ts"
import * as LoopState from "../src/LoopState.ts"

/**
 * Histories over a tiny, skewed alphabet (2 tools, 2 argument values, 2
 * results, mostly the same ones), so that every pattern occurs in generated data.
 */
type Step =
  | {
      readonly kind: "call"
      readonly tools: ReadonlyArray<{ name: number; arg: number; result: number; error: boolean; answered: boolean }>
    }
  | { readonly kind: "say" | "user" | "system" | "overflow" | "orphan" }

/** 0 four times out of five, else 1. */
const often0 = fc.integer({ min: 0, max: 4 }).map((n) => (n === 0 ? 1 : 0))

const callArb: fc.Arbitrary<Step> = fc.record({
  kind: fc.constant("call" as const),
  tools: fc.array(
    fc.record({
      name: fc.integer({ min: 0, max: 2 }).map((n) => n % 2),
      arg: often0,
      result: often0,
      error: often0.map((n) => n === 1),
      answered: often0.map((n) => n === 0),
    }),
    { minLength: 1, maxLength: 2 },
  ),
})

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 10, arbitrary: callArb },
  { weight: 2, arbitrary: fc.constant({ kind: "say" as const }) },
  { weight: 1, arbitrary: fc.constantFrom<Step>({ kind: "user" }, { kind: "system" }, { kind: "overflow" }, { kind: "orphan" }) },
)

const toMessages = (steps: ReadonlyArray<Step>): ReadonlyArray<Conversation.Message> => {
  let id = 0
  return steps.flatMap((s): Array<Conversation.Message> => {
    switch (s.kind) {
      case "call": {
        const calls = s.tools.map((t) => ({ ...t, id: `c${id++}` }))
        const message: Conversation.Message = {
          role: "assistant",
          parts: calls.map((c) => ({ type: "tool_call", id: c.id, name: `tool${c.name}`, input: { x: c.arg } })),
        }
        const results = calls
          .filter((c) => c.answered)
          .map((c): Conversation.Message => ({
            role: "tool",
            parts: [{ type: "tool_result", callId: c.id, content: [{ type: "text", text: `r${c.result}` }], isError: c.error }],
          }))
        return [message, ...results]
      }
      case "say":
        return [{ role: "assistant", parts: [{ type: "text", text: "thinking" }] }]
      case "user":
        return [{ role: "user", parts: [{ type: "text", text: "go on" }] }]
      case "system":
        return [{ role: "system", parts: [{ type: "text", text: "note" }] }]
      case "overflow":
        return [{ role: "system", parts: [{ type: "text", text: "Error: prompt is too long" }] }]
      case "orphan":
        return [{ role: "tool", parts: [{ type: "tool_result", callId: "gone", content: [], isError: false }] }]
    }
  })
}

/** Random histories, half of them built around a block of 1-4 steps repeated 1-5 times (loops of every kind). */
const historyArb = fc.oneof(
  fc.array(stepArb, { maxLength: 120 }).map(toMessages),
  fc
    .tuple(
      fc.array(stepArb, { maxLength: 12 }),
      fc.array(fc.oneof({ weight: 4, arbitrary: callArb }, { weight: 1, arbitrary: stepArb }), { minLength: 1, maxLength: 4 }),
      fc.integer({ min: 1, max: 5 }),
      fc.array(stepArb, { maxLength: 6 }),
    )
    .map(([before, block, times, after]) => toMessages([...before, ...Array.from({ length: times }, () => block).flat(), ...after])),
)

const configs = [
  LoopConfig.defaults,
  LoopConfig.make({ repeatedCall: { threshold: 2 }, repeatedError: { threshold: 2 }, alternation: { cycles: 2, maxPeriod: 4 } }),
  LoopConfig.make({ monologue: { threshold: 2 }, contextOverflow: { threshold: 3, withinMessages: 10 } }),
]

/** Cuts `messages` at the given points (taken modulo the length), sorted and deduplicated. */
const chunks = (messages: ReadonlyArray<Conversation.Message>, cuts: ReadonlyArray<number>) => {
  const points = [...new Set(cuts.map((c) => c % (messages.length + 1)))].sort((a, b) => a - b)
  const bounds = [0, ...points, messages.length]
  return bounds.slice(1).map((end, i) => ({ start: bounds[i]!, messages: messages.slice(bounds[i]!, end) }))
}

describe("incremental observe", () => {
  it("any split of the history into chunks gives the same state and verdict as the one-shot check", () => {
    fc.assert(
      fc.property(historyArb, fc.array(fc.nat(), { maxLength: 12 }), (messages, cuts) => {
        const whole = LoopState.observe(LoopState.initial(), messages, 0)
        let state = LoopState.initial()
        for (const chunk of chunks(messages, cuts)) state = LoopState.observe(state, chunk.messages, chunk.start)
        expect(state).toEqual(whole)
        for (const config of configs) expect(Detector.verdict(state, config)).toEqual(Detector.check(messages, config))
      }),
      { numRuns: 300 },
    )
  })

  it("the verdict after every message equals the one-shot check of that prefix", () => {
    fc.assert(
      fc.property(historyArb, (messages) => {
        let state = LoopState.initial()
        messages.forEach((message, i) => {
          state = LoopState.observe(state, [message], i)
          for (const config of configs) expect(Detector.verdict(state, config)).toEqual(Detector.check(messages.slice(0, i + 1), config))
        })
      }),
      { numRuns: 100 },
    )
  })

  it("skips what was already folded: passing the whole history again, or an overlapping chunk, changes nothing", () => {
    fc.assert(
      fc.property(historyArb, fc.nat(), fc.nat(), (messages, cut, back) => {
        const at = cut % (messages.length + 1)
        const head = LoopState.observe(LoopState.initial(), messages.slice(0, at), 0)
        const whole = LoopState.observe(LoopState.initial(), messages, 0)
        expect(LoopState.observe(head, messages, 0)).toEqual(whole)
        const from = Math.max(0, at - (back % 5))
        expect(LoopState.observe(head, messages.slice(from), from)).toEqual(whole)
        expect(LoopState.observe(whole, messages, 0)).toBe(whole)
      }),
    )
  })

  it("does not modify the input state, and defaults startIndex to state.next", () => {
    const messages = toMessages([{ kind: "call", tools: [{ name: 0, arg: 0, result: 0, error: false, answered: true }] }, { kind: "say" }])
    const before = LoopState.observe(LoopState.initial(), messages.slice(0, 1), 0)
    const snapshot = structuredClone(before)
    const after = LoopState.observe(before, messages.slice(1))
    expect(before).toEqual(snapshot)
    expect(after).toEqual(LoopState.observe(LoopState.initial(), messages, 0))
  })

  it("keeps the state bounded and JSON-serializable however long the loop runs", () => {
    const loop = toMessages(
      Array.from({ length: 5_000 }, (_, i): Step =>
        i % 7 === 6 ? { kind: "say" } : { kind: "call", tools: [{ name: i % 2, arg: 0, result: 0, error: false, answered: i % 11 !== 0 }] },
      ),
    )
    const state = LoopState.observe(LoopState.initial(), loop, 0)
    const json = JSON.stringify(state)
    expect(JSON.parse(json)).toEqual(state)
    expect(state.events.length).toBeLessThanOrEqual(LoopState.EVENT_CAP)
    expect(state.pending.length).toBeLessThanOrEqual(LoopState.PENDING_CAP)
    expect(json.length).toBeLessThan(20_000)
    expect(state.next).toBe(loop.length)
  })

  it("folds a gap with the chunk's own indices", () => {
    const messages = toMessages([{ kind: "say" }, { kind: "say" }])
    const state = LoopState.observe(LoopState.initial(), messages, 100)
    expect(state.next).toBe(102)
    expect(state.monologueIndices).toEqual([100, 101])
  })
})
