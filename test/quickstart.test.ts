// The README's quickstart works on a fresh clone with nothing beside it (no
// full data set): the repository's HEAD cloned into an empty directory, `npm ci`,
// then `npx ctxd replay`, which must exit 0 and lead with the cost with ctxd
// and without. The last command must be `npm run test:unit`, a subset of what
// CI runs (`npm test` in .ci/run); it is not run here (minutes). The README
// is README.md, or CTXD_QUICKSTART_README (another copy to check).
import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Quickstart from "./Quickstart.ts"

const ROOT = join(import.meta.dirname, "..")
const README = process.env.CTXD_QUICKSTART_README ?? join(ROOT, "README.md")

const sh = (command: string, args: ReadonlyArray<string>, cwd: string, timeout: number) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    // the clone reads nothing of this checkout's environment that points at data or a schema
    const { CTXD_DATA_DIR: _data, ...env } = process.env
    execFile(command, [...args], { cwd, env, encoding: "utf8", timeout, maxBuffer: 64 << 20 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr }),
    )
  })

describe("quickstart block", () => {
  const readme = (text: string) => `# ctxd\n\nintro\n\n${text}\n\n## more\n`
  it("reads the commands between the markers, and fails saying what is missing", () => {
    const block = ["<!-- quickstart -->", "```sh", "npm ci", "", "npx ctxd replay", "npm run test:unit", "```", "<!-- /quickstart -->"]
    expect(Quickstart.commands(readme(block.join("\n")))).toEqual(["npm ci", "npx ctxd replay", "npm run test:unit"])
    expect(() => Quickstart.commands(readme("```sh\nnpm ci\n```"), "X.md")).toThrow(/X.md has no quickstart block: .*<!-- quickstart -->/)
    expect(() => Quickstart.commands(readme("<!-- quickstart -->\nnpm ci\n<!-- /quickstart -->"))).toThrow(/no fenced code block/)
  })

  it("tells a narrowing script from one that runs something else", () => {
    const unit = "vitest run --project '!@ctxd/integration' --exclude '**/*.integration.test.ts'"
    expect(Quickstart.narrows(unit, "vitest run")).toBe(true)
    expect(Quickstart.narrows("vitest run", "vitest run")).toBe(false)
    expect(Quickstart.narrows("vitest run --coverage", "vitest run")).toBe(false)
    expect(Quickstart.narrows("vitest run --project", "vitest run")).toBe(false)
    expect(Quickstart.narrows("jest --project x", "vitest run")).toBe(false)
  })
})

describe("the README's quickstart on a fresh clone", { timeout: 300_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "ctxd-quickstart-"))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("npm ci, then npx ctxd replay leads with the cost with ctxd and without; the tests are npm run test:unit", async () => {
    const commands = Quickstart.commands(readFileSync(README, "utf8"), README)
    expect(commands).toEqual(["npm ci", "npx ctxd replay", "npm run test:unit"])

    const clone = join(dir, "ctxd")
    const cloned = await sh("git", ["clone", "--quiet", "--local", ROOT, clone], dir, 60_000)
    expect(cloned.code, cloned.stderr).toBe(0)
    expect(existsSync(join(dir, "shared")) || existsSync(join(clone, "..", "shared"))).toBe(false)

    // npm ci as written, with the flags that keep it off the network when the cache has everything
    const ci = await sh("npm", ["ci", "--prefer-offline", "--no-audit", "--no-fund"], clone, 240_000)
    expect(ci.code, ci.stderr.slice(-2_000)).toBe(0)

    const replay = await sh("npx", ["ctxd", "replay"], clone, 120_000)
    expect(replay.code, replay.stderr.slice(-2_000)).toBe(0)
    const first = replay.stdout.split("\n").find((line) => line.trim() !== "")
    expect(first).toMatch(/\$\d[\d,.]* with ctxd\b.*\$\d[\d,.]* without\b/)

    const pkg = JSON.parse(readFileSync(join(clone, "package.json"), "utf8")) as { scripts: Record<string, string> }
    expect(Quickstart.narrows(pkg.scripts["test:unit"]!, pkg.scripts["test"]!)).toBe(true)
    expect(readFileSync(join(clone, ".ci", "run"), "utf8")).toMatch(/^npm test\b/m)
  })
})
