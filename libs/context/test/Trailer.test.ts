import { describe, expect, it } from "vitest"
import * as Pipeline from "../src/Pipeline.ts"
import { calls, input, results, stored, user } from "./Helpers.ts"

type Json = Record<string, unknown>
type Body = { messages: Array<{ role: string; content: unknown }> }

const history = () => stored([user("find flights"), calls("c1"), results("c1")])

describe("a trailer (loop nudge)", () => {
  it("Anthropic: goes after the last breakpoint, inside the last user message, counted but not stored", () => {
    const plain = Pipeline.run(input(history(), { format: "anthropic" }))
    const nudged = Pipeline.run({ ...input(history(), { format: "anthropic" }), trailer: { text: "stop repeating", tokens: 5 } })
    const body = nudged.request as unknown as Body
    const last = body.messages.at(-1)!
    expect(last.role).toBe("user")
    const blocks = last.content as Array<Json>
    expect(blocks.at(-1)).toEqual({ type: "text", text: "stop repeating" })
    // The breakpoint stays where it was without the trailer: the cached prefix is untouched.
    expect(blocks.at(-2)!["cache_control"]).toEqual({ type: "ephemeral" })
    expect(JSON.stringify(body.messages.slice(0, -1))).toBe(JSON.stringify((plain.request as unknown as Body).messages.slice(0, -1)))
    expect(nudged.report.tokens.history).toBe(plain.report.tokens.history + 5)
    expect(nudged.report.messages.stored).toBe(plain.report.messages.stored)
  })

  it("OpenAI: a user message after everything else", () => {
    const nudged = Pipeline.run({ ...input(history(), { format: "openai" }), trailer: { text: "stop repeating", tokens: 5 } })
    expect((nudged.request as unknown as Body).messages.at(-1)).toEqual({ role: "user", content: "stop repeating" })
  })
})
