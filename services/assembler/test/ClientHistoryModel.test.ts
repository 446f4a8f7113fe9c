/**
 * Client-history turns against a model of what a client may do: extend its
 * history, edit a message, rewind, or go back to a line it left. Whatever
 * the sequence, each turn's prompt is exactly the client's history (nothing
 * of another line mixed in, nothing stored twice), and every line sent is
 * still stored at the end (its longest history, resent, matches whole and
 * appends nothing).
 */
import type { Turn } from "@ctxd/contracts"
import { LocalCounter } from "@ctxd/tokens"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as InProcessTurns from "../src/InProcessTurns.ts"

const tiktoken = LocalCounter.make({ backend: "tiktoken" })
const encoding = tiktoken.encodingFor({ provider: "openai", name: "gpt-4o" })
const local = {
  encoding,
  countText: (text: string) => tiktoken.countText(text, encoding),
  countTools: (list: Parameters<typeof tiktoken.countTools>[0]) => tiktoken.countTools(list, encoding),
  countMessage: (message: Parameters<typeof tiktoken.countMessage>[0]) => tiktoken.countMessage(message, encoding),
  countSystem: (system: Parameters<typeof tiktoken.countSystem>[0]) => tiktoken.countSystem(system, encoding),
}

/** A history as texts: even indexes are the user's, odd ones the assistant's; always ends with the user's. */
type History = ReadonlyArray<string>

type Step =
  | { readonly _tag: "extend"; readonly texts: readonly [string, string] }
  | { readonly _tag: "edit"; readonly at: number; readonly text: string }
  | { readonly _tag: "rewind"; readonly to: number }
  | { readonly _tag: "back"; readonly to: number; readonly texts: readonly [string, string] }

const word = fc.constantFrom("a", "b", "c", "list", "ok")
const arbStep: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(word, word).map((texts) => ({ _tag: "extend" as const, texts })) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("edit" as const), at: fc.nat(), text: word }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("rewind" as const), to: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("back" as const), to: fc.nat(), texts: fc.tuple(word, word) }) },
)

const apply = (current: History, sent: ReadonlyArray<History>, step: Step): History => {
  switch (step._tag) {
    case "extend":
      return [...current, ...step.texts]
    case "edit": {
      const at = step.at % current.length
      return [...current.slice(0, at), `${current[at]}!${step.text}`, ...(at % 2 === 0 ? [] : ["u"])]
    }
    case "rewind":
      return current.slice(0, 1 + 2 * (step.to % Math.ceil(current.length / 2)))
    case "back":
      return [...sent[step.to % sent.length]!, ...step.texts]
  }
}

const request = (turnId: string, history: History) =>
  ({
    turnId,
    format: "openai",
    model: { provider: "openai", name: "gpt-4o" },
    history: "client",
    messages: history.map((content, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content })),
  }) as unknown as Turn.TurnRequest

const seen = (reply: Turn.TurnReply): History =>
  (reply.request["messages"] as ReadonlyArray<{ readonly role: string; readonly content: unknown }>)
    .filter((m) => m.role !== "system")
    .map((m) => String(m.content))

describe("client history, modelled", () => {
  it("never mixes two lines and never loses one", async () => {
    await fc.assert(
      fc.asyncProperty(word, fc.array(arbStep, { minLength: 1, maxLength: 7 }), async (first, steps) => {
        const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
        try {
          const sent: Array<History> = []
          let current: History = [first]
          let n = 0
          for (const step of [undefined, ...steps]) {
            if (step !== undefined) current = apply(current, sent, step)
            const reply = await turns.turn("acme", "s", request(`t${n++}`, current))
            expect(seen(reply)).toEqual(current)
            expect(reply.report.messages.stored).toBe(current.length)
            sent.push(current)
          }
          // every line sent ends in a history no later one extends: each of those is stored whole
          const prefix = (h: History, of: History) => h.length <= of.length && h.every((t, i) => t === of[i])
          const lines = sent.filter((h, i) => !sent.some((o, j) => (o.length > h.length || j > i) && prefix(h, o)))
          for (const history of lines) {
            const again = await turns.turn("acme", "s", request(`t${n++}`, history))
            expect(again.report.history).toMatchObject({ matched: history.length, appended: 0 })
          }
        } finally {
          await turns.dispose()
        }
      }),
      { numRuns: 25 },
    )
  }, 120_000)
})
