import { describe, expect, it } from "vitest"
import * as Progress from "../src/cli/Progress.ts"

const stream = (isTTY: boolean) => {
  const written: Array<string> = []
  return { written, stream: { isTTY, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream }
}

describe("Progress", () => {
  it("draws on a terminal and ends with a cleared line", () => {
    const out = stream(true)
    const bar = Progress.make(4, out.stream)
    for (let i = 0; i < 4; i++) bar.tick()
    bar.done()
    expect(out.written.some((s) => s.includes("4/4 turns"))).toBe(true)
    expect(out.written.at(-1)).toBe("\r\x1b[2K")
  })

  it("writes nothing when the stream is not a terminal (pipes, files, CI logs)", () => {
    const out = stream(false)
    const bar = Progress.make(4, out.stream)
    bar.tick()
    bar.done()
    expect(out.written).toEqual([])
  })
})
