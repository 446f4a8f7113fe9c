/**
 * Tests read recorded sessions only through `Workloads`: the samples bundled
 * in `examples/data` (`Workloads.dataDir`), always, so a fresh clone runs
 * exactly what CI runs; a test that needs the full data set is opt-in on
 * `Workloads.optInDataDir()` and skips, saying why, without it. This fails on
 * any test file (a `*.test.ts`, or any file under a `test/` folder) that
 * names the full data set's directory itself or reads its environment
 * variable, and on planted lines, so it cannot pass by checking nothing.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join, relative, sep } from "node:path"
import { describe, expect, it } from "vitest"

const ROOT = join(import.meta.dirname, "..", "..", "..")
const SKIP = new Set(["node_modules", ".git", "examples", "docs", "results", "baselines"])

/** The test files of the repository: every `.ts` under a `test/` folder, and every `*.test.ts`, repository-relative. */
const testFiles = (dir = ROOT): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return SKIP.has(entry.name) ? [] : testFiles(path)
    const rel = relative(ROOT, path).split(sep).join("/")
    return entry.name.endsWith(".ts") && (rel.endsWith(".test.ts") || /(^|\/)test\//.test(rel)) ? [rel] : []
  })

const ENV = ["CTXD", "DATA", "DIR"].join("_")
const RULES: ReadonlyArray<readonly [RegExp, string]> = [
  [
    /\.\.\/shared\b|\bshared\/data\b/,
    "names the full data set's directory (use Workloads.dataDir(), or Workloads.optInDataDir() to opt in)",
  ],
  [/["']shared["']\s*,\s*["']data["']/, "builds the full data set's path (use Workloads.dataDir(), or Workloads.optInDataDir() to opt in)"],
  [new RegExp(`env(\\.|\\[["'])${ENV}\\b`), `reads ${ENV} itself (use Workloads.optInDataDir())`],
  [/\bfullDataDir\b/, "reads the benches' full data set (a test opts in with Workloads.optInDataDir() and skipIf)"],
]

/** Files that test the accessors themselves. */
const ALLOWED = new Set(["libs/testing/test/Workloads.test.ts", "libs/testing/test/BundledData.test.ts"])

/** `line: what is wrong` for each line of `text` that reaches the data on its own. */
const violations = (text: string): Array<string> =>
  text.split("\n").flatMap((line, i) => RULES.flatMap(([rule, why]) => (rule.test(line) ? [`${i + 1}: ${why}`] : [])))

describe("tests read recorded sessions through Workloads only", () => {
  it("catches planted lines, not the accessors", () => {
    const planted = [
      `const data = join(import.meta.dirname, "../../../../shared/data")`,
      `const dir = join(root, "..", "shared", "data")`,
      `const dir = process.env["${ENV}"] ?? "x"`,
      `const dir = process.env.${ENV}`,
      `const tau = Workloads.tauBenchSessions(Workloads.fullDataDir())`,
    ]
    expect(planted.map((line) => violations(line).length)).toEqual([1, 1, 1, 1, 1])
    const fine = [
      `const tau = Workloads.tauBenchSessions()`,
      `const full = Workloads.optInDataDir()`,
      `describe.skipIf(full === undefined)("the full data set (opt-in: set ${ENV})", () => {})`,
      `const shared: Array<string> = []`,
    ]
    expect(fine.flatMap(violations)).toEqual([])
  })

  it("holds in every test file of the repository", () => {
    const files = testFiles()
    // the scan reaches the tests that read sessions, in every kind of place
    for (const known of [
      "libs/context/test/TauBench.test.ts",
      "services/loop-detector/test/Trajectories.ts",
      "test/Harness.ts",
      "bench/economics/Thinking.test.ts",
    ])
      expect(files).toContain(known)
    const found = files
      .filter((file) => !ALLOWED.has(file))
      .flatMap((file) => violations(readFileSync(join(ROOT, file), "utf8")).map((v) => `${file}:${v}`))
    expect(found).toEqual([])
  })
})
