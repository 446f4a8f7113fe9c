/** docs/concepts.md's "How a turn flows" names the stages the code runs, in the code's order. */
import { Pipeline } from "@ctxd/context"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as TurnStages from "../src/turn/Turn.ts"

const page = readFileSync(join(import.meta.dirname, "..", "..", "..", "docs", "concepts.md"), "utf8")
const section = page.slice(page.indexOf("## How a turn flows"), page.indexOf("\n## ", page.indexOf("## How a turn flows") + 1))

/** The stage names of the line after `heading`: `` `a` → `b` → ... ``. */
const listAfter = (heading: string): ReadonlyArray<string> => {
  const at = section.indexOf(heading)
  expect(at, `docs/concepts.md section "How a turn flows" has "${heading}"`).toBeGreaterThanOrEqual(0)
  const line = section.slice(at).split("\n")[1] ?? ""
  return [...line.matchAll(/`([a-z]+)`/g)].map((m) => m[1]!)
}

describe("docs/concepts.md: How a turn flows", () => {
  it("lists the turn stages as turn/Turn.ts runs them", () => {
    expect(listAfter("Turn stages (")).toEqual(TurnStages.names())
  })

  it("lists the pipeline stages as libs/context Pipeline runs them", () => {
    expect(listAfter("Pipeline stages (")).toEqual([...Pipeline.STAGES])
  })

  it("has a row per turn stage naming the file it lives in", () => {
    for (const name of TurnStages.names()) {
      const file = `turn/${name[0]!.toUpperCase()}${name.slice(1)}.ts`
      expect(section).toContain(`| \`${name}\` | \`${file}\` |`)
    }
  })
})
