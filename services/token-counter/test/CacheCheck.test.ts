/** Billed cache reads against the turn's expectation: the rule, and the usage endpoint's `cache` field and metric. */
import { Tokens } from "@ctxd/contracts"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Either, Metric, Option, Schema } from "effect"
import { CacheCheck, Calibration, TokenCounter, UsageEndpoint } from "../src/index.ts"

const parse = (usage: unknown): Calibration.Usage => Either.getOrThrow(Calibration.parseUsage(usage))

const anthropic = (read: number, write: number, input = 100) =>
  parse({ input_tokens: input, cache_read_input_tokens: read, cache_creation_input_tokens: write, output_tokens: 10 })
const openai = (prompt: number, cached: number) =>
  parse({ prompt_tokens: prompt, prompt_tokens_details: { cached_tokens: cached }, completion_tokens: 10 })

describe("CacheCheck.compare", () => {
  const expectation = { expectedReadTokens: 10_000, expectedWriteTokens: 500, reason: "append" }

  it("reads Anthropic cache_read_input_tokens / cache_creation_input_tokens", () => {
    // estimate = billed prompt, so no scaling: min read = 0.9 × 10,000 − 64 = 8,936
    const matching = CacheCheck.compare(expectation, anthropic(10_000, 500), 10_600)
    expect(matching).toEqual({
      expectedReadTokens: 10_000,
      expectedWriteTokens: 500,
      billedReadTokens: 10_000,
      billedWriteTokens: 500,
      minReadTokens: 8_936,
      break: "none",
      reason: "append",
    })
    // the provider read nothing: the runtime changed something ahead of ctxd's prefix, or the cache was evicted
    const cold = CacheCheck.compare(expectation, anthropic(0, 10_500), 10_600)
    expect(cold).toMatchObject({ billedReadTokens: 0, billedWriteTokens: 10_500, break: "unexpected", reason: "append" })
    // the boundary: 8,936 is no break, 8,935 is
    expect(CacheCheck.compare(expectation, anthropic(8_936, 1_564), 10_600).break).toBe("none")
    expect(CacheCheck.compare(expectation, anthropic(8_935, 1_565), 10_600).break).toBe("unexpected")
  })

  it("reads OpenAI prompt_tokens_details.cached_tokens; writes are the uncached prompt tokens", () => {
    // OpenAI caches in steps of 128 tokens: 9,984 of 10,000 expected is a hit
    const rounded = CacheCheck.compare({ expectedReadTokens: 10_000 }, openai(10_600, 9_984), 10_600)
    expect(rounded).toEqual({
      expectedReadTokens: 10_000,
      billedReadTokens: 9_984,
      billedWriteTokens: 616,
      minReadTokens: 8_936,
      break: "none",
    })
    expect(CacheCheck.compare({ expectedReadTokens: 10_000 }, openai(10_600, 1_024), 10_600).break).toBe("unexpected")
    // no prompt_tokens_details at all: nothing was read
    expect(CacheCheck.compare({ expectedReadTokens: 10_000 }, parse({ prompt_tokens: 10_600 }), 10_600)).toMatchObject({
      billedReadTokens: 0,
      billedWriteTokens: 10_600,
      break: "unexpected",
    })
  })

  it("never flags a turn that expected no read, or a read above the expectation", () => {
    for (const reason of ["first_turn", "ttl_expired", "window"]) {
      const verdict = CacheCheck.compare({ expectedReadTokens: 0, reason }, anthropic(0, 5_000), 5_100)
      expect(verdict).toMatchObject({ minReadTokens: 0, break: "none", reason })
    }
    // small expectations fall inside the slack
    expect(CacheCheck.compare({ expectedReadTokens: 60 }, anthropic(0, 60), 160).break).toBe("none")
    expect(CacheCheck.compare({ expectedReadTokens: 2_000 }, anthropic(9_000, 0), 9_100).break).toBe("none")
  })

  it("puts the expectation in the provider's tokens first (billed / estimate, within [0.5, 2])", () => {
    // ctxd over-counts by 25 %: 10,000 estimated = 8,000 billed; reading all of it is no break
    const over = CacheCheck.compare({ expectedReadTokens: 10_000 }, anthropic(8_000, 400, 80), 10_600)
    expect(over.minReadTokens).toBe(Math.ceil(0.9 * 10_000 * (8_480 / 10_600) - 64))
    expect(over.break).toBe("none")
    // ctxd under-counts by 20 %: the same 8,000 is now well short
    expect(CacheCheck.compare({ expectedReadTokens: 10_000 }, anthropic(8_000, 4_600, 120), 10_600).break).toBe("unexpected")
    expect(CacheCheck.scaleOf(1_000, 10_000)).toBe(2)
    expect(CacheCheck.scaleOf(10_000, 1_000)).toBe(0.5)
    expect(CacheCheck.scaleOf(0, 1_000)).toBe(1)
  })

  it("labels a turn by ctxd's own reason (not append) and by unexpected", () => {
    const verdict = (reason: string | undefined, read: number) =>
      CacheCheck.compare({ expectedReadTokens: 4_000, ...(reason === undefined ? {} : { reason }) }, anthropic(read, 100), 4_200)
    expect(CacheCheck.labelsOf(verdict("append", 4_000))).toEqual([])
    expect(CacheCheck.labelsOf(verdict(undefined, 4_000))).toEqual([])
    expect(CacheCheck.labelsOf(verdict("window", 4_000))).toEqual(["window"])
    expect(CacheCheck.labelsOf(verdict("append", 0))).toEqual(["unexpected"])
    expect(CacheCheck.labelsOf(verdict("mask", 0))).toEqual(["mask", "unexpected"])
  })
})

