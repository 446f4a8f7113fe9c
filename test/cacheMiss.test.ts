// Cache misses explained, through a real worker and the fake provider (the official Anthropic SDK):
// the turn's previousResponseId becomes diagnostics.previous_message_id in the body; a runtime that
// changes the system prompt on its way to the provider gets a miss the diagnostics lay on the client
// (`client_change` in the usage reply's cache.misses and in ctxd_cache_miss_tokens_total); a wrong id
// is a BadRequest naming the field, and nothing is stored.
import Anthropic from "@anthropic-ai/sdk"
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
let fake: FakeProvider.FakeProviderServer
let client: Anthropic
beforeAll(async () => {
  h = await Harness.start()
  fake = await FakeProvider.start()
  client = new Anthropic({ baseURL: fake.url, apiKey: "test", maxRetries: 0 })
})
afterAll(async () => {
  await h?.close()
  await fake?.close()
})

const turnOf = Harness.tauTurns(5)

/** `ctxd_cache_miss_tokens_total{tenant, cause}` of the worker (0 before the first count). */
const missTokens = async (cause: string): Promise<number> => {
  const reply = await h.request(`${h.root}.v1.metrics`, {}, 5_000)
  const metric = (reply.metrics as ReadonlyArray<{ name: string; tags: Record<string, string>; value?: number }>).find(
    (m) => m.name === "ctxd_cache_miss_tokens_total" && m.tags.tenant === "acme" && m.tags.cause === cause,
  )
  return metric?.value ?? 0
}

type Body = Anthropic.Messages.MessageCreateParamsNonStreaming

describe("cache misses through a real worker", () => {
  it("diagnostics asked for in the body, read from the usage report, the client's change named; a wrong id stores nothing", async () => {
    const first = await h.request(h.turnSubject("acme", "miss"), { ...turnOf(0), previousResponseId: null })
    expect(first.ok).toBe(true)
    expect(first.request.diagnostics).toEqual({ previous_message_id: null })
    const m0 = await client.messages.create(first.request as Body)

    const second = await h.request(h.turnSubject("acme", "miss"), { ...turnOf(1), previousResponseId: m0.id })
    expect(second.ok).toBe(true)
    expect(second.request.diagnostics).toEqual({ previous_message_id: m0.id })
    // the runtime stamps the time into the system prompt on its way to the provider: ctxd's prefix no longer holds
    const body = second.request as Body
    const system = body.system as Array<Anthropic.Messages.TextBlockParam>
    const stamped = { ...body, system: [{ ...system[0]!, text: `Now: 12:00. ${system[0]!.text}` }, ...system.slice(1)] }
    const m1 = await client.messages.create(stamped)
    expect(m1.diagnostics?.cache_miss_reason).toMatchObject({ type: "system_changed" })

    const before = await missTokens("client_change")
    const usage = await h.request(`${h.root}.v1.usage.acme.miss`, { turnId: "t1", usage: m1.usage, diagnostics: m1.diagnostics })
    expect(usage).toMatchObject({ ok: true, counted: true, cache: { break: "unexpected" } })
    const misses = usage.cache.misses as Array<{ cause: string; tokens: number; reason?: string }>
    expect(misses).toContainEqual(expect.objectContaining({ cause: "client_change", reason: "system" }))
    const blamed = misses.find((m) => m.cause === "client_change")!.tokens
    expect(blamed).toBeGreaterThan(0)
    expect(await missTokens("client_change")).toBe(before + blamed)

    // a Responses id on an Anthropic turn: refused by name, and the session has still two turns
    const wrong = await h.request(h.turnSubject("acme", "miss"), { ...turnOf(2), previousResponseId: "resp_123" })
    expect(wrong).toMatchObject({ ok: false, error: { code: "BadRequest", path: "previousResponseId" } })
    const rows = await h.sql<{ n: string }>(
      "SELECT count(*) AS n FROM ctxd_turns t JOIN ctxd_sessions s ON s.id = t.session_id WHERE s.tenant = $1 AND s.session = $2",
      ["acme", "miss"],
    )
    expect(Number(rows[0]!.n)).toBe(2)
  })
})
