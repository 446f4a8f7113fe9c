import { describe, expect, it } from "vitest"
import * as Summary from "./Summary.ts"

const modes = [
  ["no gaps", false],
  ["gaps", true],
] as const

describe("Summary.rows", () => {
  it("gives per mode the worst session, the sessions above 1.01 × and the reasoning left out", () => {
    const sessions = [
      { ratio: { "no gaps": 0.9, gaps: 1.011 }, reasoningLeftOut: { "no gaps": 0, gaps: 2 } },
      { ratio: { "no gaps": 1.01, gaps: 0.5 }, reasoningLeftOut: { "no gaps": 3, gaps: 1 } },
    ]
    const rows = Summary.rows("m", sessions, modes, (s, mode) => s.ratio[mode])
    const value = (metric: string) => rows.find((r) => r.metric === metric)
    expect(value("no gaps: worst session, ctxd / full history")).toMatchObject({ value: 1.01, met: true })
    expect(value("no gaps: sessions above 1.01 × full history")).toMatchObject({ value: 0, met: true })
    expect(value("gaps: sessions above 1.01 × full history")).toMatchObject({ value: 1, met: false })
    expect(value("gaps: worst session, ctxd / full history")?.met).toBe(false)
    expect(value("no gaps: reasoning parts left out (all requests)")?.value).toBe(3)
    expect(value("gaps: reasoning parts left out (all requests)")?.value).toBe(3)
  })
})
