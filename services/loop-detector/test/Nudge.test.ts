import { describe, expect, it } from "vitest"
import * as Detector from "../src/Detector.ts"
import * as Nudge from "../src/Nudge.ts"
import { exchange, repeat, say, start } from "./Synthetic.ts"

const looping = () => Detector.check([...start(), ...repeat(3, () => exchange("get_user", { id: "u1" }, "Ada"))])

describe("Nudge", () => {
  it("names the call, its arguments and the count, and tells the model to change approach or ask the user", () => {
    expect(Nudge.nudgeText(looping())).toBe(
      [
        "[ctxd loop check] You are repeating yourself without making progress:",
        '- get_user({"id":"u1"}) returned the same result 3 times in a row: calling it again will return the same thing.',
        "Do not repeat it. Change your approach (a different tool, different arguments, or work with the results you already have), or ask the user how to proceed.",
      ].join("\n"),
    )
  })

  it("is byte-identical for the same loop (call ids and timing do not enter it)", () => {
    expect(Nudge.nudgeText(looping())).toBe(Nudge.nudgeText(looping()))
  })

  it("lists every finding", () => {
    const verdict = Detector.check([...repeat(3, () => exchange("ls", {}, "a")), say("1"), say("2"), say("3"), say("4")])
    const text = Nudge.nudgeText(verdict)
    expect(text.split("\n")).toHaveLength(4)
    expect(text).toContain("ls({}) returned the same result 3 times")
    expect(text).toContain("4 assistant messages in a row")
  })

  it("is empty without a loop", () => {
    expect(Nudge.nudgeText(Detector.none)).toBe("")
    expect(Nudge.nudgeMessage(Detector.none)).toBeUndefined()
  })

  it("maps the policy to an action", () => {
    const verdict = looping()
    expect(Nudge.action(verdict, "off")).toEqual({ kind: "none" })
    expect(Nudge.action(verdict, "escalate")).toEqual({ kind: "escalate" })
    expect(Nudge.action(Detector.none, "nudge")).toEqual({ kind: "none" })
    expect(Nudge.action(verdict)).toEqual({
      kind: "nudge",
      message: { role: "user", parts: [{ type: "text", text: Nudge.nudgeText(verdict) }] },
    })
  })
})

describe("a stored nudge", () => {
  it("is not user input: it neither resets the loop nor breaks a monologue", () => {
    const messages = [...start(), ...repeat(3, () => exchange("get_user", { id: "u1" }, "Ada"))]
    const nudge = Nudge.nudgeMessage(Detector.check(messages))!
    expect(Detector.check([...messages, nudge, ...exchange("get_user", { id: "u1" }, "Ada")]).findings[0]?.repeats).toBe(4)
    expect(Detector.check([say("1"), say("2"), nudge, say("3"), say("4")]).findings.map((f) => f.pattern)).toEqual(["monologue"])
  })
})
