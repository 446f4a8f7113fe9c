/**
 * Where `ctxd replay` finds the bundled samples: `examples/data` walking up
 * from the CLI's directory, in the repository and in an installed package
 * (which ships `examples/` at its root), and nowhere else.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Samples from "../src/cli/Samples.ts"

const root = mkdtempSync(join(tmpdir(), "ctxd-samples-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe("samplesDir", () => {
  it("finds the repository's examples/data from the CLI module, and every group's paths exist there", () => {
    const dir = Samples.samplesDir()
    expect(dir).toBe(join(import.meta.dirname, "..", "..", "..", "examples", "data"))
    const paths = Samples.groups.flatMap((g) => g.paths)
    expect(paths.length).toBeGreaterThan(1)
    for (const path of paths) expect(existsSync(join(dir!, path)), path).toBe(true)
  })

  it("finds an installed package's examples/data, not one of the project above it", () => {
    const project = join(root, "project")
    const pkg = join(project, "node_modules", "ctxd")
    const cli = join(pkg, "services", "worker", "src", "cli")
    mkdirSync(cli, { recursive: true })
    mkdirSync(join(pkg, "examples", "data"), { recursive: true })
    mkdirSync(join(project, "examples", "data"), { recursive: true })
    expect(Samples.samplesDir(cli)).toBe(join(pkg, "examples", "data"))
    rmSync(join(pkg, "examples"), { recursive: true })
    expect(Samples.samplesDir(cli)).toBe(join(project, "examples", "data"))
  })

  it("is undefined when there is none up to the filesystem root; a file named examples/data does not count", () => {
    const bare = join(root, "bare", "a", "b")
    mkdirSync(join(root, "bare", "examples"), { recursive: true })
    writeFileSync(join(root, "bare", "examples", "data"), "")
    mkdirSync(bare, { recursive: true })
    // tmpdir() may itself sit below an examples/data: only assert when it does not
    if (Samples.samplesDir(tmpdir()) === undefined) expect(Samples.samplesDir(bare)).toBeUndefined()
    else expect(Samples.samplesDir(bare)).toBe(Samples.samplesDir(tmpdir()))
  })
})

describe("headline", () => {
  it("leads with the cost with ctxd and without, in all and per group", () => {
    const lines = Samples.headline([
      { name: "tau-bench airline", model: "gpt-4o", sessions: 8, ctxd: 0.68, full: 0.885 },
      { name: "SWE-agent", model: "claude-sonnet-4-5", sessions: 1, ctxd: 0.16, full: 0.16 },
    ])
    expect(lines[0]).toBe("bundled samples: $0.8400 with ctxd, $1.0450 without: 19.6 % less (without = the whole history sent every turn)")
    expect(lines[1]).toBe("  tau-bench airline, 8 sessions on gpt-4o: $0.6800 with ctxd, $0.8850 without: 23.2 % less")
    expect(lines[2]).toBe("  SWE-agent, 1 session on claude-sonnet-4-5: $0.1600 with ctxd, $0.1600 without: the same")
    expect(lines[3]).toContain("ctxd replay <files or dirs...>")
  })
})
