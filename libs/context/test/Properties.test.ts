import { FakeProvider } from "@ctxd/testing"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Normalize from "../src/Normalize.ts"
import * as Pipeline from "../src/Pipeline.ts"
import * as Units from "../src/Units.ts"
import * as Window from "../src/Window.ts"
import { assembleInput, marker } from "./Generators.ts"
import {
  anthropicPairingProblems,
  anthropicShapeProblems,
  geminiPairingProblems,
  openaiPairingProblems,
  responsesPairingProblems,
} from "./Helpers.ts"

const RUNS = 400

type Json = Record<string, unknown>

/** Every format for one input. */
const both = (input: Pipeline.Input) => ({
  anthropic: Pipeline.run({ ...input, format: "anthropic" }),
  openai: Pipeline.run({ ...input, format: "openai" }),
  responses: Pipeline.run({ ...input, format: "openai-responses" }),
  gemini: Pipeline.run({ ...input, format: "gemini" }),
})

describe("assemble (properties over random histories)", () => {
  it("never leaves an orphan, in any format", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const { anthropic, openai, responses, gemini } = both(input)
        expect(anthropicPairingProblems(anthropic.request)).toEqual([])
        expect(openaiPairingProblems(openai.request)).toEqual([])
        expect(responsesPairingProblems(responses.request)).toEqual([])
        expect(geminiPairingProblems(gemini.request)).toEqual([])
      }),
      { numRuns: RUNS },
    )
  })

  it("always sends the anchor (first user message) and every pinned system message", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const anchor = input.history.findIndex((m) => m.message.role === "user")
        const pinned = input.history.filter((m) => m.message.role === "system").length
        const { anthropic, openai, responses, gemini } = both(input)
        for (const out of [anthropic, openai, responses, gemini]) {
          if (anchor === -1) {
            expect(out.report.messages.anchorSeq).toBeNull()
          } else {
            expect(out.report.messages.anchorSeq).toBe(input.history[anchor]!.seq)
            expect(JSON.stringify(out.request["messages"] ?? out.request["input"] ?? out.request["contents"])).toContain(marker(anchor))
          }
        }
        // Gemini: every pinned system message's text stays in the contents
        for (const m of input.history.filter((h) => h.message.role === "system")) {
          for (const p of m.message.parts)
            if (p.type === "text" && p.text !== "")
              expect(JSON.stringify(gemini.request["contents"])).toContain(JSON.stringify(p.text).slice(1, -1))
        }
        const pinnedItems = (responses.request["input"] as Array<Json>).filter(
          (m) => m["type"] === "message" && (m["role"] === "system" || m["role"] === "developer"),
        )
        expect(pinnedItems).toHaveLength(pinned)
        const leading = input.system.some((s) => s.text.trim() !== "") ? 1 : 0
        const systemMessages = (openai.request["messages"] as Array<Json>).filter(
          (m) => m["role"] === "system" || m["role"] === "developer",
        )
        expect(systemMessages).toHaveLength(leading + pinned)
      }),
      { numRuns: RUNS },
    )
  })

  it("respects the budget unless it reports overBudget, and adds up its token counts", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const { report } = Pipeline.run(input)
        const t = report.tokens
        expect(t.budget).toBe(input.options.budgetTokens ?? input.model.effectiveWindow)
        if (!report.overBudget) expect(t.total).toBeLessThanOrEqual(t.budget)
        expect(t.total).toBe(t.system + t.tools + t.memory + t.history)
        expect(t.history).toBeGreaterThanOrEqual(0)
        const m = report.messages
        expect(m.sent + m.droppedByWindow + m.droppedByBudget).toBeLessThanOrEqual(m.stored)
        expect(m.window).toBeLessThanOrEqual(m.stored)
        expect(m.stored).toBe(input.history.length)
      }),
      { numRuns: RUNS },
    )
  })

  it("is deterministic: the same input gives a deep-equal output, in any format", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const first = both(input)
        const again = both(structuredClone(input))
        expect(again).toEqual(first)
        expect(JSON.stringify(again.responses.request)).toBe(JSON.stringify(first.responses.request))
        expect(JSON.stringify(again.openai.request)).toBe(JSON.stringify(first.openai.request))
        expect(JSON.stringify(again.gemini.request)).toBe(JSON.stringify(first.gemini.request))
      }),
      { numRuns: RUNS },
    )
  })

  it("never renders content its provider refuses as empty, in any format", () => {
    const blank = (u: unknown) => typeof u === "string" && u.trim() === ""
    const list = (u: unknown): Array<Json> => (Array.isArray(u) ? (u as Array<Json>) : [])
    fc.assert(
      fc.property(assembleInput, (input) => {
        const { anthropic, openai, responses, gemini } = both(input)
        // Anthropic: no message without content, no blank text block (rules taken from the API's
        // error texts: "all messages must have non-empty content except for the optional final assistant
        // message", "text content blocks must be non-empty")
        for (const m of list(anthropic.request["messages"])) {
          const content = m["content"]
          if (typeof content === "string") expect(blank(content)).toBe(false)
          else {
            expect(list(content).length).toBeGreaterThan(0)
            for (const b of list(content)) if (b["type"] === "text") expect(blank(b["text"])).toBe(false)
          }
        }
        // Gemini: every content has parts (required in https://ai.google.dev/api/rest/v1beta/cachedContents),
        // no unsigned empty text (the API's error text: "it has an empty text parameter")
        for (const c of list(gemini.request["contents"])) {
          expect(list(c["parts"]).length).toBeGreaterThan(0)
          for (const p of list(c["parts"])) if (p["thoughtSignature"] === undefined) expect(p["text"]).not.toBe("")
        }
        // OpenAI Chat and Responses: an assistant message carries content or tool calls; never an empty list of messages
        for (const m of list(openai.request["messages"])) {
          if (m["role"] === "assistant") expect(m["content"] !== null || list(m["tool_calls"]).length > 0).toBe(true)
          expect(m["content"] === undefined && m["tool_calls"] === undefined).toBe(false)
        }
        for (const item of list(responses.request["input"])) if (item["type"] === "message") expect(item["content"]).toBeDefined()
        // a history with a user message of content renders some (the validate stage refuses a first turn without one)
        if (input.history.some((h) => h.message.role === "user" && Normalize.hasContent(h.message))) {
          expect(list(openai.request["messages"]).length).toBeGreaterThan(0)
          expect(list(responses.request["input"]).length).toBeGreaterThan(0)
          expect(list(gemini.request["contents"]).length).toBeGreaterThan(0)
        }
      }),
      { numRuns: RUNS },
    )
  })

  it("renders Anthropic bodies that start with user, alternate roles and keep ≤ 4 ordered breakpoints", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const { request, report } = Pipeline.run({ ...input, format: "anthropic" })
        expect(anthropicShapeProblems(request, report.cache.breakpoints)).toEqual([])
        expect(report.cache.breakpoints).toBeLessThanOrEqual(4)
      }),
      { numRuns: RUNS },
    )
  })

  it("gives the same result with cached landmarks of a prefix as with a full scan", () => {
    fc.assert(
      fc.property(assembleInput, fc.nat(), (input, at) => {
        const prefix = input.history.slice(0, input.history.length === 0 ? 0 : at % (input.history.length + 1))
        const landmarks = Window.landmarks(prefix)
        expect(Pipeline.run({ ...input, landmarks })).toEqual(Pipeline.run(input))
      }),
      { numRuns: RUNS },
    )
  })

  it("does not mutate its input", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const copy = structuredClone(input)
        both(input)
        expect(input).toEqual(copy)
      }),
      { numRuns: 100 },
    )
  })
})

