// Token counting through a real worker: exact Anthropic, OpenAI Responses and
// Gemini counts from each provider's own endpoint (the fake provider server,
// reached through the real SDKs), at most one count call per warm turn, local fallback with `exact: false` when the
// provider is down, and usage reports feeding drift.
import { FakeProvider, Workloads } from "@ctxd/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

/** The count deadline the worker runs with: one provider call, and a turn's wait for the exact count. */
const TOKEN_TIMEOUT_MS = 2_000

let h: Harness.Harness
let fake: FakeProvider.FakeProviderServer
beforeAll(async () => {
  fake = await FakeProvider.start()
  h = await Harness.start({
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: "test-key",
    OPENAI_BASE_URL: `${fake.url}/v1`,
    OPENAI_API_KEY: "test-key",
    GOOGLE_GEMINI_BASE_URL: fake.url,
    GEMINI_API_KEY: "test-key",
    CTXD_TOKEN_TIMEOUT_MS: String(TOKEN_TIMEOUT_MS),
  })
})
afterAll(async () => {
  await h?.close()
  await fake?.close()
})

const countCalls = () => fake.requests().filter((r) => r.endpoint === "count_tokens").length

const turnOf = Harness.tauTurns
const turn = turnOf(3)

describe("exact counting with a provider", () => {
  it("counts exactly, at most one provider call per warm turn", async () => {
    const first = await h.request(h.turnSubject("acme", "exact"), turn(0))
    expect(first.ok).toBe(true)
    expect(first.report.counter).toMatchObject({ backend: "anthropic_api", exact: true })
    const calls: number[] = []
    for (let k = 1; k < 8; k++) {
      const before = countCalls()
      const reply = await h.request(h.turnSubject("acme", "exact"), turn(k))
      expect(reply.ok).toBe(true)
      expect(reply.report.counter.backend).toBe("anthropic_api")
      calls.push(countCalls() - before)
    }
    expect(Math.max(...calls)).toBeLessThanOrEqual(1)
  })

  it("counts OpenAI Responses and Gemini turns exactly with their own endpoints", async () => {
    const source = Workloads.tauBenchSessions()[5]!
    const responses = Workloads.toResponses(source)
    const gemini = Workloads.toGemini(source)
    const cases = [
      {
        format: "openai-responses" as const,
        endpoint: "responses_input_tokens",
        backend: "openai_api",
        withoutTools: ({ tools: _tools, ...body }: Record<string, unknown>) => body,
        turn: (k: number) => ({
          turnId: `r${k}`,
          format: "openai-responses",
          model: { provider: "openai", name: "gpt-5" },
          system: responses.system,
          tools: responses.tools,
          input: responses.turns[k]!.input,
        }),
      },
      {
        format: "gemini" as const,
        endpoint: "gemini_count_tokens",
        backend: "google_api",
        withoutTools: ({ config, ...body }: Record<string, unknown>) => {
          const { tools: _tools, ...rest } = config as Record<string, unknown>
          return { ...body, config: rest }
        },
        turn: (k: number) => ({
          turnId: `g${k}`,
          format: "gemini",
          model: { provider: "google", name: "gemini-2.5-flash" },
          system: gemini.systemInstruction,
          tools: gemini.tools,
          contents: gemini.turns[k]!.contents,
        }),
      },
    ]
    for (const c of cases) {
      const calls = () => fake.requests().filter((r) => r.endpoint === c.endpoint).length
      const first = await h.request(h.turnSubject("acme", c.format), c.turn(0))
      expect(first.ok).toBe(true)
      expect(first.report.counter).toMatchObject({ backend: c.backend, exact: true, calibration: 1 })
      // system + history are the provider's count of the prompt without its tools (the tools' share in the
      // report is the pipeline's: a local count once schema compression has rewritten them)
      expect(first.report.tokens.system + first.report.tokens.history).toBe(
        FakeProvider.countRequestTokens(c.format, c.withoutTools(first.request)),
      )
      // the compressed tools are counted locally on the provider's scale (its count of the full list over
      // the local one): the whole prompt's estimate is within 1 % of what the provider counts (about 2 % unscaled)
      const whole = FakeProvider.countRequestTokens(c.format, first.request)
      expect(Math.abs(first.report.tokens.total - whole) / whole).toBeLessThan(0.01)
      const before = calls()
      const second = await h.request(h.turnSubject("acme", c.format), c.turn(1))
      expect(second.report.counter).toMatchObject({ backend: c.backend, exact: true })
      expect(calls() - before).toBeLessThanOrEqual(1)
    }
  })

  it("takes usage reports: drift for a known turn, BadRequest for unknown turns and bad numbers", async () => {
    const usage = await h.request(`${h.root}.v1.usage.acme.exact`, {
      turnId: "t3",
      usage: { input_tokens: 900, cache_read_input_tokens: 3000, cache_creation_input_tokens: 200, output_tokens: 50 },
    })
    expect(usage).toMatchObject({ ok: true, turnId: "t3", billed: 4100 })
    expect(typeof usage.drift).toBe("number")
    const unknown = await h.request(`${h.root}.v1.usage.acme.exact`, { turnId: "nope", usage: { input_tokens: 5 } })
    expect(unknown).toMatchObject({ ok: false, error: { code: "BadRequest", path: "turnId" } })
    const negative = await h.request(`${h.root}.v1.usage.acme.exact`, { turnId: "t3", usage: { input_tokens: -5 } })
    expect(negative).toMatchObject({ ok: false, error: { code: "BadRequest" } })
  })

  it("answers ctx.v1.tokens.count for a whole body", async () => {
    const reply = await h.request(`${h.root}.v1.tokens.count`, {
      model: { provider: "openai", name: "gpt-4o" },
      segments: ["hello world", "another segment"],
    })
    // OpenAI is configured: its own count (`backend` keeps the old name, `countedBy` says whose)
    expect(reply).toMatchObject({ ok: true, backend: "anthropic_api", countedBy: "openai_api", exact: true })
    expect(reply.segments).toHaveLength(2)
    const local = await h.request(`${h.root}.v1.tokens.count`, {
      model: { provider: "openai", name: "gpt-4o" },
      backend: "tiktoken",
      segments: ["hello world"],
    })
    expect(local).toMatchObject({ ok: true, backend: "tiktoken", countedBy: "tiktoken", exact: false })
  })
})

