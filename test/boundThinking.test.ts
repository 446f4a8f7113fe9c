// End-to-end: a multi-turn tool-use loop with thinking on a model that binds
// reasoning to its prefix (Claude Sonnet 5.5), through a real worker on the
// real NATS and Postgres, while ctxd edits (masking, the window); every body
// goes to the fake provider through the official SDK, which signs its
// thinking with the prefix and checks it on replay as the API does: no 400.
import Anthropic from "@anthropic-ai/sdk"
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
let provider: FakeProvider.FakeProviderServer
let client: Anthropic
beforeAll(async () => {
  h = await Harness.start()
  provider = await FakeProvider.start()
  client = new Anthropic({ baseURL: provider.url, apiKey: "test", maxRetries: 0 })
})
afterAll(async () => {
  await h?.close()
  await provider?.close()
})

type Json = Record<string, unknown>
const tools = [
  { name: "search", description: "Searches the docs", input_schema: { type: "object", properties: { q: { type: "string" } } } },
]
const turn = (turnId: string, messages: unknown[]) => ({
  turnId,
  format: "anthropic",
  model: { provider: "anthropic", name: "claude-sonnet-5-5" },
  system: "You are a research agent.",
  tools,
  messages,
  options: { maskKeep: 1, windowMessages: 12, windowStep: 4, budgetTokens: 6_000 },
})

/** Sends a ctxd body as a runtime does: thinking on (keeping ctxd's block_binding), the beta header when the report names one. */
const send = (reply: { request: Json; report: { reasoning?: { blockBinding?: { betaHeader: string } } } }) => {
  const control = (reply.request["thinking"] ?? {}) as Json
  const beta = reply.report.reasoning?.blockBinding?.betaHeader
  const body: Json = {
    ...reply.request,
    max_tokens: 4096,
    thinking: { ...control, type: "enabled", budget_tokens: 1024 },
    ...(beta === undefined ? {} : { betas: [beta] }),
  }
  return client.beta.messages.create(body as unknown as Anthropic.Beta.MessageCreateParamsNonStreaming)
}

describe("bound thinking through a real worker", () => {
  it("a tool-use loop over two user turns with masking and a moving window: every body accepted, the edits made", async () => {
    const subject = h.turnSubject("acme", "bound-1")
    let pending: Array<unknown> = [{ role: "user", content: "Find what the docs say about caching." }]
    let masked = 0
    let windowed = 0
    let kept = 0
    let requests = 0
    for (let k = 0; k < 14; k++) {
      if (k === 9) pending.push({ role: "user", content: "Now summarize what you found." })
      const reply = await h.request(subject, turn(`t${k}`, pending))
      expect(reply.ok, JSON.stringify(reply.error)).toBe(true)
      masked = Math.max(masked, reply.report.masking?.masked ?? 0)
      windowed = Math.max(windowed, reply.report.messages.droppedByWindow)
      provider.control({ replies: [{ toolCalls: [{ id: `toolu_${k}`, name: "search", input: { q: `caching ${k}` } }] }] })
      const response = await send(reply) // a 400 would throw here
      requests++
      const content = response.content as unknown as Array<Json>
      expect(content[0]!["type"]).toBe("thinking")
      if (JSON.stringify(reply.request["messages"]).includes("ctxdfake-bound")) kept++
      pending = [
        { role: "assistant", content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: `toolu_${k}`, content: `result ${k}: ${"cache ".repeat(600)}` }] },
      ]
    }
    expect(requests).toBe(14)
    // ctxd edited the prefix (masks, the window) and still sent bound thinking
    expect({ masked, windowed }).toEqual({ masked: expect.any(Number), windowed: expect.any(Number) })
    expect(masked).toBeGreaterThan(0)
    expect(windowed).toBeGreaterThan(0)
    expect(kept).toBeGreaterThan(7)
  })
})
