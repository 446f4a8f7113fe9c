import { execFile, execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as ReplayHtml from "../src/cli/ReplayHtml.ts"
import { replay, SAMPLES, sessionsOf } from "./ReplayFixtures.ts"

/** The first browser on PATH that takes headless screenshots (`apt-get install -y chromium`), if any. */
const browser = ["chromium", "chromium-browser", "google-chrome"].find((name) => {
  try {
    execFileSync("sh", ["-c", `command -v ${name}`], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
})

const dir = mkdtempSync(join(tmpdir(), "ctxd-replay-shot-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const WIDTH = 1400
const HEIGHT = 2000

describe("the replay page in a browser", { timeout: 120_000 }, () => {
  it.skipIf(browser === undefined)(
    browser === undefined
      ? "renders to a screenshot (skipped: no chromium on PATH; apt-get install -y chromium)"
      : `renders to a non-empty screenshot with ${browser}`,
    async () => {
      const run = await replay("gpt-4o", sessionsOf([join(SAMPLES, "tau-bench-airline-gpt4o.json")]))
      const page = join(dir, "report.html")
      writeFileSync(page, ReplayHtml.page([run]))
      const png = join(dir, "report.png")
      await new Promise<void>((resolve, reject) =>
        execFile(
          browser!,
          [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            `--screenshot=${png}`,
            `--window-size=${WIDTH},${HEIGHT}`,
            pathToFileURL(page).href,
          ],
          { timeout: 90_000 },
          (error) => (error === null ? resolve() : reject(new Error(`${browser} failed: ${error.message}`))),
        ),
      )
      const bytes = readFileSync(png)
      // a PNG of the window's size, and not a blank one (a white page compresses to a few kB)
      expect(bytes.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))
      expect([bytes.readUInt32BE(16), bytes.readUInt32BE(20)]).toEqual([WIDTH, HEIGHT])
      expect(statSync(png).size).toBeGreaterThan(50_000)
    },
  )
})
