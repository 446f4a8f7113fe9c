// `--help` answers without side effects, and the worker stops on SIGTERM,
// SIGINT or SIGHUP sent to the process that was started (`npm run start`,
// `npx ctxd serve` or the worker itself), and on SIGHUP to its whole process
// group (what a closed terminal sends). Each launcher is spawned in a process group of
// its own, so the test can see that nothing of the group is left afterwards.
import { TestNats } from "@ctxd/testing"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"

const ROOT = join(import.meta.dirname, "..", "..", "..")
const BIN = join(import.meta.dirname, "..", "bin", "ctxd.ts")
const MAIN = join(import.meta.dirname, "..", "src", "main.ts")
const DATABASE_URL = process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres"
const schema = `t_${randomBytes(6).toString("hex")}`
const roots: Array<string> = []

afterAll(async () => {
  const client = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 5_000 })
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
  } finally {
    await client.end()
  }
  for (const root of roots) await TestNats.dropStreams(root)
})

/** Nothing listens here: a command that connects fails or hangs, one that answers `--help` does not. */
const closed = { DATABASE_URL: "postgresql://postgres@127.0.0.1:1/postgres", NATS_URL: "nats://127.0.0.1:1", CTXD_EMBEDDED_DB: "off" }

const run = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [...args],
      { encoding: "utf8", timeout: 15_000, cwd: ROOT, env: { ...process.env, ...closed } },
      (error, stdout, stderr) => resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr }),
    )
  })

describe("--help", { timeout: 60_000 }, () => {
  it("prints each command's usage and exits 0 at once, connecting to nothing", async () => {
    const cases: ReadonlyArray<[ReadonlyArray<string>, string]> = [
      [[BIN, "--help"], "ctxd replay [files or dirs...]"],
      [[BIN, "serve", "--help"], "usage: ctxd serve"],
      [[BIN, "serve", "-h"], "usage: ctxd serve"],
      [[BIN, "replay", "--help"], "--context-window N"],
      [[BIN, "inspect", "--help"], "--turn ID"],
      [[BIN, "config", "--help"], "usage: ctxd config check <file>"],
      [[BIN, "config", "check", "--help"], "usage: ctxd config check <file>"],
      [[MAIN, "--help"], "usage: ctxd serve"],
    ]
    for (const [args, usage] of cases) {
      const started = Date.now()
      const out = await run(args)
      const name = args.slice(1).join(" ")
      expect(out.code, `${name}: ${out.stderr}`).toBe(0)
      expect(out.stdout, name).toContain(usage)
      expect(out.stdout, name).toContain("--help")
      expect(Date.now() - started, name).toBeLessThan(10_000)
    }
  })

  it("rejects an unknown option with exit 2 and the command's usage on stderr", async () => {
    for (const [args, usage] of [
      [[BIN, "serve", "--bogus"], "usage: ctxd serve"],
      [[BIN, "replay", "x.json", "--bogus"], "usage: ctxd replay"],
      [[BIN, "inspect", "t", "s", "--bogus"], "usage: ctxd inspect"],
    ] as const) {
      const out = await run(args)
      expect(out.code, args.join(" ")).toBe(2)
      expect(out.stderr, args.join(" ")).toContain(usage)
    }
  })
})

/** Whether any process of the group `pgid` is alive. */
const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
    return true
  } catch {
    return false
  }
}

const launchers: Record<string, () => ChildProcess> = {
  "npm run start": () => spawn("npm", ["run", "start"], spawnOptions()),
  "npx ctxd serve": () => spawn("npx", ["ctxd", "serve"], spawnOptions()),
  "the worker itself": () => spawn(process.execPath, [MAIN], spawnOptions()),
}

let env: Record<string, string> = {}
const spawnOptions = () => ({
  cwd: ROOT,
  env: { ...process.env, ...env },
  detached: true,
  stdio: ["ignore", "pipe", "pipe"] as Array<"ignore" | "pipe">,
})

const until = async (what: string, test: () => boolean, timeoutMs: number, output: () => string) => {
  const deadline = Date.now() + timeoutMs
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms:\n${output()}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

describe("stopping the worker", { timeout: 120_000 }, () => {
  for (const [name, launch] of Object.entries(launchers)) {
    for (const [signal, group] of [
      ["SIGTERM", false],
      ["SIGINT", false],
      ["SIGHUP", false],
      ["SIGHUP", true],
    ] as const) {
      // npx runs `sh -c "ctxd serve"` and forwards SIGINT to that shell only; a non-interactive
      // `sh -c` (dash, bash) catches SIGINT while it waits for its command and acts on it only
      // once the command has exited, and npx waits for the shell: nothing reaches the worker
      // and nothing exits. Ctrl-C signals the whole foreground group, the worker with it.
      if (name === "npx ctxd serve" && signal === "SIGINT") continue
      const to = group ? "the process group (a closed terminal)" : "the process started"
      it(`${name}: ${signal} to ${to} stops the worker gracefully and leaves no process`, async () => {
        const root = TestNats.uniqueRoot()
        roots.push(root)
        env = { DATABASE_URL, CTXD_DB_SCHEMA: schema, CTXD_SUBJECT_ROOT: root, CTXD_HTTP_PORT: "0", LOG_LEVEL: "info" }
        const child = launch()
        let text = ""
        child.stdout!.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
        child.stderr!.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
        let exited = false
        child.on("exit", () => (exited = true))
        // every process holding the output pipes has exited and its last lines are read
        let drained = false
        child.on("close", () => (drained = true))
        const output = () => text
        try {
          await until("the worker was not ready", () => text.includes("worker ready"), 60_000, output)
          if (group) process.kill(-child.pid!, signal)
          else child.kill(signal)
          await until("the process started did not exit", () => exited, 20_000, output)
          await until("a process of the group was still running", () => !groupAlive(child.pid!), 20_000, output)
          await until("the output pipes were not closed", () => drained, 5_000, output)
          expect(text).toContain("shutting down: not ready; no new turns")
          expect(text).toMatch(/released \d+ shards/)
        } finally {
          if (groupAlive(child.pid!)) process.kill(-child.pid!, "SIGKILL")
        }
      })
    }
  }
})