describe("provider down", () => {
  it("still answers every turn, locally with exact false, waiting for a count no longer than its deadline", async () => {
    // Content the counter has not seen (a cached count needs no provider call).
    const turn = turnOf(4)
    fake.control({ hang: true })
    const reasons: Array<string | undefined> = []
    try {
      for (let k = 0; k < 5; k++) {
        // a turn waits for the count at most TOKEN_TIMEOUT_MS; the rest is room for a loaded machine
        const reply = await h.request(h.turnSubject("acme", "down"), turn(k), TOKEN_TIMEOUT_MS + 8_000)
        expect(reply.ok).toBe(true)
        expect(reply.report.counter).toMatchObject({ backend: "tiktoken", exact: false })
        reasons.push(reply.report.counter.fallback)
      }
    } finally {
      fake.control({ hang: false })
    }
    // the first turn waited for its deadline; once the hung calls have opened the breaker, no turn waits
    expect(reasons[0]).toBe("timeout")
    const opened = reasons.indexOf("circuit_open")
    expect(opened).toBeGreaterThan(0)
    expect(reasons.slice(0, opened).every((r) => r === "timeout")).toBe(true)
    expect(reasons.slice(opened).every((r) => r === "circuit_open")).toBe(true)
    // Once the breaker has opened, no count is exact for the rest of the process.
    const after = await h.request(h.turnSubject("acme", "down"), turn(5))
    expect(after.report.counter.exact).toBe(false)
  })
})
