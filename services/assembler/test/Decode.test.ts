// Hostile turn requests become short BadRequests: no echo of large values,
// no stack overflow on deep nesting, no lone surrogates for Postgres.
import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import * as Decode from "../src/Decode.ts"
import * as Prefixes from "../src/Prefixes.ts"

const encoder = new TextEncoder()

// both paths: the whole request checked and decoded, and the worker's (Decode.turn, with the prefix cache)
const decode = (text: string) => {
  const whole = Effect.runSync(Effect.either(Decode.parseJson(encoder.encode(text)).pipe(Effect.flatMap(Decode.turnRequest))))
  const cached = Either.map(
    Decode.turn(encoder.encode(text), Prefixes.make({ bytes: 1 << 20, sessionRefs: 8 }), { tenant: "t", session: "s" }),
    (d) => d.request,
  )
  expect(Either.isLeft(cached) ? { left: cached.left.path } : "decoded").toEqual(
    Either.isLeft(whole) ? { left: whole.left.path } : "decoded",
  )
  return whole
}

const turn = (messages: unknown, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ turnId: "t1", format: "anthropic", model: { provider: "anthropic", name: "claude-sonnet-4-5" }, messages, ...extra })

describe("Decode", () => {
  it("an invalid 600 KB content is a short BadRequest with the path", () => {
    const result = decode(turn([{ role: "user", content: { bogus: "x".repeat(600_000) } }]))
    if (Either.isRight(result)) throw new Error("expected BadRequest")
    expect(result.left.path).toBe("messages[0].content")
    expect(result.left.message.length).toBeLessThan(2_000)
  })

  it("10,000-deep nesting in a tool_use input or an unknown block is BadRequest naming the limit", () => {
    const deep = "[".repeat(10_000) + "]".repeat(10_000)
    for (const block of [`{"type":"tool_use","id":"c1","name":"f","input":{"x":${deep}}}`, `{"type":"mystery","data":${deep}}`]) {
      const text = `{"turnId":"t1","format":"anthropic","model":{"provider":"anthropic","name":"claude-sonnet-4-5"},"messages":[{"role":"assistant","content":[${block}]}]}`
      const result = decode(text)
      if (Either.isRight(result)) throw new Error("expected BadRequest")
      expect(result.left._tag).toBe("BadRequest")
      expect(result.left.message).toContain("deeper than 128")
      expect(result.left.path?.startsWith("messages[0].content[0]")).toBe(true)
    }
  })

  it("a lone surrogate escape in content is BadRequest with the path", () => {
    const text = turn([{ role: "user", content: "PLACEHOLDER" }]).replace("PLACEHOLDER", "a\\ud800b")
    const result = decode(text)
    if (Either.isRight(result)) throw new Error("expected BadRequest")
    expect(result.left).toMatchObject({ _tag: "BadRequest", path: "messages[0].content" })
  })

  it("an unknown format is echoed in at most a few hundred characters", () => {
    const result = decode(JSON.stringify({ turnId: "t", format: "f".repeat(100_000), messages: [] }))
    if (Either.isRight(result)) throw new Error("expected BadRequest")
    expect(result.left.message.length).toBeLessThan(400)
  })
})
