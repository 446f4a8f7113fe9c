/**
 * Issue 12, item 4: the newest exchange (the latest request and the last
 * message with its whole tool-call group) is always sent, whatever the
 * window and the budget; when it alone does not fit, the report says
 * `overBudget`.
 */
import type { Conversation } from "@ctxd/contracts"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Pipeline from "../src/Pipeline.ts"
import * as Budget from "../src/Budget.ts"
import * as Units from "../src/Units.ts"
import * as Window from "../src/Window.ts"
import { assembleInput } from "./Generators.ts"
import {
  anthropicPairingProblems,
  assistant,
  calls,
  input,
  openaiPairingProblems,
  responsesPairingProblems,
  result,
  results,
  stored,
  sys,
  user,
} from "./Helpers.ts"

type Json = Record<string, unknown>

const ids = Array.from({ length: 12 }, (_, i) => `call_${i}`)

/**
 * The reported session: the anchor, six earlier exchanges, the latest
 * request, then an assistant message with 12 parallel calls and its 12
 * results, one `tool` message each (as OpenAI sends them): 26 messages.
 */
const session = (): Array<Conversation.Message> => [
  user("first request"),
  ...Array.from({ length: 6 }, (_, i) => [assistant(`reply ${i}`), user(`request ${i}`)]).flat(),
  calls(...ids),
  ...ids.map((id): Conversation.Message => ({ role: "tool", parts: [result(id)] })),
]

describe("the newest exchange is always sent", () => {
  for (const format of ["anthropic", "openai", "openai-responses"] as const) {
    it(`${format}: 12 parallel calls and their 12 results, larger than windowMessages 10`, () => {
      const history = stored(session())
      expect(history).toHaveLength(26)
      const { request, report } = Pipeline.run(
        input(history, { format, options: Pipeline.resolveOptions({ windowMessages: 10, windowStep: 5 }) }),
      )
      const body = JSON.stringify(request["messages"] ?? request["input"])
      for (const id of ids) expect(body).toContain(id)
      for (const id of ids) expect(body).toContain(`result of ${id}`)
      expect(body).toContain("first request")
      // The user's latest request, before the window, is kept like the anchor.
      expect(body).toContain("request 5")
      const pairing =
        format === "anthropic" ? anthropicPairingProblems : format === "openai" ? openaiPairingProblems : responsesPairingProblems
      expect(pairing(request)).toEqual([])
      if (format === "openai") {
        const messages = request["messages"] as Array<Json>
        expect(messages.map((m) => m["role"])).toEqual(["system", "user", "user", "assistant", ...ids.map(() => "tool")])
        expect((messages[3]!["tool_calls"] as Array<Json>).map((c) => c["id"])).toEqual(ids)
      }
      const m = report.messages
      expect(m).toMatchObject({ stored: 26, window: 13, sent: 15, droppedByWindow: 11, droppedByBudget: 0 })
      expect(m.sent + m.droppedByWindow + m.droppedByBudget).toBe(m.stored)
      expect(m.firstSentSeq).toBe(1)
      expect(m.lastSentSeq).toBe(26)
      expect(report.orphans).toEqual({ calls: 0, results: 0 })
      expect(report.overBudget).toBe(false)
      expect(report.tokens.history).toBe(150)
    })

    it(`${format}: sends the exchange and says overBudget when it alone exceeds the budget`, () => {
      const history = stored(session())
      const { request, report } = Pipeline.run(
        input(history, {
          format,
          options: Pipeline.resolveOptions({ windowMessages: 10, windowStep: 5, freshTailMessages: 0, budgetTokens: 50 }),
        }),
      )
      const body = JSON.stringify(request["messages"] ?? request["input"])
      for (const id of ids) expect(body).toContain(`result of ${id}`)
      expect(report.overBudget).toBe(true)
      expect(report.tokens.total).toBeGreaterThan(50)
      const m = report.messages
      expect(m).toMatchObject({ sent: 15, lastSentSeq: 26 })
      expect(m.sent + m.droppedByWindow + m.droppedByBudget).toBe(m.stored)
    })
  }
})

/** `u0 a1 u2`, then `runs` tool exchanges (calls at odd indices from 3, results after them). */
const agentRun = (runs: number): Array<Conversation.Message> => [
  user("u0"),
  assistant("a1"),
  user("u2"),
  ...Array.from({ length: runs }, (_, i) => [calls(`c${i}`), results(`c${i}`)]).flat(),
]

const windowOf = (messages: ReadonlyArray<Conversation.Message>, windowMessages: number, windowStep: number) => {
  const h = Units.entries(messages)
  return Window.compute(h, { windowMessages, windowStep }, Window.landmarks(h))
}

