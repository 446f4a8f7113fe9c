import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Canonical from "../src/Canonical.ts"

describe("Canonical.canonicalJson", () => {
  it("sorts keys at every depth and drops whitespace", () => {
    expect(Canonical.canonicalJson({ b: 1, a: { d: [1, { z: true, y: null }], c: "x y" } })).toBe(
      '{"a":{"c":"x y","d":[1,{"y":null,"z":true}]},"b":1}',
    )
  })

  it("follows JSON.stringify for undefined, non-finite numbers, -0 and toJSON; never throws on cycles or bigints", () => {
    expect(Canonical.canonicalJson({ a: undefined, b: [undefined, NaN, Infinity], c: -0 })).toBe('{"b":[null,null,null],"c":0}')
    expect(Canonical.canonicalJson(new Date(0))).toBe('"1970-01-01T00:00:00.000Z"')
    expect(Canonical.canonicalJson(10n)).toBe('"10"')
    const cyclic: Record<string, unknown> = { a: 1 }
    cyclic["self"] = cyclic
    expect(Canonical.canonicalJson(cyclic)).toBe('{"a":1,"self":"[Circular]"}')
    expect(Canonical.canonicalJson(undefined)).toBe("null")
  })

  it("is invariant under key order and JSON formatting (property)", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const reordered = JSON.parse(JSON.stringify(value, null, 2), function (_key, v: unknown) {
          if (v === null || typeof v !== "object" || Array.isArray(v)) return v
          return Object.fromEntries(Object.entries(v).reverse())
        }) as unknown
        expect(Canonical.canonicalJson(reordered)).toBe(Canonical.canonicalJson(value))
        expect(JSON.parse(Canonical.canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)))
      }),
    )
  })
})

describe("Canonical.canonicalArgs", () => {
  it("treats parsed input, raw argument strings and pretty-printed JSON strings alike", () => {
    const expected = '{"city":"Paris","days":[1,2]}'
    expect(Canonical.canonicalArgs({ days: [1, 2], city: "Paris" })).toBe(expected)
    expect(Canonical.canonicalArgs(undefined, '{ "days": [1, 2],\n  "city": "Paris" }')).toBe(expected)
    expect(Canonical.canonicalArgs('{"days":[1,2],"city":"Paris"}')).toBe(expected)
  })

  it("keeps whitespace inside values and plain-string arguments", () => {
    expect(Canonical.canonicalArgs({ command: "ls  -la" })).not.toBe(Canonical.canonicalArgs({ command: "ls -la" }))
    expect(Canonical.canonicalArgs("not json")).toBe('"not json"')
    expect(Canonical.canonicalArgs(undefined, "{broken")).toBe('"{broken"')
    expect(Canonical.canonicalArgs(undefined)).toBe("{}")
    expect(Canonical.canonicalArgs(undefined, "")).toBe("{}")
  })
})

describe("Canonical.fingerprint", () => {
  it("is short, stable and separates pieces", () => {
    const fp = Canonical.fingerprint("get_user", '{"id":1}')
    expect(fp).toHaveLength(Canonical.FINGERPRINT_LENGTH)
    expect(fp).toMatch(/^[A-Za-z0-9_-]+$/)
    expect(Canonical.fingerprint("get_user", '{"id":1}')).toBe(fp)
    expect(Canonical.fingerprint("ab", "c")).not.toBe(Canonical.fingerprint("a", "bc"))
  })
})
