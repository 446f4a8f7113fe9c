// ContextClient against a real worker: typed replies, generated turn ids,
// typed errors, and the local size check before anything is sent.
import { ContextClient } from "@ctxd/client"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
let client: Awaited<ReturnType<typeof ContextClient.connect>>
beforeAll(async () => {
  h = await Harness.start()
  client = await ContextClient.connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222", root: h.root, maxPayload: 32 * 1024 })
})
afterAll(async () => {
  await client?.close()
  await h?.close()
})

const base = {
  format: "openai" as const,
  model: { provider: "openai" as const, name: "gpt-4o-mini" },
}

describe("ContextClient", () => {
  it("generates a turn id and returns the typed reply", async () => {
    const reply = await client.turn("acme", "client-1", { ...base, messages: [{ role: "user", content: "hello" }] })
    expect(reply.ok).toBe(true)
    expect(reply.turnId).toMatch(/[0-9a-f-]{36}/)
    expect(reply.report.counter.encoding).toBe("o200k_base")
  })

  it("surfaces the server's error code, path and message", async () => {
    const error = await client
      .turn("acme", "client-2", { ...base, messages: [{ role: "tool", tool_call_id: "ghost", content: "x" }] })
      .catch((e: unknown) => e)
    expect(error).toMatchObject({ _tag: "ClientError", code: "BadRequest", path: "messages[0]", retryable: false })
  })

  it("refuses an oversize request before sending it, with a hint", async () => {
    const error = await client
      .turn("acme", "client-3", { ...base, messages: [{ role: "user", content: "x".repeat(40 * 1024) }] })
      .catch((e: unknown) => e)
    expect(error).toMatchObject({ _tag: "ClientError", code: "TooLarge" })
    expect((error as { hint?: string }).hint).toMatch(/max_payload/)
    const stored = await h.sql<{ n: string }>("select count(*) as n from ctxd_sessions where session = 'client-3'")
    expect(Number(stored[0]!.n)).toBe(0)
  })

  it("rejects bad tenant tokens locally", async () => {
    const error = await client.turn("bad tenant", "s", { ...base, messages: [] }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: "BadRequest" })
  })
})