const allocate = (
  history: ReadonlyArray<Budget.Entry>,
  k: { total: number; tail: number; N?: number; step?: number },
): Budget.Allocation => {
  const marks = Window.landmarks(history)
  const window = Window.compute(history, { windowMessages: k.N ?? 40, windowStep: k.step ?? 1 }, marks)
  return Budget.allocate(history, window, {
    totalTokens: k.total,
    systemTokens: 0,
    toolsTokens: 0,
    memoryTokens: 0,
    freshTailMessages: k.tail,
    windowStep: k.step ?? 1,
    pinned: marks.pinned,
  })
}

describe("masking and the newest exchange", () => {
  it("never masks the results the model has not read yet", () => {
    const options = Pipeline.resolveOptions({ maskKeep: 3, maskBatchTokens: 500 })
    const history = stored(session(), (i) => (i >= 14 ? 200 : 10))
    for (const format of ["anthropic", "openai", "openai-responses"] as const) {
      const { request, report } = Pipeline.run(input(history, { format, options }))
      const body = JSON.stringify(request["messages"] ?? request["input"])
      for (const id of ids) expect(body).toContain(`result of ${id}`)
      expect(report.masking?.masked).toBe(0)
      // One more turn: the model has read them; all but the last 3 may go.
      const next = Pipeline.run(
        input(
          stored([...session(), assistant("done"), user("thanks")], (i) => (i >= 14 && i < 26 ? 200 : 10)),
          {
            format,
            options,
          },
        ),
      )
      expect(next.report.masking?.masked).toBeGreaterThan(0)
    }
  })
})

describe("Window.compute and the newest exchange", () => {
  it("never starts after the last tool-call group, and finds the latest request", () => {
    const w = windowOf(session(), 10, 5)
    expect(w.gridCut).toBe(15)
    expect(w).toMatchObject({ start: 13, lastUnit: 13, anchor: 0, request: 12, held: undefined })
  })

  it("skips trailing pinned messages when finding the last group", () => {
    const messages = [user("u0"), calls("a", "b", "c"), results("a"), results("b"), results("c"), sys("policy")]
    expect(Units.lastUnitStart(Units.entries(messages))).toBe(1)
    expect(windowOf(messages, 1, 1)).toMatchObject({ start: 1, lastUnit: 1, pinnedBefore: [] })
    expect(Units.lastUnitStart(Units.entries([sys("only")]))).toBe(1)
    expect(Units.lastUnitStart([])).toBe(0)
  })

  it("holds the previous request before the window until the cut moves again", () => {
    // 43 messages: the cut sits at 30 (start 31); the latest request u2 is kept before the window.
    const run = agentRun(20)
    expect(windowOf(run, 10, 5)).toMatchObject({ start: 31, request: 2, held: undefined })
    // A new request arrives: the cut has not moved, so u2 stays (held) and the prefix is unchanged.
    const asked = [...run, user("u43")]
    expect(windowOf(asked, 10, 5)).toMatchObject({ start: 31, request: 43, held: 2 })
    const openai = (messages: ReadonlyArray<Conversation.Message>) =>
      Pipeline.run(input(stored(messages), { format: "openai", options: Pipeline.resolveOptions({ windowMessages: 10, windowStep: 5 }) }))
    const before = openai(run).request["messages"] as Array<Json>
    const after = openai(asked)
    expect((after.request["messages"] as Array<Json>).slice(0, before.length)).toEqual(before)
    expect(after.report.messages).toMatchObject({ window: 13, sent: 2 + 13, droppedByWindow: 31 - 2, droppedByBudget: 0 })
    // The cut moves: u2 goes, u43 is in the window.
    expect(windowOf([...asked, assistant("a44")], 10, 5)).toMatchObject({ start: 35, request: 43, held: undefined })
  })
})

describe("Budget.allocate and the newest exchange", () => {
  it("protects the last group even with freshTailMessages 0, and says overBudget when it does not fit", () => {
    const messages = [user("u0"), assistant("a1"), user("u2"), calls("a", "b", "c"), results("a"), results("b"), results("c")]
    const tight = allocate(stored(messages), { total: 30, tail: 0 })
    expect(tight).toMatchObject({ tailStart: 3, overBudget: true, kept: [0, 2, 3, 4, 5, 6], droppedByBudget: 1 })
    const roomy = allocate(stored(messages), { total: 1_000, tail: 0 })
    expect(roomy).toMatchObject({ tailStart: 3, overBudget: false, cut: 0, kept: [0, 1, 2, 3, 4, 5, 6] })
  })

  it("protects the latest request inside the window, before the fresh tail", () => {
    // u0 a1 u2, then 10 exchanges (3..22); tail 2 = the last exchange; 120 tokens for history.
    const a = allocate(stored(agentRun(10)), { total: 120, tail: 2 })
    // Protected: u0, u2 and 21..22 (40); 80 more: exchanges 13..20 (four of them).
    expect(a.overBudget).toBe(false)
    expect(a.kept).toEqual([0, 2, ...Array.from({ length: 10 }, (_, i) => 13 + i)])
    expect(a.keptTokens).toBeLessThanOrEqual(120)
    expect(a.droppedByWindow + a.droppedByBudget + a.kept.length).toBe(23)
  })

  it("keeps a held request only when the budget evicts nothing and it fits", () => {
    const asked = stored([...agentRun(20), user("u43")])
    const roomy = allocate(asked, { total: 10_000, tail: 4, N: 10, step: 5 })
    expect(roomy.kept.slice(0, 2)).toEqual([0, 2])
    expect(roomy).toMatchObject({ cut: 31, droppedByWindow: 29, droppedByBudget: 0 })
    const tight = allocate(asked, { total: 140, tail: 4, N: 10, step: 5 })
    expect(tight.kept[0]).toBe(0)
    expect(tight.kept).not.toContain(2)
    expect(tight.keptTokens).toBeLessThanOrEqual(140)
    // u2 was in the window's view: the budget dropped it.
    expect(tight.droppedByWindow).toBe(31 - 1 - 1)
    expect(tight.droppedByWindow + tight.droppedByBudget + tight.kept.length).toBe(44)
  })
})