const MODEL = { provider: "anthropic", name: "claude-sonnet-4-5" } as const
const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value))

/** A session whose turns: `old` (no expectation), `a1`/`a2` (Anthropic, expects 10,000 read), `w1` (ctxd cut its window), `o1` (OpenAI). */
const lookup: UsageEndpoint.Lookup<never, never> = (_tenant, _session, turnId) => {
  const base = { model: MODEL, estimate: 10_600, backend: "tiktoken", calibration: 1 }
  switch (turnId) {
    case "old":
      return Effect.succeed(Option.some(base))
    case "a1":
    case "a2":
      return Effect.succeed(Option.some({ ...base, cache: { expectedReadTokens: 10_000, expectedWriteTokens: 500, reason: "append" } }))
    case "w1":
      return Effect.succeed(Option.some({ ...base, cache: { expectedReadTokens: 2_000, expectedWriteTokens: 8_500, reason: "window" } }))
    case "m1":
    case "m2":
      return Effect.succeed(
        Option.some({
          ...base,
          cache: { expectedReadTokens: 6_000, reason: "mask", miss: { cause: "ctxd_edit" as const, tokens: 4_000, reason: "mask" } },
        }),
      )
    case "o1":
      return Effect.succeed(
        Option.some({ ...base, model: { provider: "openai", name: "gpt-4o" }, cache: { expectedReadTokens: 10_000, reason: "append" } }),
      )
    default:
      return Effect.succeed(Option.none())
  }
}

