/**
 * The `memory` turn stage through the worker's stages in-process
 * (`InProcessTurns`): what it asks the store, what the prompt carries where,
 * what the report says, and what each knob changes.
 */
import { MemoryRetrieval } from "@ctxd/context"
import type { Turn } from "@ctxd/contracts"
import { MemoryStore } from "@ctxd/db"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as InProcessTurns from "../src/InProcessTurns.ts"
import { local } from "./Helpers.ts"

const NOW = Date.parse("2026-11-26T00:00:00Z")

const memories: ReadonlyArray<MemoryRetrieval.Candidate> = [
  { id: "seat", text: "The user prefers aisle seats on long flights.", score: 0.9, updatedAt: NOW - 86_400_000 },
  { id: "seat-copy", text: "the user prefers aisle seats, on long flights", score: 0.8, updatedAt: NOW - 2 * 86_400_000 },
  { id: "gold", text: "The user is a gold member.", score: 0.5, updatedAt: NOW },
  ...Array.from({ length: 30 }, (_, i) => ({
    id: `filler-${i}`,
    text: `Unrelated note ${i}: ${"lorem ipsum ".repeat(40)}`,
    score: 0.1,
    updatedAt: NOW - i * 86_400_000,
  })),
]
const lessons: ReadonlyArray<MemoryRetrieval.Candidate> = Array.from({ length: 7 }, (_, i) => ({
  id: `lesson-${i}`,
  text: `Lesson ${i}: check the reservation id before changing seats (${i}).`,
  score: 1 - i / 10,
  updatedAt: NOW,
}))

/** What the shell asked the store to search: the scope's agent, the kind, the text and the limit. */
interface Search {
  readonly agent: string | undefined
  readonly kind: MemoryStore.Kind | undefined
  readonly text: string
  readonly limit: number | undefined
}

/** A memory store answering every search with `memories` (best first, cut to the limit) or `lessons`, by kind; records the searches. */
const store = () => {
  const searches: Array<Search> = []
  const hit = (kind: MemoryStore.Kind) => (c: MemoryRetrieval.Candidate) => ({
    id: c.id,
    text: c.text,
    kind,
    tags: [],
    score: c.score,
    updatedAt: new Date(c.updatedAt).toISOString(),
  })
  const memory = MemoryStore.makeMemory()
  const fake: MemoryStore.MemoryStoreService = {
    ...memory,
    any: () => Effect.succeed(true),
    search: (scope, text, options = {}) =>
      Effect.sync(() => {
        searches.push({ agent: scope.agent, kind: options.kind, text, limit: options.limit })
        return options.kind === "learning" ? lessons.map(hit("learning")) : memories.slice(0, options.limit).map(hit("memory"))
      }),
  }
  return { searches, memory: fake }
}

const request = (
  turnId: string,
  messages: ReadonlyArray<Record<string, unknown>>,
  options: Turn.Options = {},
  format: Turn.Format = "anthropic",
): Turn.TurnRequest =>
  ({
    turnId,
    format,
    model: { provider: format === "anthropic" ? "anthropic" : "openai", name: format === "anthropic" ? "claude-sonnet-4-5" : "gpt-4o" },
    system: "You are a travel agent.",
    options: { agent: "travel", ...options },
    messages,
  }) as unknown as Turn.TurnRequest

type Json = Record<string, unknown>
const lastUser = (body: Json): Array<Json> => (body["messages"] as Array<{ role: string; content: Array<Json> }>).at(-1)!.content

