import { describe, expect, it } from "vitest"
import * as Subjects from "../src/Subjects.ts"

describe("Subjects", () => {
  it("builds and parses turn subjects under the default root", () => {
    const s = Subjects.make()
    expect(s.turn("acme", "s-1")).toBe("ctx.v1.turn.acme.s-1")
    expect(s.parseSession("ctx.v1.turn.acme.s-1")).toEqual({ tenant: "acme", session: "s-1" })
    expect(s.turnWildcard).toBe("ctx.v1.turn.>")
  })

  it("works with a multi-token root", () => {
    const s = Subjects.make("staging.ctx")
    expect(s.parseSession(s.turn("a_b", "C9"))).toEqual({ tenant: "a_b", session: "C9" })
    expect(s.parseSession("ctx.v1.turn.a.b")).toBeUndefined()
  })

  it("rejects bad tokens and wrong depths", () => {
    const s = Subjects.make()
    expect(s.parseSession("ctx.v1.turn.te@nant.s")).toBeUndefined()
    expect(s.parseSession("ctx.v1.turn.t.s.extra")).toBeUndefined()
    expect(s.parseSession("ctx.v1.turn.t")).toBeUndefined()
    expect(s.parseSession(`ctx.v1.turn.${"x".repeat(129)}.s`)).toBeUndefined()
    expect(s.parseSession(`ctx.v1.turn.${"x".repeat(128)}.s`)).toBeDefined()
  })
})