describe("UsageEndpoint cache field", () => {
  layer(TokenCounter.layer())((it) => {
    it.effect("flags an unexpected break once per turn, names ctxd's own, and leaves turns without an expectation as before", () =>
      Effect.gen(function* () {
        const claim = UsageEndpoint.localClaim()
        const report = (session: string, turnId: string, usage: unknown) =>
          UsageEndpoint.handle("acme", session, encode({ turnId, usage }), lookup, claim)
        const before = { unexpected: yield* CacheCheck.count("unexpected"), window: yield* CacheCheck.count("window") }

        const low = yield* report("s", "a1", { input_tokens: 100, cache_read_input_tokens: 0, cache_creation_input_tokens: 10_500 })
        expect(low).toMatchObject({
          ok: true,
          counted: true,
          cache: { expectedReadTokens: 10_000, billedReadTokens: 0, billedWriteTokens: 10_500, break: "unexpected", reason: "append" },
        })
        expect(Schema.is(Tokens.UsageReply)(low)).toBe(true)
        expect(yield* CacheCheck.count("unexpected")).toBe(before.unexpected + 1)
        // a duplicate report gets the same answer and counts nothing
        const again = yield* report("s", "a1", { input_tokens: 100, cache_read_input_tokens: 0, cache_creation_input_tokens: 10_500 })
        expect(again).toMatchObject({ ok: true, counted: false, cache: { break: "unexpected" } })
        expect(yield* CacheCheck.count("unexpected")).toBe(before.unexpected + 1)

        const matching = yield* report("s", "a2", { input_tokens: 100, cache_read_input_tokens: 10_000, cache_creation_input_tokens: 500 })
        expect(matching).toMatchObject({ ok: true, counted: true, cache: { billedReadTokens: 10_000, break: "none" } })
        const openai = yield* report("s", "o1", { prompt_tokens: 10_600, prompt_tokens_details: { cached_tokens: 9_984 } })
        expect(openai).toMatchObject({ ok: true, cache: { billedReadTokens: 9_984, billedWriteTokens: 616, break: "none" } })
        expect(yield* CacheCheck.count("unexpected")).toBe(before.unexpected + 1)

        // ctxd cut the window: its own break, counted under its reason
        const cut = yield* report("s", "w1", { input_tokens: 100, cache_read_input_tokens: 2_000, cache_creation_input_tokens: 8_500 })
        expect(cut).toMatchObject({ ok: true, cache: { expectedReadTokens: 2_000, break: "none", reason: "window" } })
        expect(yield* CacheCheck.count("window")).toBe(before.window + 1)

        const old = yield* report("s", "old", { input_tokens: 100, cache_read_input_tokens: 0, cache_creation_input_tokens: 10_500 })
        expect(old).toMatchObject({ ok: true, counted: true })
        expect(old).not.toHaveProperty("cache")
        expect(yield* CacheCheck.count("unexpected")).toBe(before.unexpected + 1)

        // a rejected report claims nothing and counts nothing
        const bad = yield* report("s2", "a1", { input_tokens: -1 })
        expect(bad).toMatchObject({ ok: false, error: { code: "BadRequest" } })
        expect(yield* CacheCheck.count("unexpected")).toBe(before.unexpected + 1)
      }),
    )

    it.effect(
      "misses by cause: the turn's own edit, then a shortfall the diagnostics lay on the client; ctxd_cache_miss_tokens_total once",
      () =>
        Effect.gen(function* () {
          const claim = UsageEndpoint.localClaim()
          const count = (cause: string) =>
            Effect.map(
              Metric.value(Metric.tagged(Metric.tagged(CacheCheck.missTokens, "tenant", "miss-tenant"), "cause", cause)),
              (s) => s.count,
            )
          const report = (turnId: string, diagnostics?: unknown) =>
            UsageEndpoint.handle(
              "miss-tenant",
              "s",
              encode({
                turnId,
                usage: { input_tokens: 100, cache_read_input_tokens: 0, cache_creation_input_tokens: 10_500 },
                diagnostics,
              }),
              lookup,
              claim,
            )
          const diagnosed = yield* report("m1", { cache_miss_reason: { type: "tools_changed", cache_missed_input_tokens: 6_000 } })
          expect(Schema.is(Tokens.UsageReply)(diagnosed)).toBe(true)
          // estimate 10,600 = billed 10,600: no scaling
          expect(diagnosed).toMatchObject({
            cache: {
              break: "unexpected",
              misses: [
                { cause: "ctxd_edit", tokens: 4_000, reason: "mask" },
                { cause: "client_change", tokens: 6_000, reason: "tools" },
              ],
            },
          })
          expect(yield* count("ctxd_edit")).toBe(4_000)
          expect(yield* count("client_change")).toBe(6_000)
          yield* report("m1", { cache_miss_reason: { type: "tools_changed", cache_missed_input_tokens: 6_000 } })
          expect(yield* count("client_change")).toBe(6_000)
          const bare = yield* report("m2")
          expect(bare).toMatchObject({ cache: { misses: [{ cause: "ctxd_edit" }, { cause: "unknown", tokens: 6_000 }] } })
          expect(yield* count("unknown")).toBe(6_000)
        }),
    )
  })
})
