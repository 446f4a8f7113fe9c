// Provider-written summaries through a real worker on the real NATS and Postgres: a long Anthropic session on a
// model with on-demand compaction (and bound thinking, so `provider` is the default backend) gets its summary from
// the API (the official SDK against the fake provider) in the background, the signed block is stored with its
// readable copy, and the later turns send the block first, verbatim, which the fake provider verifies.
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
let fake: FakeProvider.FakeProviderServer
beforeAll(async () => {
  fake = await FakeProvider.start()
  h = await Harness.start({
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: "test-key",
    CTXD_TOKEN_BACKEND: "tiktoken",
    CTXD_COMPACT_LEASE_TTL_MS: "5000",
    CTXD_COMPACT_ACK_WAIT_MS: "5000",
  })
})
afterAll(async () => {
  await h?.close()
  await fake?.close()
})

const paragraph = (turn: number, who: string): string =>
  Array.from(
    { length: 6 },
    (_, i) => `Turn ${turn}, ${who} note ${i}: the migration of the billing service keeps invoices, refunds and ledgers consistent.`,
  ).join(" ")

const send = (body: unknown) =>
  fetch(`${fake.url}/v1/messages`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-api-key": "test",
      "anthropic-version": "2023-06-01",
      "anthropic-beta": "compact-2026-09-04",
    },
    body: JSON.stringify(body),
  })

it("the API writes the summary in the background and later turns send its signed block first", async () => {
  const model = { provider: "anthropic", name: "claude-opus-5-5", contextWindow: 16_000, maxOutputTokens: 2_000 }
  let withBlock = 0
  for (let k = 0; k < 60 && withBlock < 3; k++) {
    const messages = [
      ...(k === 0 ? [] : [{ role: "assistant", content: paragraph(k - 1, "assistant") }]),
      { role: "user", content: paragraph(k, "user") },
    ]
    const reply = await h.request(h.turnSubject("acme", "provider-summary"), {
      turnId: `t${k}`,
      format: "anthropic",
      model,
      system: "You are a migration assistant.",
      messages,
    })
    expect(reply.ok, JSON.stringify(reply.error)).toBe(true)
    const first = (reply.request.messages as Array<{ role: string; content: Array<Record<string, unknown>> }>)[0]!
    if (first.content[0]?.["type"] === "compaction") {
      withBlock++
      expect(first.role).toBe("assistant")
      expect(reply.report.compaction.summary.writtenBy).toBe("provider")
      expect(String(first.content[0]["signature"])).toMatch(/^fakecmp1\./)
      // the newest exchange is always sent
      expect(JSON.stringify(reply.request)).toContain(`Turn ${k}, user note 5`)
    }
    const res = await send(reply.request)
    expect(res.status, await res.clone().text()).toBe(200)
  }
  expect(withBlock).toBeGreaterThan(0)
  const asked = fake.requests().filter((r) => JSON.stringify(r.body).includes('"summarize"'))
  expect(asked.length).toBeGreaterThan(0)
  const summaries = await h.sql<{ text: string; block: { type: string; content: string } | null }>(
    "select text, block from ctxd_summaries order by id",
  )
  expect(summaries.length).toBeGreaterThan(0)
  for (const s of summaries) {
    expect(s.block?.type).toBe("compaction")
    expect(s.block?.content).toBe(s.text)
  }
  const audit = await h.sql<{ outcome: string }>("select outcome from ctxd_compactions")
  expect(audit.some((a) => a.outcome === "ok")).toBe(true)
}, 180_000)
