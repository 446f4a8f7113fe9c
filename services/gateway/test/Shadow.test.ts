import { Metric } from "effect"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type { PromptRequest } from "../src/Port.ts"
import * as Shadow from "../src/Shadow.ts"

const SYSTEM = "You are a careful assistant who reads files and answers briefly. ".repeat(300)
const key = (tenant: string, session: string) => ({ tenant, session, from: "header", side: false }) as const

/** A growing Anthropic conversation: the client's body (no cache breakpoints) and ctxd's (a breakpoint on the system and the last message). */
const turn = (n: number) => {
  const messages = Array.from({ length: 2 * n + 1 }, (_, i) => ({
    role: i % 2 === 0 ? "user" : "assistant",
    content: `message ${i} `.repeat(40),
  }))
  const client = { model: "claude-sonnet-4-6", max_tokens: 100, system: SYSTEM, messages }
  const ctxd = {
    system: [{ type: "text", text: SYSTEM, cache_control: { type: "ephemeral" } }],
    messages: messages.map((m, i) =>
      i === messages.length - 1 ? { ...m, content: [{ type: "text", text: m.content, cache_control: { type: "ephemeral" } }] } : m,
    ),
  }
  return { client, ctxd }
}

const request = (tenant: string, session: string, body: Record<string, unknown>): PromptRequest => ({
  api: "anthropic-messages",
  body,
  key: key(tenant, session),
  model: "claude-sonnet-4-6",
  mode: "shadow",
})

describe("Shadow", () => {
  it("prices both bodies with caching: the client's, resent whole uncached, costs more from the second turn on", () => {
    let now = 0
    const records: Array<Shadow.Record> = []
    const shadow = Shadow.make({ now: () => now, sink: (r) => records.push(r) })
    for (let n = 0; n < 4; n++) {
      const { client, ctxd } = turn(n)
      shadow.prompted(request("acme", "s1", client), { body: ctxd, headers: {}, turnId: `t${n}`, report: {} as never })
      now += 10_000
    }
    expect(records.map((r) => r.turnId)).toEqual(["t0", "t1", "t2", "t3"])
    // the first turn writes the cache (a premium), later turns read it
    expect(records[0]!.ctxd.cacheWrite).toBeGreaterThan(0)
    expect(records[3]!.ctxd.cacheRead).toBeGreaterThan(0)
    expect(records[3]!.client.cacheRead).toBe(0)
    expect(records[3]!.savedUsd).toBeGreaterThan(0)
    const totals = shadow.session("acme", "s1")!
    expect(totals.requests).toBe(4)
    expect(totals.savedUsd).toBeCloseTo(
      records.reduce((s, r) => s + r.savedUsd, 0),
      12,
    )
    expect(shadow.tenant("acme")!.clientUsd).toBeCloseTo(totals.clientUsd, 12)
    // no prompt text in a record
    expect(JSON.stringify(records)).not.toContain("careful assistant")
    shadow.billed({
      key: key("acme", "s1"),
      turnId: "t3",
      api: "anthropic-messages",
      model: "m",
      usage: { input_tokens: 7, cache_read_input_tokens: 3, id: "x" },
    })
    expect(shadow.session("acme", "s1")!.billed).toEqual({ input_tokens: 7, cache_read_input_tokens: 3 })
    expect(Shadow.summarize(records).tenants.get("acme")!.requests).toBe(4)
  })

  it("bounds the tenants it names and the sessions it keeps", async () => {
    const shadow = Shadow.make({ maxTenants: 2, maxSessions: 2 })
    const { client, ctxd } = turn(0)
    for (const tenant of ["a", "b", "c", "d"])
      shadow.prompted(request(tenant, `s-${tenant}`, client), { body: ctxd, headers: {}, turnId: "t", report: {} as never })
    expect(shadow.tenant("a")).toBeDefined()
    expect(shadow.tenant("c")).toBeUndefined()
    expect(shadow.tenant(Shadow.OTHER)!.requests).toBe(2)
    expect(shadow.session("a", "s-a")).toBeUndefined()
    expect(shadow.session("d", "s-d")).toBeDefined()
    const snapshot = await Effect.runPromise(Metric.snapshot)
    const labels = snapshot
      .filter((m) => m.metricKey.name === "ctxd_gateway_shadow_requests_total")
      .flatMap((m) => m.metricKey.tags.filter((t) => t.key === "tenant").map((t) => t.value))
    expect(labels).toContain(Shadow.OTHER)
    expect(labels).not.toContain("c")
  })
})
