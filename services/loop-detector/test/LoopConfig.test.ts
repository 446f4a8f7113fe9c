import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as LoopConfig from "../src/LoopConfig.ts"

const decode = Schema.decodeUnknownEither(LoopConfig.Overrides)

describe("LoopConfig", () => {
  it("has the documented defaults", () => {
    expect(LoopConfig.defaults).toEqual({
      policy: "nudge",
      repeatedCall: { threshold: 3 },
      repeatedError: { threshold: 3 },
      alternation: { cycles: 3, maxPeriod: 3 },
      monologue: { threshold: 4 },
      contextOverflow: { threshold: 2, withinMessages: 20 },
    })
    expect(LoopConfig.make()).toEqual(LoopConfig.defaults)
  })

  it("applies overrides field by field", () => {
    expect(LoopConfig.make({ policy: "escalate", alternation: { cycles: 2 }, contextOverflow: { withinMessages: 50 } })).toEqual({
      ...LoopConfig.defaults,
      policy: "escalate",
      alternation: { cycles: 2, maxPeriod: 3 },
      contextOverflow: { threshold: 2, withinMessages: 50 },
    })
    expect(LoopConfig.make({ alternation: { maxPeriod: 9 } }).alternation.maxPeriod).toBe(LoopConfig.MAX_PERIOD)
  })

  it("decodes wire overrides and rejects meaningless thresholds", () => {
    expect(Either.isRight(decode({ policy: "off", repeatedCall: { threshold: 0 }, monologue: { threshold: 6 } }))).toBe(true)
    expect(Either.isLeft(decode({ repeatedCall: { threshold: 1 } }))).toBe(true)
    expect(Either.isLeft(decode({ repeatedError: { threshold: -2 } }))).toBe(true)
    expect(Either.isLeft(decode({ alternation: { maxPeriod: 5 } }))).toBe(true)
    expect(Either.isLeft(decode({ policy: "shout" }))).toBe(true)
  })
})