describe("memory stage", () => {
  it("retrieves for the latest user message (3× over-fetched), sends the best after the last breakpoint, and reports them", async () => {
    const s = store()
    const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local), memory: s.memory })
    const reply = await turns.turn("acme", "s1", request("t1", [{ role: "user", content: "Change my seat please" }]), undefined, NOW)
    expect(s.searches.find((q) => q.kind === "memory")).toMatchObject({ agent: "travel", text: "Change my seat please", limit: 24 })
    const memory = reply.report.memory!
    expect(memory.placement).toBe("tail")
    expect(memory.candidates).toBe(24)
    // the near-identical copy is left out; the best and the newest first
    expect(memory.injected.map((m) => m.id).slice(0, 2)).toEqual(["seat", "gold"])
    expect(memory.injected.map((m) => m.id)).not.toContain("seat-copy")
    expect(memory.injected.length).toBeLessThanOrEqual(MemoryRetrieval.defaults.count)
    expect(memory.tokens).toBeLessThanOrEqual(memory.budget)
    expect(reply.report.tokens.memory).toBe(memory.tokens)
    const blocks = lastUser(reply.request)
    const at = blocks.findIndex((b) => String(b["text"]).startsWith(MemoryRetrieval.MEMORY_HEADER))
    const mark = blocks.findLastIndex((b) => b["cache_control"] !== undefined)
    expect(mark).toBeGreaterThanOrEqual(0)
    expect(at).toBeGreaterThan(mark)
    expect(String(blocks[at]!["text"])).toContain("aisle seats")
  })

  it("learnings: at most 5 in a system section, the same bytes every turn of the session, reported", async () => {
    const s = store()
    const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local), memory: s.memory })
    const first = await turns.turn("acme", "s1", request("t1", [{ role: "user", content: "Change my seat" }]), undefined, NOW)
    const ofFirst = s.searches.splice(0)
    const second = await turns.turn(
      "acme",
      "s1",
      request("t2", [
        { role: "assistant", content: "Which flight?" },
        { role: "user", content: "The Paris one" },
      ]),
      undefined,
      NOW + 10_000,
    )
    const system = (body: Json) =>
      (body["system"] as Array<Json>).find((b) => String(b["text"]).startsWith(MemoryRetrieval.LEARNINGS_HEADER))
    expect(system(first.request)).toBeDefined()
    expect(system(second.request)).toEqual(system(first.request))
    expect(first.report.learnings!.injected).toHaveLength(5)
    expect(first.report.learnings!.tokens).toBeLessThanOrEqual(first.report.learnings!.budget)
    expect(second.report.learnings).toEqual(first.report.learnings)
    // asked once, at the session's first turn; memories every turn
    expect([ofFirst, s.searches].map((turn) => turn.filter((q) => q.kind === "learning").length)).toEqual([1, 0])
    expect(s.searches.find((q) => q.kind === "memory")!.text).toBe("The Paris one\nChange my seat")
    // the prefix is stable: the second turn reads what the first wrote
    expect(second.report.cache.reason).toBe("append")
  })

  it("an agent without memories is not searched; memory: false turns it off; memory: true searches", async () => {
    const none = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) })
    const plain = await none.turn("acme", "s1", request("t1", [{ role: "user", content: "hi" }]), undefined, NOW)
    expect(plain.report.memory).toBeUndefined()
    expect(plain.report.tokens.memory).toBe(0)
    const s = store()
    const off = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local), memory: s.memory })
    const reply = await off.turn("acme", "s1", request("t1", [{ role: "user", content: "seat" }], { memory: false }), undefined, NOW)
    expect(s.searches).toHaveLength(0)
    expect(reply.report.memory).toBeUndefined()
    expect(reply.report.learnings).toBeUndefined()
  })

  it("knobs: memoryTokens and memoryFraction bound the block, learningsFraction 0 drops learnings, memoryPlacement system moves it into the prefix", async () => {
    const run = async (options: Turn.Options, format: Turn.Format = "anthropic") => {
      const s = store()
      const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local), memory: s.memory })
      return turns.turn("acme", "s1", request("t1", [{ role: "user", content: "Change my seat" }], options, format), undefined, NOW)
    }
    const base = await run({})
    expect(base.report.memory!.budget).toBe(2_200)
    const small = await run({ memoryTokens: 40 })
    expect(small.report.memory!.budget).toBe(40)
    expect(small.report.memory!.tokens).toBeLessThanOrEqual(40)
    expect(small.report.memory!.injected.length).toBeLessThan(base.report.memory!.injected.length)
    const fraction = await run({ memoryFraction: 0.001, budgetTokens: 100_000 })
    expect(fraction.report.memory!.budget).toBe(
      Math.floor(0.001 * (100_000 - fraction.report.tokens.system - fraction.report.tokens.tools + fraction.report.learnings!.tokens)),
    )
    const noLessons = await run({ learningsFraction: 0 })
    expect(noLessons.report.learnings).toBeUndefined()
    expect(JSON.stringify(noLessons.request)).not.toContain(MemoryRetrieval.LEARNINGS_HEADER)
    const prefix = await run({ memoryPlacement: "system" })
    expect(prefix.report.memory!.placement).toBe("system")
    const sections = prefix.request["system"] as Array<Json>
    expect(String(sections.at(-1)!["text"]).startsWith(MemoryRetrieval.MEMORY_HEADER)).toBe(true)
    expect(JSON.stringify(prefix.request["messages"])).not.toContain(MemoryRetrieval.MEMORY_HEADER)
    // OpenAI: a user message after the view
    const openai = await run({}, "openai")
    const messages = openai.request["messages"] as Array<Json>
    expect(messages.at(-1)!["role"]).toBe("user")
    expect(String(messages.at(-1)!["content"]).startsWith(MemoryRetrieval.MEMORY_HEADER)).toBe(true)
  })
})
