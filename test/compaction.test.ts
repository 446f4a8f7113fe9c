// Compaction through a real worker: a long session (real tau-bench sessions
// back to back) on a small window stays inside it on every turn, summaries
// are made in the background by the summarizer (the real SDK against the fake
// provider), audited, and every prompt is one the provider accepts.
import { FakeProvider, Workloads } from "@ctxd/testing"
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

let h: Harness.Harness
let fake: FakeProvider.FakeProviderServer
beforeAll(async () => {
  fake = await FakeProvider.start()
  h = await Harness.start({
    OPENAI_BASE_URL: `${fake.url}/v1`,
    OPENAI_API_KEY: "test-key",
    CTXD_COMPACT_LEASE_TTL_MS: "5000",
    CTXD_COMPACT_ACK_WAIT_MS: "5000",
  })
})
afterAll(async () => {
  await h?.close()
  await fake?.close()
})

it("keeps a long session inside a small window with background summaries, every prompt accepted", async () => {
  const sessions = Workloads.tauBenchSessions().slice(0, 8)
  const model = { provider: "openai", name: "gpt-4o", contextWindow: 16_000, maxOutputTokens: 2_000 }
  let k = 0
  let summarized = 0
  let maxUtilization = 0
  for (const [n, session] of sessions.entries()) {
    for (const turn of session.turns) {
      // Call ids are made unique per replayed session (they repeat across sessions).
      const messages = JSON.parse(JSON.stringify(turn.messages).replaceAll('"call_', `"s${n}_call_`))
      const reply = await h.request(h.turnSubject("acme", "long"), {
        turnId: `t${k++}`,
        format: "openai",
        model,
        system: sessions[0]!.system,
        tools: sessions[0]!.tools,
        messages,
      })
      expect(reply.ok, JSON.stringify(reply.error)).toBe(true)
      const r = reply.report
      expect(r.tokens.total <= r.tokens.budget || r.overBudget).toBe(true)
      maxUtilization = Math.max(maxUtilization, r.utilization)
      if (r.compaction.summary !== null) summarized++
      // The provider (its wire rules: tool pairing, roles) accepts what ctxd built.
      const res = await fetch(`${fake.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer test" },
        body: JSON.stringify(reply.request),
      })
      expect(res.status, await res.clone().text()).toBe(200)
    }
  }
  expect(maxUtilization).toBeLessThanOrEqual(1)
  expect(summarized).toBeGreaterThan(0)
  const audit = await h.sql<{ outcome: string; n: string }>("select outcome, count(*) as n from ctxd_compactions group by outcome")
  expect(audit.find((a) => a.outcome === "ok")).toBeDefined()
  // The full history stays in Postgres.
  const stored = await h.sql<{ n: string }>("select count(*) as n from ctxd_messages")
  expect(Number(stored[0]!.n)).toBeGreaterThan(150)
}, 180_000)
