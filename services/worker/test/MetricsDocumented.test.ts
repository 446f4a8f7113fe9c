// Every metric the packages register is in the metrics table of
// docs/operations.md: a new Metric.counter / gauge / histogram named
// ctxd_* or llm_* fails here until the page lists it.
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"

const ROOT = join(import.meta.dirname, "..", "..", "..")
const REGISTERED = /Metric\.(?:counter|gauge|histogram|summary|frequency)\(\s*"((?:ctxd|llm)_[a-z0-9_]+)"/g

const sources = (): Array<string> =>
  ["libs", "services"].flatMap((group) =>
    readdirSync(join(ROOT, group)).flatMap((pkg) => {
      const src = join(ROOT, group, pkg, "src")
      let files: Array<string>
      try {
        files = readdirSync(src, { recursive: true, encoding: "utf8" })
      } catch {
        return []
      }
      return files.filter((f) => f.endsWith(".ts")).map((f) => join(src, f))
    }),
  )

const registered = (): ReadonlySet<string> => {
  const names = new Set<string>()
  for (const file of sources()) for (const match of readFileSync(file, "utf8").matchAll(REGISTERED)) names.add(match[1]!)
  return names
}

describe("docs/operations.md lists every metric", () => {
  it("names each registered ctxd_* and llm_* metric in backticks", () => {
    const page = readFileSync(join(ROOT, "docs", "operations.md"), "utf8")
    const names = registered()
    // the scan itself finds the metrics it should (the turn counter, a gauge of the worker, a histogram of the token counter)
    for (const known of ["ctxd_turns_total", "ctxd_shards_owned", "llm_prompt_tokens_drift"]) expect(names).toContain(known)
    const missing = [...names].filter((name) => !page.includes(`\`${name}\``))
    expect(missing, "metrics missing from docs/operations.md").toEqual([])
  })
})
