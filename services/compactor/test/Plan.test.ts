/** The pure planning: thresholds, the cut (tail kept, tool pairs whole), the summarized view. */
import { type Pipeline, Units } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { Plan, View } from "../src/index.ts"

const text = (role: "user" | "assistant", t: string): Conversation.Message => ({ role, parts: [{ type: "text", text: t }] })
const call = (ids: ReadonlyArray<string>): Conversation.Message => ({
  role: "assistant",
  parts: ids.map((id) => ({ type: "tool_call", id, name: "lookup", input: { id } })),
})
const result = (id: string): Conversation.Message => ({
  role: "tool",
  parts: [{ type: "tool_result", callId: id, content: [{ type: "text", text: `result ${id}` }], isError: false }],
})
const stored = (messages: ReadonlyArray<Conversation.Message>, tokens: (i: number) => number = () => 100): Array<Pipeline.StoredMessage> =>
  messages.map((message, i) => ({ seq: i + 1, message, tokens: tokens(i) }))

/** user, then n rounds of (assistant call, tool result, assistant text). */
const session = (n: number): Array<Conversation.Message> => [
  text("user", "Please fix the bug in the parser."),
  ...Array.from({ length: n }, (_, i) => [call([`c${i}`]), result(`c${i}`), text("assistant", `step ${i} done`)]).flat(),
]

const t: Plan.Thresholds = { ...Plan.defaults, tailKeepTokens: 1_000 }

describe("Plan.decide", () => {
  it("none below soft, background from soft (hard from compact_at_pct), blocking only over the window", () => {
    expect(Plan.decide(5_999, 10_000)).toMatchObject({ trigger: "none", reason: "below_soft" })
    expect(Plan.decide(6_000, 10_000)).toMatchObject({ trigger: "background", reason: "soft" })
    expect(Plan.decide(7_500, 10_000)).toMatchObject({ trigger: "background", reason: "hard", utilization: 0.75 })
    expect(Plan.decide(10_000, 10_000)).toMatchObject({ trigger: "background", reason: "hard" })
    expect(Plan.decide(10_001, 10_000)).toMatchObject({ trigger: "blocking", reason: "over_window" })
    // a soft threshold above compact_at_pct starts at compact_at_pct
    expect(Plan.decide(7_000, 10_000, { ...Plan.defaults, softPct: 0.9 }).trigger).toBe("none")
    expect(Plan.decide(7_500, 10_000, { ...Plan.defaults, softPct: 0.9 }).trigger).toBe("background")
  })

  it("the estimate is the fixed part plus the view", () => {
    expect(Plan.estimate(stored(session(3)), 500)).toBe(500 + 10 * 100)
  })

  it("the tail: tail_keep_tokens, capped by the window and by what the soft threshold leaves", () => {
    expect(Plan.tailKeep(191_808)).toBe(20_000)
    expect(Plan.tailKeep(14_000)).toBe(4_200)
    expect(Plan.tailKeep(14_000, Plan.defaults, 4_400)).toBe(2_000)
    expect(Plan.tailKeep(10_000, Plan.defaults, 9_000)).toBe(0)
  })
})

