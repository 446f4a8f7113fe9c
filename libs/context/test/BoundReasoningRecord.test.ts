/**
 * The record of a prompt for a binding model and where the next prompt
 * diverges from it: system or tools (before every message), a changed
 * message, a message left out, the tail gone from after the newest one.
 */
import { describe, expect, it } from "vitest"
import * as BoundReasoning from "../src/BoundReasoning.ts"
import { assistant, user } from "./Helpers.ts"

const sent = (...messages: ReadonlyArray<ReturnType<typeof user>>) => messages.map((message, index) => ({ index, message }))
const fixed = BoundReasoning.fixedOf([{ id: "s", text: "Be brief.", cache: "5m" }], [])
const base = sent(user("a"), assistant("b"), user("c"))

describe("BoundReasoning.divergence", () => {
  it("tools: a change among deferred ones (tool search) is no change; among the others it is", () => {
    const tool = (name: string, description: string, deferred = false) => ({
      name,
      description,
      inputSchema: { type: "object" },
      ...(deferred ? { extra: { deferLoading: true } } : {}),
    })
    const system = [{ id: "s", text: "Be brief.", cache: "5m" as const }]
    const before = BoundReasoning.fixedOf(system, [tool("a", "A"), tool("b", "B", true)])
    expect(BoundReasoning.fixedOf(system, [tool("a", "A"), tool("b", "B, reworded", true), tool("c", "C", true)])).toBe(before)
    expect(BoundReasoning.fixedOf(system, [tool("a", "A, reworded"), tool("b", "B", true)])).not.toBe(before)
  })

  it("nothing changed, messages appended: no divergence", () => {
    const r = BoundReasoning.record("m", fixed, 1, base, "")
    expect(BoundReasoning.divergence(r, fixed, [...base, { index: 3, message: assistant("d") }])).toBe(Infinity)
  })

  it("system or tools changed: before every message; a changed or missing message: at it", () => {
    const r = BoundReasoning.record("m", fixed, 1, base, "")
    const other = BoundReasoning.fixedOf([{ id: "s", text: "Be verbose.", cache: "5m" }], [])
    expect(BoundReasoning.divergence(r, other, base)).toBe(-1)
    // a cache flag is not content
    expect(BoundReasoning.fixedOf([{ id: "s", text: "Be brief.", cache: "1h" }], [])).toBe(fixed)
    expect(BoundReasoning.divergence(r, fixed, sent(user("a"), assistant("b"), user("changed")))).toBe(2)
    expect(BoundReasoning.divergence(r, fixed, [base[0]!, base[2]!])).toBe(1)
    // before the frontier: the chained digest, so the first message sent
    expect(BoundReasoning.divergence(r, fixed, sent(user("x"), assistant("b"), user("c")))).toBe(0)
  })

  it("a tail after the newest message: what follows it now was produced with the tail there", () => {
    const r = BoundReasoning.record("m", fixed, 1, base, BoundReasoning.tailOf(["memory"]))
    expect(BoundReasoning.divergence(r, fixed, [...base, { index: 3, message: assistant("d") }])).toBe(3)
    expect(BoundReasoning.tailOf([undefined, ""])).toBe("")
  })
})
