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

  it("builds and parses the tenant-scoped summarize and tokens.count subjects", () => {
    const s = Subjects.make("staging.ctx")
    expect(s.summarizeFor("acme")).toBe("staging.ctx.v1.summarize.acme")
    expect(s.tokensCountFor("acme")).toBe("staging.ctx.v1.tokens.count.acme")
    expect(s.summarizeWildcard).toBe("staging.ctx.v1.summarize.*")
    expect(s.tokensCountWildcard).toBe("staging.ctx.v1.tokens.count.*")
    expect(s.parseTenant(s.summarizeFor("a_b-9"))).toBe("a_b-9")
    expect(s.parseTenant(s.tokensCountFor("globex"))).toBe("globex")
    // the tenant-less legacy subjects and other verbs carry no tenant
    expect(s.parseTenant(s.summarize)).toBeUndefined()
    expect(s.parseTenant(s.tokensCount)).toBeUndefined()
    expect(s.parseTenant(s.knowledge("acme"))).toBeUndefined()
    expect(s.parseTenant("ctx.v1.summarize.acme")).toBeUndefined()
    expect(s.parseTenant("staging.ctx.v1.summarize.te@nant")).toBeUndefined()
  })
})
