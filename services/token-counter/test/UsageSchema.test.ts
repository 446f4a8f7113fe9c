import { describe, expect, it } from "@effect/vitest"
import { Either, JSONSchema, Schema } from "effect"
import { Tokens as UsageSchema } from "@ctxd/contracts"

describe("UsageSchema", () => {
  it("decodes usage reports in both providers' field names and rejects negative counts", () => {
    const decode = Schema.decodeUnknownEither(UsageSchema.UsageReport)
    expect(
      Either.isRight(
        decode({ turnId: "t1", usage: { input_tokens: 3, cache_read_input_tokens: null, output_tokens: 5, service_tier: "standard" } }),
      ),
    ).toBe(true)
    expect(
      Either.isRight(decode({ turnId: "t1", usage: { prompt_tokens: 9, prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 } } })),
    ).toBe(true)
    expect(Either.isLeft(decode({ turnId: "t1", usage: { input_tokens: -1 } }))).toBe(true)
    expect(Either.isLeft(decode({ turnId: "", usage: {} }))).toBe(true)
  })

  it("wants exactly one of body and segments in a count request", () => {
    const decode = Schema.decodeUnknownEither(UsageSchema.CountRequest)
    const model = { provider: "anthropic", name: "claude-sonnet-4-6" }
    expect(Either.isRight(decode({ model, segments: ["a"] }))).toBe(true)
    expect(Either.isRight(decode({ model, backend: "heuristic", body: { messages: [] } }))).toBe(true)
    expect(Either.isLeft(decode({ model }))).toBe(true)
    expect(Either.isLeft(decode({ model, segments: [], body: {} }))).toBe(true)
    expect(Either.isLeft(decode({ model, backend: "exact", segments: [] }))).toBe(true)
  })

  it("exports JSON Schema documents", () => {
    const schemas: ReadonlyArray<Schema.Schema.Any> = [
      UsageSchema.UsageReport,
      UsageSchema.UsageReply,
      UsageSchema.CountRequest,
      UsageSchema.CountReply,
    ]
    for (const schema of schemas) {
      expect(JSONSchema.make(schema)).toHaveProperty("$schema")
    }
  })
})
