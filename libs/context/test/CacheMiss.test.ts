/** Cache misses explained: each cause from ctxd's own knowledge, then from the provider's billed usage and diagnostics. */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as CacheMiss from "../src/CacheMiss.ts"
import * as CacheDiagnostics from "../src/providers/CacheDiagnostics.ts"

const facts = (over: Partial<CacheMiss.TurnFacts>): CacheMiss.TurnFacts => ({
  previousTokens: 10_000,
  expectedReadTokens: 4_000,
  reason: "window",
  clientChanged: false,
  minCacheableTokens: 1_024,
  ...over,
})

describe("CacheMiss.expected (ctxd's own knowledge, at the turn)", () => {
  it("ctxd's edits with their reason", () => {
    for (const reason of ["window", "mask", "budget", "summary", "knowledge"]) {
      expect(CacheMiss.expected(facts({ reason }))).toEqual({ cause: "ctxd_edit", tokens: 6_000, reason })
    }
  })

  it("a TTL expiry: the whole previous prompt", () => {
    expect(CacheMiss.expected(facts({ reason: "ttl_expired", expectedReadTokens: 0 }))).toEqual({ cause: "ttl_expiry", tokens: 10_000 })
  })

  it("system or tools: the client's change when its own system/tools digest changed, ctxd's when not, unknown when not known", () => {
    expect(CacheMiss.expected(facts({ reason: "system", clientChanged: true }))).toMatchObject({ cause: "client_change", reason: "system" })
    expect(CacheMiss.expected(facts({ reason: "tools", clientChanged: false }))).toMatchObject({ cause: "ctxd_edit", reason: "tools" })
    expect(CacheMiss.expected(facts({ reason: "tools", clientChanged: undefined }))).toMatchObject({ cause: "unknown", reason: "tools" })
  })

  it("nothing lost: an append that reads it all, a first turn, a previous prompt too short to have been cached", () => {
    expect(CacheMiss.expected(facts({ reason: "append", expectedReadTokens: 10_000 }))).toBeUndefined()
    expect(CacheMiss.expected(facts({ previousTokens: undefined }))).toBeUndefined()
    expect(CacheMiss.expected(facts({ previousTokens: 900 }))).toBeUndefined()
  })

  it("property: one cause, and the tokens are exactly what the previous prompt had beyond the expected read", () => {
    const reasons = [
      "append",
      "window",
      "mask",
      "summary",
      "tools",
      "system",
      "knowledge",
      "budget",
      "ttl_expired",
      "first_turn",
      undefined,
    ]
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 200_000 }),
        fc.integer({ min: 0, max: 200_000 }),
        fc.constantFrom(...reasons),
        fc.constantFrom(true, false, undefined),
        (previous, read, reason, clientChanged) => {
          const miss = CacheMiss.expected(facts({ previousTokens: previous, expectedReadTokens: read, reason, clientChanged }))
          const lost = previous < 1_024 ? 0 : Math.max(0, previous - read)
          expect(miss?.tokens ?? 0).toBe(lost)
          if (miss !== undefined) expect(["ctxd_edit", "ttl_expiry", "client_change", "unknown"]).toContain(miss.cause)
        },
      ),
    )
  })
})

describe("CacheMiss.billed (the provider's usage and diagnostics)", () => {
  const base: CacheMiss.BilledFacts = {
    expected: { cause: "ctxd_edit", tokens: 1_000, reason: "mask" },
    scale: 1.1,
    expectedReadTokens: 5_000,
    billedReadTokens: 5_000,
    unexpected: false,
  }

  it("the turn's own miss in the provider's tokens; nothing more when the read was as expected", () => {
    expect(CacheMiss.billed(base)).toEqual([{ cause: "ctxd_edit", tokens: 1_100, reason: "mask" }])
  })

  it("an unexpected shortfall: the client's change where the provider saw a divergence ctxd did not make", () => {
    const diagnosis = CacheDiagnostics.read({ cache_miss_reason: { type: "system_changed", cache_missed_input_tokens: 4_000 } })
    expect(CacheMiss.billed({ ...base, billedReadTokens: 0, unexpected: true, diagnosis })).toEqual([
      { cause: "ctxd_edit", tokens: 1_100, reason: "mask" },
      { cause: "client_change", tokens: 5_000, reason: "system" },
    ])
    const responses = CacheDiagnostics.read({ type: "cache_miss", reason: "tools_changed", cache_missed_tokens: 10 })
    expect(CacheMiss.billed({ ...base, expected: undefined, billedReadTokens: 1_000, unexpected: true, diagnosis: responses })).toEqual([
      { cause: "client_change", tokens: 4_000, reason: "tools" },
    ])
  })

  it("unknown without diagnostics, or when they show no divergence or cannot tell", () => {
    expect(CacheMiss.billed({ ...base, expected: undefined, billedReadTokens: 0, unexpected: true })).toEqual([
      { cause: "unknown", tokens: 5_000 },
    ])
    for (const [value, reason] of [
      [{ type: "cache_hit" }, "unchanged"],
      [{ type: "comparison_response_not_found" }, "not_found"],
      [{ cache_miss_reason: { type: "previous_message_not_found" } }, "not_found"],
      [{ cache_miss_reason: { type: "unavailable" } }, "unavailable"],
      [{ cache_miss_reason: null }, "pending"],
    ] as const) {
      const diagnosis = CacheDiagnostics.read(value)
      expect(CacheMiss.billed({ ...base, expected: undefined, billedReadTokens: 0, unexpected: true, diagnosis })).toEqual([
        { cause: "unknown", tokens: 5_000, reason },
      ])
    }
  })

  it("a shortfall within the tolerance is no miss", () => {
    expect(CacheMiss.billed({ ...base, expected: undefined, billedReadTokens: 4_900, unexpected: false })).toEqual([])
  })
})

describe("CacheMiss.clientKey", () => {
  it("changes with the client's system text or a tool's schema, not with the array's identity", () => {
    const system = [{ id: "s", text: "Be brief.", cache: "5m" as const }]
    const tools = [{ name: "f", description: "d", inputSchema: { type: "object" } }]
    const key = CacheMiss.clientKey(system, tools)
    expect(CacheMiss.clientKey([{ ...system[0]! }], [{ ...tools[0]! }])).toBe(key)
    expect(CacheMiss.clientKey([{ ...system[0]!, text: "Be long." }], tools)).not.toBe(key)
    expect(CacheMiss.clientKey(system, [{ ...tools[0]!, inputSchema: { type: "object", properties: {} } }])).not.toBe(key)
  })
})
