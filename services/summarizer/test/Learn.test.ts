/**
 * Learnings (issue 15, item 3): the summarizer folds a finished session into
 * at most N short lessons, through the real SDKs against the fake provider.
 */
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Prompts } from "../src/index.ts"
import * as Fixture from "./Fixture.ts"

let server: FakeProvider.FakeProviderServer
beforeAll(async () => {
  server = await FakeProvider.start()
})
afterAll(() => server.close())
beforeEach(() => server.reset())

const calls = () => server.requests().filter((r) => r.endpoint === "messages" || r.endpoint === "chat_completions")

describe("Summarizer.learn", () => {
  it.live("asks for at most N lessons over the session's transcript and keeps at most N one-line lessons", () =>
    Effect.gen(function* () {
      const summarizer = yield* Fixture.make(server)
      const answer = [
        "Here are the lessons:",
        "- Look up the reservation before changing a seat.",
        "- Basic economy fares cannot be modified; offer a cancellation instead.",
        "- Confirm the total with the user before booking.",
        "- Ask for the user id first.",
      ].join("\n")
      server.control({ replies: [{ text: answer }] })
      const result = yield* summarizer.learn({ items: Fixture.tauItems(20), sessionModel: Fixture.CLAUDE, max: 3 })
      expect(result.lessons).toEqual([
        "Look up the reservation before changing a seat.",
        "Basic economy fares cannot be modified; offer a cancellation instead.",
        "Confirm the total with the user before booking.",
      ])
      expect(result).toMatchObject({ model: "claude-sonnet-4-6", provider: "anthropic", calls: 1 })
      const prompt = Fixture.promptOf(calls()[0]!.body)
      expect(prompt.system).toContain("at most 3 lessons")
      expect(prompt.user).toContain('<conversation messages="1–20">')
    }),
  )

  it.live("NONE is no lesson, not a failure", () =>
    Effect.gen(function* () {
      const summarizer = yield* Fixture.make(server)
      server.control({ replies: [{ text: "NONE" }] })
      const result = yield* summarizer.learn({ items: Fixture.tauItems(4), sessionModel: Fixture.GPT, max: 5 })
      expect(result.lessons).toEqual([])
    }),
  )

  it.live("a session larger than the summarizer's window: parts summarized first, every request fitting, lessons from the last call", () =>
    Effect.gen(function* () {
      server.control({ contextWindow: 4_096 })
      const summarizer = yield* Fixture.make(server, { contextWindow: 4_096, maxOutputTokens: 512 })
      const result = yield* summarizer.learn({ items: Fixture.tauItems(120), sessionModel: Fixture.CLAUDE, max: 5 })
      const sent = calls()
      expect(sent.length).toBeGreaterThan(2)
      expect(sent.every((r) => r.status === 200)).toBe(true)
      expect(Fixture.promptOf(sent.at(-1)!.body).system).toContain("at most 5 lessons")
      expect(Fixture.promptOf(sent[0]!.body).system).not.toContain("lessons")
      expect(result.lessons.length).toBeLessThanOrEqual(5)
    }),
  )
})

describe("Prompts.lessons", () => {
  it("bounds, trims, cuts and drops NONE", () => {
    expect(Prompts.lessons("- a\n- b\n- c", 2)).toEqual(["a", "b"])
    expect(Prompts.lessons("none.", 5)).toEqual([])
    expect(Prompts.lessons(`- ${"x".repeat(400)}`, 5)[0]).toHaveLength(300)
    expect(Prompts.lessons("one lesson without a bullet", 5)).toEqual(["one lesson without a bullet"])
  })
})
