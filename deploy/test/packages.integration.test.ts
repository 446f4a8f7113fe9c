// The published packages as a user installs them: `npm run pack`'s tarballs
// (or those of CTXD_PACKAGES_DIR) installed with `npm install` into a scratch
// project in a temporary directory outside the repository. There the `ctxd`
// command replays its bundled samples as the repository's sources do, serves
// turns (its own subject root and schema) to a ContextClient TypeScript
// program run by Node 24, reloads its config file on its worker thread,
// inspects the stored session and checks a config file; the program
// type-checks against the published declarations. The container
// half (startCtxdStack from the installed @ctxd/testcontainers) is
// packages-containers.integration.test.ts.
import { TestNats } from "@ctxd/testing"
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ROOT } from "../packages/Packages.ts"
import * as Scratch from "../packages/Scratch.ts"

const work = mkdtempSync(join(tmpdir(), "ctxd-packages-"))
const app = join(work, "app")
const databaseUrl = process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres"
const root = TestNats.uniqueRoot()
const schema = `t_${randomBytes(6).toString("hex")}`

/** The client program, as a user writes it (type stripping runs it outside node_modules). */
const CLIENT = `import { ContextClient } from "@ctxd/client"
import type { Turn } from "@ctxd/contracts"

const client = await ContextClient.connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222", root: process.argv[2] })
try {
  const model = { provider: "openai", name: "gpt-4o" } as const
  const first: Turn.TurnReply = await client.turn("acme", "support-1", {
    format: "openai",
    model,
    messages: [{ role: "user", content: "Where is order 42?" }],
  })
  const second = await client.turn("acme", "support-1", {
    format: "openai",
    model,
    messages: [
      { role: "assistant", content: "It shipped yesterday." },
      { role: "user", content: "Thanks!" },
    ],
  })
  const body = second.request as { readonly messages: ReadonlyArray<{ readonly content: unknown }> }
  console.log(JSON.stringify({ first: first.report.messages.stored, stored: second.report.messages.stored, contents: body.messages.map((m) => m.content) }))
} finally {
  await client.close()
}
`

const timings: Record<string, number> = {}
let serve: ChildProcess | undefined
let serveOutput = ""

beforeAll(async () => {
  const t0 = performance.now()
  const { tarballs, built } = await Scratch.tarballs(join(work, "tarballs"))
  timings[built ? "build and pack" : "tarballs given"] = performance.now() - t0
  const t1 = performance.now()
  await Scratch.project(app, tarballs, ["ctxd", "@ctxd/client", "@ctxd/contracts"])
  timings["npm install"] = performance.now() - t1
  console.warn(
    `packages: ${Object.entries(timings)
      .map(([k, ms]) => `${k} ${(ms / 1000).toFixed(1)} s`)
      .join(", ")}`,
  )
}, 600_000)

