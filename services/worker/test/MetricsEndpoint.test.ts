// The NATS metrics reply stays under its bound however many labelled series there are.
import { describe, expect, it } from "@effect/vitest"
import * as MetricsEndpoint from "../src/MetricsEndpoint.ts"

const series = (n: number, key: string) =>
  Array.from({ length: n }, (_, i) => ({
    name: "llm_cache_read_tokens_total",
    tags: { [key]: `${key}-${i}-${"x".repeat(100)}` },
    type: "counter",
    value: i,
  }))

describe("MetricsEndpoint.bound", () => {
  it("keeps a reply that fits as it is", () => {
    const reply = { ok: true, metrics: series(3, "tenant"), tokens: { drift: {} } }
    expect(MetricsEndpoint.bound(reply)).toBe(reply)
  })

  it("drops the drift sections first, then the tenant- and model-labelled series", () => {
    const drift = Object.fromEntries(Array.from({ length: 6_000 }, (_, i) => [`m${i}`, { count: i, mean: 0.01, p50: 0.01, p99: 0.02 }]))
    const onlyDrift = MetricsEndpoint.bound({ ok: true, metrics: series(3, "tenant"), tokens: { drift, calls: 1 } })
    expect(onlyDrift).toMatchObject({ truncated: true, tokens: { calls: 1 } })
    expect(onlyDrift.metrics).toHaveLength(3)

    const plain = { name: "ctxd_turns_total", tags: { outcome: "ok" }, type: "counter", value: 1 }
    const big = MetricsEndpoint.bound({
      ok: true,
      metrics: [plain, ...series(2_000, "tenant"), ...series(2_000, "model")],
      tokens: { drift },
    })
    expect(big).toMatchObject({ truncated: true })
    expect(big.metrics).toEqual([plain])
    expect(Buffer.byteLength(JSON.stringify(big))).toBeLessThanOrEqual(MetricsEndpoint.MAX_REPLY)
  })
})
