/** The pure parts: transcript rendering and truncation, bullets, JSON extraction, chunking on unit boundaries. */
import { LocalCounter } from "@ctxd/tokens"
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { Prompts, Snapshot, Summarizer, Transcript } from "../src/index.ts"
import * as Fixture from "./Fixture.ts"

const counter = LocalCounter.make({ backend: "tiktoken" })
const count = (text: string) => counter.countText(text, "cl100k_base")

describe("Transcript", () => {
  it("truncates in the middle: the head and the end stay, and it fits", () => {
    const text = Array.from({ length: 2_000 }, (_, i) => `row ${i}`).join("\n")
    const cut = Transcript.truncateMiddle(text, 300, count)
    expect(cut.cut).toBe(true)
    expect(count(cut.text)).toBeLessThanOrEqual(300)
    expect(cut.text.startsWith("row 0\nrow 1")).toBe(true)
    expect(cut.text.endsWith("row 1999")).toBe(true)
    expect(Transcript.truncateMiddle("short", 300, count)).toEqual({ text: "short", cut: false })
  })

  it("labels messages, names results after their calls and counts truncated results", () => {
    const blocks = Transcript.render(
      [
        {
          seq: 7,
          message: {
            role: "assistant",
            parts: [
              { type: "text", text: "Let me check." },
              { type: "tool_call", id: "a", name: "get_user", input: { id: 1 } },
            ],
          },
        },
        {
          seq: 8,
          message: {
            role: "tool",
            parts: [{ type: "tool_result", callId: "a", content: [{ type: "text", text: "x".repeat(20_000) }], isError: true }],
          },
        },
      ],
      { toolResult: 100, text: 1_000 },
      count,
    )
    expect(blocks[0]!.text).toBe('[7] ASSISTANT:\nLet me check.\n→ call get_user({"id":1})')
    expect(blocks[1]!.text).toMatch(/^\[8\] TOOL:\n← result of get_user \(error\):\nx+\n… \[\d+ of \d+ tokens cut\]/)
    expect(blocks.map((b) => b.truncated)).toEqual([0, 1])
  })

  it("a provider compaction: an Anthropic one by its readable summary, an encrypted one as a note", () => {
    const blocks = Transcript.render(
      [
        {
          seq: 3,
          message: {
            role: "assistant",
            parts: [{ type: "opaque", format: "anthropic", block: { type: "compaction", content: "Parser refactored." } }],
          },
        },
        {
          seq: 4,
          message: {
            role: "assistant",
            parts: [{ type: "opaque", format: "openai-responses", block: { type: "compaction", encrypted_content: "gAAA" } }],
          },
        },
      ],
      { toolResult: 100, text: 1_000 },
      count,
    )
    expect(blocks.map((b) => b.text)).toEqual(["[3] ASSISTANT:\n(earlier summary) Parser refactored.", "[4] ASSISTANT:\n[compaction]"])
  })
})

describe("Summarizer.chunk", () => {
  it("cuts only on unit boundaries when units fit", () => {
    const items = Fixture.tauItems(120)
    const blocks = Transcript.render(items, { toolResult: 10_000, text: 10_000 }, count)
    const chunks = Summarizer.chunk(items, blocks, 1_500)
    expect(chunks.flat().map((b) => b.seq)).toEqual(items.map((i) => i.seq))
    for (const c of chunks) {
      const first = items.findIndex((i) => i.seq === c[0]!.seq)
      expect(items[first]!.message.role).not.toBe("tool")
      expect(c.reduce((n, b) => n + b.tokens, 0)).toBeLessThanOrEqual(1_500)
    }
  })
})

describe("Prompts.boundBullets", () => {
  it("keeps at most N bullets, joins continuation lines, bullets plain lines", () => {
    expect(Prompts.boundBullets("Intro\n- a\n  more of a\n* b\n1. c\n- d", 3)).toBe("- a more of a\n- b\n- c")
    expect(Prompts.boundBullets("first line\n\nsecond line", 5)).toBe("- first line\n- second line")
  })
})

describe("Snapshot", () => {
  it("extracts JSON from fences or surrounding prose, and validates it", () => {
    expect(Snapshot.extractJson('Sure:\n```json\n{"a": 1}\n```\nDone')).toBe('{"a": 1}')
    expect(Snapshot.extractJson('The answer is {"a": {"b": 2}} ok')).toBe('{"a": {"b": 2}}')
    expect(Either.isLeft(Snapshot.parse('{"currentTask": {"description": 1}}'))).toBe(true)
    expect(Either.isLeft(Snapshot.parse("nope"))).toBe(true)
    const ok = Snapshot.parse('{"currentTask": {"description": "d", "state": "s"}, "keyFindings": ["a", "b", "c"]}')
    expect(Either.isRight(ok) && Snapshot.bound(ok.right, 2).keyFindings).toEqual(["a", "b"])
  })
})
