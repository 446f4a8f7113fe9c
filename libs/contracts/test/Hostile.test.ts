// Error messages and envelopes stay bounded whatever the input; the input
// checks that run right after JSON.parse are iterative.
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as Errors from "../src/Errors.ts"
import * as InputLimits from "../src/InputLimits.ts"
import * as Issues from "../src/Issues.ts"
import * as Knowledge from "../src/Knowledge.ts"

const nested = (depth: number): unknown => {
  let value: unknown = "leaf"
  for (let i = 0; i < depth; i++) value = i % 2 === 0 ? { a: value } : [value]
  return value
}

describe("error envelope", () => {
  it("caps message, path and hint", () => {
    const big = "x".repeat(600_000)
    const reply = Errors.toReply(new Errors.BadRequest({ message: big, path: big, hint: big }))
    expect(JSON.stringify(reply).length).toBeLessThan(4_000)
    expect(reply.error.message.length).toBeLessThanOrEqual(Errors.MAX_MESSAGE)
    expect(reply.error.path!.length).toBeLessThanOrEqual(Errors.MAX_PATH)
    expect(reply.error.hint!.length).toBeLessThanOrEqual(Errors.MAX_HINT)
    expect(reply.error.message).toMatch(/…\(\+\d+ chars\)$/)
  })

  it("caps at the limit exactly, the marker included, whatever the length cut", () => {
    for (const length of [301, 302, 310, 400, 1_000, 99_999, 100_000, 1_000_000]) {
      const capped = Errors.cap("y".repeat(length), 300)
      expect(capped.length).toBeLessThanOrEqual(300)
      expect(capped.length).toBeGreaterThan(280)
      expect(Number(/\+(\d+) chars/.exec(capped)![1]) + capped.indexOf("…")).toBe(length)
    }
    expect(Errors.cap("y".repeat(300), 300)).toBe("y".repeat(300))
  })

  it("redacts quoted values for logs", () => {
    const line = Errors.redact(`messages[0].content: Expected { readonly type: "text" }, actual {"secret":"SECRET-MARKER-123"}`)
    expect(line).not.toContain("SECRET-MARKER")
    expect(line).toContain("messages[0].content")
  })
})

describe("Issues.describe", () => {
  it("echoes at most MAX_ECHO characters of a large invalid value", () => {
    const result = Schema.decodeUnknownEither(Knowledge.Request, { errors: "all" })({
      op: "add",
      doc: { id: "a", title: "t", text: 42, extra: "y".repeat(600_000) },
    })
    if (result._tag === "Right") throw new Error("expected a failure")
    const bad = Schema.decodeUnknownEither(Schema.Struct({ content: Schema.Number }))({ content: "z".repeat(600_000) })
    if (bad._tag === "Right") throw new Error("expected a failure")
    const described = Issues.describe(bad.left)
    expect(described.path).toBe("content")
    expect(described.message.length).toBeLessThan(Issues.MAX_ECHO + 200)
    expect(described.message).toContain("(600000 chars)")
    expect(Issues.describe(result.left).message.length).toBeLessThan(4_000)
  })

  it("previews deep and wide values within bounds", () => {
    expect(Issues.preview(nested(10_000)).length).toBeLessThanOrEqual(Issues.MAX_ECHO + 30)
    expect(Issues.preview(Array.from({ length: 100_000 }, (_, i) => i)).length).toBeLessThanOrEqual(Issues.MAX_ECHO + 30)
    expect(Issues.preview({ a: 1 })).toBe('{"a":1}')
  })
})

describe("InputLimits.check", () => {
  it("refuses nesting deeper than MAX_DEPTH without recursion, naming the limit", () => {
    const problem = InputLimits.check({ messages: [nested(10_000)] }, "turn requests")
    expect(problem?.message).toContain(`deeper than ${InputLimits.MAX_DEPTH}`)
    expect(problem?.path.startsWith("messages[0]")).toBe(true)
    expect(InputLimits.check(nested(InputLimits.MAX_DEPTH - 1), "x")).toBeUndefined()
  })

  it("refuses NUL characters and lone surrogates with their path, accepts pairs", () => {
    const lone = JSON.parse('{"messages":[{"content":"a\\ud800b"}]}')
    expect(InputLimits.check(lone, "turn requests")).toMatchObject({ path: "messages[0].content" })
    expect(InputLimits.check({ a: ["ok", "a\u0000b"] }, "x")).toMatchObject({ path: "a[1]" })
    expect(InputLimits.check({ ["k\udc00"]: 1 }, "x")?.message).toContain("(a key)")
    // the path of a nested key, and of a value after other keys and indexes
    expect(InputLimits.check({ ok: 1, a: [{ b: 2 }, { ["k\u0000"]: 1 }] }, "x")).toEqual({
      message: "a[1].k\u0000 (a key): NUL characters (\\u0000) are not supported in x",
      path: "a[1].k\u0000",
    })
    expect(InputLimits.check({ ok: "fine", messages: [{ content: "x" }, { content: ["y", "\ud800"] }] }, "x")?.path).toBe(
      "messages[1].content[1]",
    )
    expect(InputLimits.check({ emoji: "😀 日本" }, "x")).toBeUndefined()
  })
})
