// Which launchers a worker watches: its parent, and through `sh -c` wrappers
// (npm's and npx's) the process that started each; never a user's own shell.
import { describe, expect, it } from "vitest"
import * as ParentWatch from "../src/ParentWatch.ts"

/** A process table: pid → [parent, argv]. */
const table = (rows: Record<number, readonly [number, ReadonlyArray<string>]>): ParentWatch.Processes => ({
  parentOf: (pid) => rows[pid]?.[0],
  argv: (pid) => rows[pid]?.[1] ?? [],
})

describe("ParentWatch", () => {
  it("tells a `sh -c` wrapper from a user's shell", () => {
    expect(ParentWatch.isWrapper(["/bin/sh", "-c", "ctxd serve"])).toBe(true)
    expect(ParentWatch.isWrapper(["sh", "-c", "exec node services/worker/src/main.ts"])).toBe(true)
    expect(ParentWatch.isWrapper(["/usr/bin/bash", "-c", "ctxd serve"])).toBe(true)
    expect(ParentWatch.isWrapper(["-bash"])).toBe(false)
    expect(ParentWatch.isWrapper(["/bin/bash", "--login"])).toBe(false)
    expect(ParentWatch.isWrapper(["node", "-c", "x"])).toBe(false)
    expect(ParentWatch.isWrapper([])).toBe(false)
  })

  it("npx → sh -c → worker: watches the shell and npx, not the terminal's shell above", () => {
    const processes = table({
      40: [30, ["/bin/sh", "-c", "ctxd serve"]],
      30: [20, ["npm exec ctxd serve"]],
      20: [10, ["-bash"]],
    })
    expect(ParentWatch.links(50, 40, processes)).toEqual([
      [50, 40],
      [40, 30],
    ])
  })

  it("npm start (the shell exec'd the worker) or a plain launcher: the parent only; init has none above", () => {
    const processes = table({ 30: [20, ["npm run start"]], 20: [10, ["-bash"]], 60: [1, ["sh", "-c", "ctxd serve"]] })
    expect(ParentWatch.links(50, 30, processes)).toEqual([[50, 30]])
    expect(ParentWatch.links(70, 60, processes)).toEqual([[70, 60]])
    expect(ParentWatch.links(50, 99, processes)).toEqual([[50, 99]])
  })

  it("reads this process's own parent from /proc on Linux", () => {
    if (process.platform !== "linux") return
    expect(ParentWatch.proc.parentOf(process.pid)).toBe(process.ppid)
    expect(ParentWatch.proc.argv(process.pid).length).toBeGreaterThan(0)
    expect(ParentWatch.proc.argv(2 ** 30)).toEqual([])
    expect(ParentWatch.proc.parentOf(2 ** 30)).toBeUndefined()
    expect(ParentWatch.orphaned(30, 1)).toBe(true)
    expect(ParentWatch.orphaned(1, 5)).toBe(false)
  })
})