/** A marker for part `k` of history message `i`. */
const tag = (i: number, k: number): string => `⟪${i}.${k}⟫`

/** Gives every part of messages `from..` a marker that survives rendering. */
const tagged = (history: ReadonlyArray<Pipeline.StoredMessage>, from: number): Array<Pipeline.StoredMessage> =>
  history.map((row, i) =>
    i < from
      ? row
      : {
          ...row,
          message: {
            ...row.message,
            parts: row.message.parts.map((p, k): Conversation.Part => {
              switch (p.type) {
                case "text":
                  return { ...p, text: `${p.text}${tag(i, k)}` }
                case "tool_call":
                  return { ...p, input: { tag: tag(i, k) } }
                case "tool_result":
                  return { ...p, content: [...p.content, { type: "text", text: tag(i, k) }] }
                default:
                  return p
              }
            }),
          },
        },
  )

/** Start of the unit of the last non-system message (history length when there is none). */
const lastUnit = (history: ReadonlyArray<Units.Entry>): number => {
  let i = history.length - 1
  while (i >= 0 && history[i]!.message.role === "system") i--
  return i < 0 ? history.length : Units.unitStart(history, i)
}

/** The random inputs, with observation masking on half of the time. */
const withMasking = fc
  .tuple(assembleInput, fc.option(fc.record({ keep: fc.nat({ max: 5 }), batch: fc.integer({ min: 1, max: 3_000 }) }), { nil: undefined }))
  .map(([raw, mask]) =>
    mask === undefined ? raw : { ...raw, options: { ...raw.options, maskKeep: mask.keep, maskBatchTokens: mask.batch, maskMinTokens: 0 } },
  )

describe("the newest exchange is always sent (properties, both formats)", () => {
  it("sends the latest request and every part of the last unit that pairs, unmasked, or says overBudget", () => {
    fc.assert(
      fc.property(withMasking, (raw) => {
        const from = lastUnit(raw.history)
        const history = tagged(raw.history, from)
        // What survives pruning the whole history: the parts the model must see.
        const survivors = Units.prune(
          history,
          history.map((_, i) => i),
        ).messages.filter((v) => v.index >= from)
        const whole = survivors.filter((v) => v.message.role !== "system")
        const expected = whole.flatMap((v) =>
          v.message.parts.flatMap((p) => {
            const k = history[v.index]!.message.parts.indexOf(p)
            return p.type === "image" || p.type === "opaque" ? [] : [tag(v.index, k)] // opaque (reasoning) parts carry no tag: see Properties
          }),
        )
        const requests = history.flatMap((m, i) => (Window.isAnchor(m.message) ? [i] : []))
        const latest = requests.at(-1)
        for (const format of ["anthropic", "openai"] as const) {
          const { request, report } = Pipeline.run({ ...raw, history, format })
          const body = JSON.stringify(request)
          for (const t of expected) expect(body).toContain(t)
          if (latest !== undefined) expect(body).toContain(`⟨u${latest}⟩`)
          if (survivors.length > 0) expect(report.messages.lastSentSeq).toBe(history[survivors.at(-1)!.index]!.seq)
          const pairing =
            format === "anthropic" ? anthropicPairingProblems : format === "openai" ? openaiPairingProblems : responsesPairingProblems
          expect(pairing(request)).toEqual([])
          const t = report.tokens
          if (t.total > t.budget) expect(report.overBudget).toBe(true)
          const m = report.messages
          expect(m.sent + m.droppedByWindow + m.droppedByBudget).toBeLessThanOrEqual(m.stored)
          expect(m.window).toBeGreaterThanOrEqual(history.length - from)
        }
      }),
      { numRuns: 400 },
    )
  })
})