describe("assemble (cuts never split a unit)", () => {
  it("removes no more orphans than the whole history has", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const inherent = Units.prune(
          input.history,
          input.history.map((_, i) => i),
        ).orphans
        const { report } = Pipeline.run(input)
        expect(report.orphans.calls).toBeLessThanOrEqual(inherent.calls)
        expect(report.orphans.results).toBeLessThanOrEqual(inherent.results)
      }),
      { numRuns: RUNS },
    )
  })
})

describe("reasoning (properties over random histories with thinking blocks and reasoning items)", () => {
  const THOUGHT = new Set(["thinking", "redacted_thinking", "reasoning"])
  const idOf = (b: Json): string => String(b["signature"] ?? b["data"] ?? b["id"])
  const formatOf = (type: string): "anthropic" | "openai-responses" => (type === "reasoning" ? "openai-responses" : "anthropic")
  const blocksOf = (m: Json): Array<Json> => (Array.isArray(m["content"]) ? (m["content"] as Array<Json>) : [])

  /** Ids of the `format` reasoning of the last `keep` thinking turns of the whole history (turns split at user messages). */
  const lastTurns = (input: Pipeline.Input, format: "anthropic" | "openai-responses"): Set<string> => {
    const turns: Array<Array<Json>> = [[]]
    for (const { message } of input.history) {
      if (message.role === "user") turns.push([])
      if (message.role !== "assistant") continue
      for (const p of message.parts) {
        if (p.type === "opaque" && THOUGHT.has(String((p.block as Json)["type"]))) turns.at(-1)!.push(p.block as Json)
      }
    }
    const thinking = turns.filter((t) => t.length > 0)
    const keep = input.options.keepThinkingTurns ?? 1
    return new Set(
      thinking
        .slice(-keep)
        .flat()
        .filter((b) => formatOf(String(b["type"])) === format)
        .map(idOf),
    )
  }

  it("sends reasoning only in assistant position, never dangling, and only from the last N thinking turns", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const { anthropic, responses } = both(input)
        const keptA = lastTurns(input, "anthropic")
        // the calls each thought led to in the history (those after its run of reasoning, up to the next)
        const ledTo = new Map<string, Array<string>>()
        for (const { message } of input.history) {
          let run: Array<string> = []
          let output = false
          for (const p of message.parts) {
            if (p.type === "opaque" && THOUGHT.has(String((p.block as Json)["type"]))) {
              if (output) run = []
              output = false
              run.push(idOf(p.block as Json))
              ledTo.set(idOf(p.block as Json), [])
            } else {
              output = true
              if (p.type === "tool_call") for (const id of run) ledTo.get(id)!.push(p.id)
            }
          }
        }
        // reused call ids are ambiguous: only calls made once are followed
        const callCount = new Map<string, number>()
        for (const { message } of input.history)
          for (const p of message.parts) if (p.type === "tool_call") callCount.set(p.id, (callCount.get(p.id) ?? 0) + 1)
        const sentCalls = (anthropic.request["messages"] as Array<Json>).flatMap((m) =>
          blocksOf(m).flatMap((x) => (x["type"] === "tool_use" ? [String(x["id"])] : [])),
        )
        for (const m of anthropic.request["messages"] as Array<Json>) {
          const bs = blocksOf(m)
          bs.forEach((b, k) => {
            if (!THOUGHT.has(String(b["type"]))) return
            expect(m["role"]).toBe("assistant")
            expect(k).toBeLessThan(bs.length - 1)
            expect(keptA.has(idOf(b))).toBe(true)
            // still before a call it led to, when one of them is sent (ids renamed `_2`, ... when reused)
            const calls = (ledTo.get(idOf(b)) ?? []).filter(
              (c) => callCount.get(c) === 1 && sentCalls.some((id) => id === c || id.startsWith(`${c}_`)),
            )
            if (calls.length === 0) return
            const later = bs
              .slice(k + 1)
              .filter((x) => x["type"] === "tool_use")
              .map((x) => String(x["id"]))
            expect(later.some((id) => calls.some((c) => id === c || id.startsWith(`${c}_`)))).toBe(true)
          })
        }
        const keptR = lastTurns(input, "openai-responses")
        const items = responses.request["input"] as Array<Json>
        items.forEach((item, i) => {
          if (item["type"] !== "reasoning") return
          let j = i + 1
          while (items[j]?.["type"] === "reasoning") j++
          const next = items[j]
          expect(
            next?.["type"] === "function_call" ||
              next?.["type"] === "custom_tool_call" ||
              (next?.["type"] === "message" && next["role"] === "assistant"),
          ).toBe(true)
          expect(keptR.has(idOf(item))).toBe(true)
        })
        expect(FakeProvider.validateRequest("openai-responses", responses.request)).toBeUndefined()
      }),
      { numRuns: RUNS },
    )
  })

  it("keeps the last thinking turn's reasoning: with thinking on, every Anthropic body passes the API's thinking rules", () => {
    fc.assert(
      fc.property(assembleInput, (input) => {
        const body = Pipeline.run({ ...input, format: "anthropic" }).request
        // the history was written with thinking on when every call of it comes after a thinking block
        const on = input.history.every(
          ({ message: m }) =>
            m.role !== "assistant" ||
            !m.parts.some((p) => p.type === "tool_call") ||
            (m.parts[0]?.type === "opaque" && m.parts[0].format === "anthropic" && THOUGHT.has(String((m.parts[0].block as Json)["type"]))),
        )
        fc.pre(on)
        const tools =
          Array.isArray(body["tools"]) && (body["tools"] as Array<unknown>).length > 0
            ? {}
            : { tools: [{ name: "t", input_schema: { type: "object" } }] }
        const problem = FakeProvider.validateRequest("anthropic", {
          ...body,
          ...tools,
          thinking: { type: "enabled", budget_tokens: 1024 },
          max_tokens: 4096,
        })
        expect(problem).toBeUndefined()
      }),
      { numRuns: RUNS },
    )
  })
})
