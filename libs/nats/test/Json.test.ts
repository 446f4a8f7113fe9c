import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Json from "../src/Json.ts"

describe("Json", () => {
  it("utf8 writes any text's UTF-8 bytes, ASCII or not (lone surrogates as U+FFFD, as the encoder does)", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ unit: "binary" }), fc.string({ unit: "grapheme-ascii" }), fc.string({ unit: "binary-ascii" })),
        (text) => {
          expect(Json.utf8(text).equals(Buffer.from(new TextEncoder().encode(text)))).toBe(true)
        },
      ),
    )
    // one character past ASCII in a long ASCII text: encoded, not copied
    expect(Json.utf8(`${"a".repeat(1000)}é`).toString("utf8")).toBe(`${"a".repeat(1000)}é`)
    expect(Json.utf8("\u00ff").length).toBe(2)
  })

  it("encode and decode round-trip JSON values", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const decoded = Json.decode(Json.encode(value))
        expect(decoded._tag === "Right" ? JSON.stringify(decoded.right) : decoded.left.message).toBe(JSON.stringify(value))
      }),
    )
  })
})
