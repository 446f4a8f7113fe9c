/** The fake provider's Anthropic cache diagnostics through the official SDK, as the API answers them. */
import Anthropic from "@anthropic-ai/sdk"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as FakeProvider from "../src/FakeProvider.ts"

let server: FakeProvider.FakeProviderServer
let client: Anthropic

beforeAll(async () => {
  server = await FakeProvider.start()
  client = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
})
afterAll(() => server.close())

const system = [{ type: "text" as const, text: "You are a support agent. ".repeat(200) }]
const user = (text: string) => ({ role: "user" as const, content: text })

describe("Anthropic diagnostics.previous_message_id", () => {
  it("null after an append, the first divergence named, an unknown id not found, nothing without the field", async () => {
    const model = "claude-sonnet-4-5"
    const first = await client.messages.create({
      model,
      max_tokens: 64,
      system,
      messages: [user("hi")],
      diagnostics: { previous_message_id: null },
    })
    expect(first.diagnostics).toBeNull()
    const messages = [
      user("hi"),
      {
        role: "assistant" as const,
        content: first.content.map((b) =>
          b.type === "text" ? { type: "text" as const, text: b.text } : { type: "text" as const, text: "" },
        ),
      },
      user("and then?"),
    ]
    const appended = await client.messages.create({
      model,
      max_tokens: 64,
      system,
      messages,
      diagnostics: { previous_message_id: first.id },
    })
    expect(appended.diagnostics).toBeNull()
    const changed = await client.messages.create({
      model,
      max_tokens: 64,
      system: [{ type: "text", text: "Another prompt." }],
      messages,
      diagnostics: { previous_message_id: appended.id },
    })
    expect(changed.diagnostics?.cache_miss_reason).toMatchObject({ type: "system_changed" })
    const edited = await client.messages.create({
      model,
      max_tokens: 64,
      system: [{ type: "text", text: "Another prompt." }],
      messages: [user("hello"), ...messages.slice(1)],
      diagnostics: { previous_message_id: changed.id },
    })
    const reason = edited.diagnostics?.cache_miss_reason
    expect(reason).toMatchObject({ type: "messages_changed" })
    expect(
      reason !== null && reason !== undefined && "cache_missed_input_tokens" in reason && reason.cache_missed_input_tokens,
    ).toBeGreaterThan(0)
    const unknown = await client.messages.create({
      model,
      max_tokens: 64,
      system,
      messages,
      diagnostics: { previous_message_id: "msg_unknown" },
    })
    expect(unknown.diagnostics?.cache_miss_reason).toEqual({ type: "previous_message_not_found" })
    const plain = await client.messages.create({ model, max_tokens: 64, system, messages })
    expect(plain.diagnostics).toBeNull()
  })
})
