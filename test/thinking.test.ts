// End-to-end: Anthropic turns with extended thinking through a real worker on
// the real NATS and Postgres; the bodies it returns go to the fake provider
// with the official SDK and `thinking` enabled, which rejects a tool-use
// continuation whose final assistant message does not start with thinking.
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

const turn = (turnId: string, messages: unknown[], options: Json = {}) => ({
  turnId,
  format: "anthropic",
  model: { provider: "anthropic", name: "claude-sonnet-4-6" },
  system: "You are a helpful airline agent.",
  tools: [{ name: "get_user", description: "Get a user", input_schema: { type: "object", properties: { id: { type: "string" } } } }],
  messages,
  options,
})

const thought = (k: number) => ({
  type: "thinking",
  thinking: `Look up user u${k} before answering.`,
  signature: `EqQBCkYIBxgCKkA-sig-${k}`,
})
const use = (k: number) => ({ type: "tool_use", id: `toolu_${k}`, name: "get_user", input: { id: `u${k}` } })
const answer = (k: number) => ({
  role: "user",
  content: [{ type: "tool_result", tool_use_id: `toolu_${k}`, content: `{"name":"user ${k}"}` }],
})
const thoughtsIn = (body: Json): Array<string> =>
  (body["messages"] as Array<Json>).flatMap((m) =>
    (Array.isArray(m["content"]) ? (m["content"] as Array<Json>) : [])
      .filter((b) => b["type"] === "thinking" || b["type"] === "redacted_thinking")
      .map((b) => String(b["signature"] ?? b["data"])),
  )

const send = (body: Json) =>
  client.messages.create({
    ...(body as unknown as Anthropic.MessageCreateParamsNonStreaming),
    thinking: { type: "enabled", budget_tokens: 1024 },
  })

describe("anthropic turns with extended thinking over NATS", () => {
  it("a tool-use continuation keeps its thinking first and is accepted; older turns' thinking is left out", async () => {
    const subject = h.turnSubject("acme", "think-1")
    const first = await h.request(subject, turn("t1", [{ role: "user", content: "Who is user u1?" }]))
    expect(first.ok).toBe(true)
    await send(first.request)

    // turn 1's tool loop: the continuation's final assistant message starts with its thinking
    const loop = await h.request(subject, turn("t2", [{ role: "assistant", content: [thought(1), use(1)] }, answer(1)]))
    expect(loop.ok).toBe(true)
    const messages = loop.request.messages as Array<Json>
    expect((messages.at(-2)!["content"] as Array<Json>)[0]).toEqual(thought(1))
    expect(loop.report.reasoning).toMatchObject({ keepTurns: 1, sent: 1, dropped: 0 })
    expect((await send(loop.request)).type).toBe("message")

    // turn 1 ends; turn 2 starts a tool loop of its own: turn 1's thinking goes, turn 2's stays
    const next = await h.request(
      subject,
      turn("t3", [
        { role: "assistant", content: [thought(11), { type: "text", text: "User u1 is user 1." }] },
        { role: "user", content: "And user u2?" },
        { role: "assistant", content: [thought(2), use(2)] },
        answer(2),
      ]),
    )
    expect(next.ok).toBe(true)
    expect(thoughtsIn(next.request)).toEqual([thought(2).signature])
    // (this short prompt is below the minimum cacheable prefix: nothing cached to keep, so the drop is made at once)
    expect(next.report.reasoning).toMatchObject({ keepTurns: 1, sent: 1, dropped: 2, held: 0 })
    expect(next.report.stages.map((s: Json) => s["stage"])).toContain("thinking")
    expect((await send(next.request)).type).toBe("message")

    // keepThinkingTurns: 2 (a per-request option) sends turn 1's thinking again: the stored history is whole
    const two = await h.request(
      subject,
      turn("t4", [{ role: "assistant", content: [thought(3), use(3)] }, answer(3)], { keepThinkingTurns: 2 }),
    )
    expect(two.ok).toBe(true)
    expect(thoughtsIn(two.request)).toEqual([thought(1).signature, thought(11).signature, thought(2).signature, thought(3).signature])
    expect((await send(two.request)).type).toBe("message")

    // the body without the continuation's thinking is what the API refuses
    const stripped = {
      ...next.request,
      messages: (next.request.messages as Array<Json>).map((m) => ({
        ...m,
        content: Array.isArray(m["content"]) ? (m["content"] as Array<Json>).filter((b) => b["type"] !== "thinking") : m["content"],
      })),
    }
    await expect(send(stripped)).rejects.toThrow("a final `assistant` message must start with a thinking block")

    const bad = await h.request(subject, turn("t5", [{ role: "user", content: "hi" }], { keepThinkingTurns: 0 }))
    expect(bad).toMatchObject({ ok: false, error: { code: "BadRequest" } })
  })
})