afterAll(async () => {
  // each step on its own: a failing one leaves the others to run
  if (serve !== undefined && serve.exitCode === null && serve.signalCode === null) serve.kill("SIGKILL")
  await TestNats.dropStreams(root)
  const db = new pg.Client({ connectionString: databaseUrl })
  await db
    .connect()
    .then(() => db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`))
    .catch((e: unknown) => console.warn(`could not drop schema ${schema}: ${String(e)}`))
    .finally(() => db.end())
  Scratch.removeLater(work)
}, 60_000)

describe("the published packages, installed from their tarballs", () => {
  it("install outside the repository with what they need at run time", () => {
    expect(work.startsWith(ROOT)).toBe(false)
    const ctxd = join(app, "node_modules", "ctxd")
    expect(existsSync(join(ctxd, "examples", "data", "swe-agent"))).toBe(true)
    expect(existsSync(join(ctxd, "examples", "README.md"))).toBe(true)
    expect(existsSync(join(ctxd, "migrations"))).toBe(true)
    const manifest = JSON.parse(readFileSync(join(ctxd, "package.json"), "utf8")) as Record<string, unknown>
    expect(manifest).toMatchObject({ license: "MIT", bin: { ctxd: "dist/ctxd.js" }, engines: { node: expect.any(String) } })
    // no workspace package is a dependency: they are bundled
    const deps = Object.keys(manifest.dependencies as object)
    expect(deps.filter((d) => d.startsWith("@ctxd/"))).toEqual([])
    expect(existsSync(join(app, "node_modules", "@ctxd", "nats"))).toBe(false)
    expect(existsSync(join(app, "node_modules", "@ctxd", "contracts", "schemas", "turn-request.schema.json"))).toBe(true)
  })

  it("replays the bundled samples with `npx ctxd replay` as the repository's sources do", async () => {
    const [installed, repo] = await Promise.all([
      Scratch.run("npx", ["ctxd", "replay", "node_modules/ctxd/examples/data/swe-agent", "--json"], { cwd: app, timeoutMs: 120_000 }),
      Scratch.run(process.execPath, ["services/worker/bin/ctxd.ts", "replay", "examples/data/swe-agent", "--json"], {
        cwd: ROOT,
        timeoutMs: 120_000,
      }),
    ])
    const got = JSON.parse(installed.stdout) as { sessions: Array<{ id: string }>; totals: { turns: number; orphans: number } }
    expect(got.sessions.length).toBeGreaterThan(0)
    expect(got.totals.turns).toBeGreaterThan(got.sessions.length)
    expect(got.totals.orphans).toBe(0)
    expect(got).toEqual(JSON.parse(repo.stdout))
  }, 180_000)

  it("serves turns from `npx ctxd serve` to a ContextClient TypeScript program, reloads its config on its thread, inspects them", async () => {
    const config = join(app, "ctxd.yaml")
    writeFileSync(config, "defaults:\n  maskKeep: 3\n")
    serve = spawn("npx", ["ctxd", "serve"], {
      cwd: app,
      env: Scratch.nodeEnv({
        CTXD_SUBJECT_ROOT: root,
        DATABASE_URL: databaseUrl,
        CTXD_DB_SCHEMA: schema,
        CTXD_HTTP_PORT: "0",
        CTXD_CONFIG_FILE: config,
        LOG_LEVEL: "info",
      }),
      stdio: ["ignore", "pipe", "pipe"],
    })
    const onData = (c: Buffer) => void (serveOutput += c.toString("utf8"))
    serve.stdout!.on("data", onData)
    serve.stderr!.on("data", onData)
    const exited = new Promise<number | string>((resolve) => serve!.on("exit", (code, signal) => resolve(code ?? signal ?? "unknown")))
    const waitFor = async (text: string, ms: number) => {
      const until = Date.now() + ms
      while (!serveOutput.includes(text)) {
        if (Date.now() > until) throw new Error(`no "${text}" within ${ms} ms:\n${serveOutput.slice(-4000)}`)
        await new Promise((r) => setTimeout(r, 100))
      }
    }
    await waitFor("worker ready", 90_000)
    expect(serveOutput).toContain(`schema ${schema}: applied migrations`)
    expect(serveOutput).toContain("V8 flags set")

    writeFileSync(join(app, "client.ts"), CLIENT)
    const ran = await Scratch.run(process.execPath, ["client.ts", root], { cwd: app, timeoutMs: 60_000 })
    expect(JSON.parse(ran.stdout)).toEqual({ first: 1, stored: 3, contents: ["Where is order 42?", "It shipped yesterday.", "Thanks!"] })

    writeFileSync(config, "defaults:\n  maskKeep: 4\n")
    await waitFor("applied (reload 1)", 30_000)

    serve.kill("SIGTERM")
    expect(await exited).not.toBe("SIGKILL")
    await waitFor("released", 10_000)

    // what was stored and sent, read back from Postgres by the installed command
    const inspected = await Scratch.run("npx", ["ctxd", "inspect", "acme", "support-1", "--json"], {
      cwd: app,
      env: Scratch.nodeEnv({ DATABASE_URL: databaseUrl, CTXD_DB_SCHEMA: schema }),
      timeoutMs: 60_000,
    })
    const request = (JSON.parse(inspected.stdout) as { request: { messages: ReadonlyArray<{ content: unknown }> } }).request
    expect(request.messages.map((m) => m.content)).toEqual(["Where is order 42?", "It shipped yesterday.", "Thanks!"])
  }, 240_000)

  it("checks the example configuration file with `npx ctxd config check`", async () => {
    writeFileSync(join(app, "example.yaml"), readFileSync(join(ROOT, "deploy", "ctxd.example.yaml")))
    await Scratch.run("npx", ["ctxd", "config", "check", "example.yaml"], { cwd: app, timeoutMs: 60_000 })
    writeFileSync(join(app, "bad.yaml"), "defaults:\n  maskKeep: -1\n")
    const bad = await Scratch.run("npx", ["ctxd", "config", "check", "bad.yaml"], { cwd: app, timeoutMs: 60_000, allowFailure: true })
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain("maskKeep")
  }, 120_000)

  it("type-checks a consumer's TypeScript against the published declarations", async () => {
    writeFileSync(join(app, "client.ts"), CLIENT)
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2023",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          allowImportingTsExtensions: true,
          typeRoots: [join(ROOT, "node_modules", "@types")],
          types: ["node"],
        },
        files: ["client.ts"],
      }),
    )
    await Scratch.run(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], {
      cwd: app,
      timeoutMs: 120_000,
    })
  }, 150_000)
})