describe("Plan.planCut", () => {
  it("keeps at least tail_keep_tokens verbatim and cuts on a unit boundary", () => {
    const history = stored(session(20)) // 61 messages of 100 tokens
    const cut = Plan.planCut(history, undefined, 100_000, t)
    expect(cut).toMatchObject({ _tag: "Cut", fromIndex: 0, coversFromSeq: 1 })
    if (cut._tag !== "Cut") return
    expect(cut.tailTokens).toBeGreaterThanOrEqual(1_000)
    expect(cut.tailTokens).toBeLessThan(1_300)
    expect(Units.isBoundary(history, cut.toIndex)).toBe(true)
    expect(history[cut.toIndex]!.message.role).not.toBe("tool")
    expect(cut.coversToSeq).toBe(history[cut.toIndex - 1]!.seq)
    expect(cut.foldTokens + cut.tailTokens).toBe(6_100)
  })

  it("rolls over the live summary: folds only what came after it, covering from the start", () => {
    const history = stored(session(40))
    const live: View.Summary = { coversFromSeq: 1, coversToSeq: 60, text: "- s", mode: "rolling", depth: 1 }
    const cut = Plan.planCut(history, live, 100_000, t)
    expect(cut).toMatchObject({ _tag: "Cut", fromIndex: 60, coversFromSeq: 1 })
    if (cut._tag === "Cut") expect(cut.foldTokens).toBe((cut.toIndex - 60) * 100)
  })

  it("no_boundary: nothing new beyond the tail, a unit bigger than everything, too little to fold", () => {
    expect(Plan.planCut(stored(session(3)), undefined, 100_000, t)).toMatchObject({ _tag: "NoBoundary" })
    // one assistant turn with 30 parallel calls and their results: a single unit
    const ids = Array.from({ length: 30 }, (_, i) => `p${i}`)
    const parallel = stored([call(ids), ...ids.map(result)])
    expect(Plan.planCut(parallel, undefined, 100_000, t)).toMatchObject({ _tag: "NoBoundary" })
    const live: View.Summary = { coversFromSeq: 1, coversToSeq: 60, text: "- s", mode: "rolling", depth: 1 }
    expect(Plan.planCut(stored(session(22)), live, 100_000, t)).toMatchObject({ _tag: "NoBoundary" })
    const small = Plan.planCut(stored(session(22)), undefined, 100_000, t, { minFoldTokens: 10_000 })
    expect(small).toMatchObject({ _tag: "NoBoundary", reason: expect.stringMatching(/less than the minimum/) })
  })

  it("never separates a tool call from its results (property)", () => {
    const unit = fc.oneof(
      fc.constant("text" as const),
      fc.integer({ min: 1, max: 4 }).map((k) => k),
    )
    fc.assert(
      fc.property(
        fc.array(unit, { minLength: 1, maxLength: 60 }),
        fc.array(fc.integer({ min: 1, max: 900 }), { minLength: 200, maxLength: 200 }),
        fc.integer({ min: 100, max: 5_000 }),
        (units, sizes, keep) => {
          const messages: Array<Conversation.Message> = [text("user", "task")]
          units.forEach((u, k) => {
            if (u === "text") messages.push(text(k % 2 === 0 ? "assistant" : "user", `m${k}`))
            else {
              const ids = Array.from({ length: u }, (_, j) => `u${k}-${j}`)
              messages.push(call(ids), ...ids.map(result))
            }
          })
          const history = stored(messages, (i) => sizes[i % sizes.length]!)
          const cut = Plan.planCut(history, undefined, 1_000_000, { ...Plan.defaults, tailKeepTokens: keep })
          if (cut._tag === "NoBoundary") return
          expect(Units.isBoundary(history, cut.toIndex)).toBe(true)
          expect(cut.toIndex).toBeGreaterThan(0)
          expect(cut.toIndex).toBeLessThan(history.length)
          const callsBefore = new Set(
            history
              .slice(0, cut.toIndex)
              .flatMap((m) =>
                Units.hasToolCalls(m.message) ? m.message.parts.flatMap((p) => (p.type === "tool_call" ? [p.id] : [])) : [],
              ),
          )
          for (const m of history.slice(cut.toIndex)) {
            for (const p of m.message.parts) if (p.type === "tool_result") expect(callsBefore.has(p.callId)).toBe(false)
          }
        },
      ),
      { numRuns: 300 },
    )
  })
})

describe("View.applySummary", () => {
  const count = (m: Conversation.Message) => JSON.stringify(m).length
  const summary: View.Summary = { id: 7, coversFromSeq: 1, coversToSeq: 31, text: "- fixed the lexer", mode: "rolling", depth: 1 }

  it("replaces the covered span with a user/assistant pair carrying the request and the summary", () => {
    const pinned: Conversation.Message = { role: "system", parts: [{ type: "text", text: "Be terse." }] }
    const messages = session(20)
    messages.splice(5, 0, pinned)
    const history = stored(messages)
    const view = View.applySummary(history, summary, count)
    expect(view.tailFrom).toBe(31)
    expect(view.prefixLength).toBe(3)
    expect(view.messages.map((m) => m.message.role).slice(0, 4)).toEqual(["system", "user", "assistant", history[31]!.message.role])
    const user = view.messages[1]!.message.parts[0]
    expect(user).toEqual({
      type: "text",
      text: "[Summary of messages 1–31: the earlier conversation was compacted]\n\nThe conversation began with this request:\nPlease fix the bug in the parser.\n\nSummary:\n- fixed the lexer",
    })
    expect(view.messages[2]!.message.parts).toEqual([{ type: "text", text: View.ACK }])
    expect(view.messages[1]!.tokens).toBe(count(view.messages[1]!.message))
    expect(view.messages.slice(3)).toEqual(history.slice(31))
    expect(view.key).toBe("1-31-7")
  })

  it("is stable and append-mostly: the same prefix on every turn, new messages appended", () => {
    const history = stored(session(20))
    const a = View.applySummary(history.slice(0, 50), summary, count)
    const b = View.applySummary(history, summary, count)
    expect(b.messages.slice(0, a.messages.length)).toEqual(a.messages)
    expect(View.extend(a, history).messages).toEqual(b.messages)
    expect(View.applySummary(history, undefined, count).messages).toBe(history)
  })
})
