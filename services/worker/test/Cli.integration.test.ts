import { Workloads } from "@ctxd/testing"
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"

const BIN = join(import.meta.dirname, "..", "bin", "ctxd.ts")
const ctxd = (...args: Array<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [BIN, ...args], { encoding: "utf8", timeout: 120_000, maxBuffer: 64 << 20 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr }),
    )
  })

const dir = mkdtempSync(join(tmpdir(), "ctxd-cli-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

// A slice of the bundled samples (examples/data): two SWE-agent trajectories and three tau-bench sessions as OpenAI Chat JSONL.
const swe = ["ctf_pwn_warmup.traj", "function_calling_simple.traj"].map((f) => join(Workloads.dataDir(), "swe-agent", f))
const chat = join(dir, "chat.jsonl")
writeFileSync(
  chat,
  Workloads.tauBenchSessions()
    .slice(0, 3)
    .map((s) =>
      JSON.stringify({ messages: [{ role: "system", content: s.system }, ...s.turns.flatMap((t) => t.messages)], tools: s.tools }),
    )
    .join("\n"),
)
const slice = [...swe, chat]

// Each test runs the CLI as processes, one after the other: its bound is the
// processes' own (120 s each), not the project's default for one test.
describe("ctxd command line", { timeout: 120_000 }, () => {
  it("prints the usage and exits 2 without a command, 0 for help", async () => {
    const none = await ctxd()
    expect(none.code).toBe(2)
    expect(none.stderr).toContain("ctxd replay [files or dirs...]")
    const help = await ctxd("help")
    expect(help.code).toBe(0)
    expect(help.stdout).toContain("ctxd inspect <tenant> <session>")
  })

  it("exits 2 with what to do on usage errors", async () => {
    for (const args of [
      ["frobnicate"],
      ["replay", "--sessions", "many"],
      ["replay", join(dir, "missing.json")],
      ["replay", chat, "--format", "xml"],
      ["replay", chat, "--window", "0"],
      ["inspect", "t"],
    ]) {
      const out = await ctxd(...args)
      expect(out.code, args.join(" ")).toBe(2)
      expect(out.stderr, args.join(" ")).toContain("ctxd help")
    }
  })

  it("replays a slice of the bundled samples: a table per session and in total, no orphaned tool pairs", async () => {
    const out = await ctxd("replay", ...slice)
    expect(out.code, out.stderr).toBe(0)
    const lines = out.stdout.split("\n")
    for (const id of ["ctf_pwn_warmup", "function_calling_simple", "chat-1", "chat-2", "chat-3"])
      expect(lines.some((l) => l.startsWith(id))).toBe(true)
    const header = lines.find((l) => l.startsWith("session"))!
    expect(header).toMatch(/turns +full tok +ctxd tok +fewer +cached +full \$ +ctxd \$ +saved +flags/)
    expect(lines.find((l) => l.startsWith("all sessions"))).toBeDefined()
    expect(out.stdout).not.toContain("FAILED")
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(120)
  })

  it("without files replays the bundled samples, each group for its model, leading with the cost with ctxd and without", async () => {
    const out = await ctxd("replay")
    expect(out.code, out.stderr).toBe(0)
    const lines = out.stdout.split("\n")
    const cost = String.raw`\$\d+\.\d{4} with ctxd, \$\d+\.\d{4} without: (\d+\.\d % (less|more)|the same)`
    expect(lines[0]).toMatch(new RegExp(`^bundled samples: ${cost}`))
    expect(lines[1]).toMatch(new RegExp(`^  tau-bench airline, 8 sessions on gpt-5.6-terra: ${cost}$`))
    expect(lines[2]).toMatch(new RegExp(`^  SWE-agent, 5 sessions on claude-sonnet-5-5: ${cost}$`))
    expect(lines.filter((l) => l.startsWith("tau-bench-airline-gpt4o-"))).toHaveLength(8)
    // each group's table: its sessions between the rules, none flagged (no repair, nothing over the limit, no orphan)
    const rules = lines.flatMap((l, i) => (l.startsWith("-----") ? [i] : []))
    expect(rules).toHaveLength(4)
    const rows = [lines.slice(rules[0]! + 1, rules[1]), lines.slice(rules[2]! + 1, rules[3])]
    expect(rows.map((r) => r.length)).toEqual([8, Workloads.sweAgentSessions().length])
    for (const row of rows.flat()) expect(row.trimEnd(), row).toMatch(/%$/)
    expect(lines.filter((l) => l.startsWith("all sessions"))).toHaveLength(2)

    // --sessions counts across the groups; --model applies to all; --json: one report per group
    const json = await ctxd("replay", "--sessions", "9", "--model", "gpt-4o", "--json")
    expect(json.code, json.stderr).toBe(0)
    const reports = JSON.parse(json.stdout) as Array<{ samples: string; model: { name: string }; sessions: Array<unknown> }>
    expect(reports.map((r) => [r.samples, r.model.name, r.sessions.length])).toEqual([
      ["tau-bench airline", "gpt-4o", 8],
      ["SWE-agent", "gpt-4o", 1],
    ])
  })

  it("--json gives the same replay for machines", async () => {
    const out = await ctxd("replay", ...slice, "--json", "--model", "gpt-4o")
    expect(out.code, out.stderr).toBe(0)
    const report = JSON.parse(out.stdout) as {
      model: { name: string }
      format: string
      sessions: Array<{ id: string; turns: Array<{ sentTokens: number; fullTokens: number; orphans: number }>; totals: { turns: number } }>
      totals: { turns: number; orphans: number; fullTokens: number; sentTokens: number; cacheHitShare: number }
    }
    expect(report.model.name).toBe("gpt-4o")
    expect(report.format).toBe("openai")
    expect(report.sessions).toHaveLength(5)
    // a chat log's turns end at its assistant messages: the flattened sessions lost their last one (their last turn)
    const expected =
      Workloads.tauBenchSessions()
        .slice(0, 3)
        .reduce((n, s) => n + s.turns.length - 1, 0) +
      Workloads.sweAgentSessions()
        .filter((s) => ["ctf_pwn_warmup", "function_calling_simple"].includes(s.id))
        .reduce((n, s) => n + s.turns.length, 0)
    expect(report.totals.turns).toBe(expected)
    expect(report.totals.orphans).toBe(0)
    expect(report.totals.sentTokens).toBeLessThanOrEqual(report.totals.fullTokens)
    expect(report.totals.cacheHitShare).toBeGreaterThan(0)
    for (const s of report.sessions) for (const t of s.turns) expect(t.sentTokens).toBeLessThanOrEqual(t.fullTokens)
  })

  it("--html writes a self-contained report with charts", async () => {
    const file = join(dir, "report.html")
    const out = await ctxd("replay", ...swe, "--html", file)
    expect(out.code, out.stderr).toBe(0)
    const html = readFileSync(file, "utf8")
    expect(html).toContain("<svg")
    expect(html).toContain("Cumulative cost")
    expect(html).toContain('<section id="answer">')
    expect(html).not.toMatch(/<script|https?:\/\/(?!www\.w3\.org)/)
  })

  it("--window changes what is sent (a turn option reaches the turn stages)", async () => {
    const sent = async (...extra: Array<string>) =>
      (JSON.parse((await ctxd("replay", swe[0]!, "--json", ...extra)).stdout) as { totals: { sentTokens: number } }).totals.sentTokens
    expect(await sent("--window", "4", "--window-step", "2")).toBeLessThan(await sent())
  })

  it("config check: 0 and the hash for a valid file, 1 with the key path and line for an invalid one", async () => {
    const good = await ctxd("config", "check", join(import.meta.dirname, "..", "..", "..", "deploy", "ctxd.example.yaml"))
    expect(good.code, good.stderr).toBe(0)
    expect(good.stdout).toMatch(/valid \(hash [0-9a-f]+\)/)
    const bad = join(dir, "bad.yaml")
    writeFileSync(bad, "defaults:\n  toolCompression: squeeze\n")
    const out = await ctxd("config", "check", bad)
    expect(out.code).toBe(1)
    expect(out.stderr).toContain(`${bad}:2:`)
    expect(out.stderr).toContain("defaults.toolCompression")
  })

  it("--config: the file's defaults reach the replay's turns; an invalid file is a usage error", async () => {
    const file = join(dir, "narrow.yaml")
    writeFileSync(file, "defaults:\n  windowMessages: 4\n  windowStep: 2\n")
    const sent = async (...extra: Array<string>) =>
      (JSON.parse((await ctxd("replay", swe[0]!, "--json", ...extra)).stdout) as { totals: { sentTokens: number } }).totals.sentTokens
    expect(await sent("--config", file)).toBeLessThan(await sent())
    const bad = join(dir, "bad-config.yaml")
    writeFileSync(bad, "defaults:\n  windowMessages: 0\n")
    const out = await ctxd("replay", swe[0]!, "--config", bad)
    expect(out.code).toBe(2)
    expect(out.stderr).toContain("defaults.windowMessages")
  })

  it("skips files that are not logs and fails when nothing is left", async () => {
    const junk = join(dir, "junk.json")
    writeFileSync(junk, JSON.stringify({ hello: "world" }))
    const out = await ctxd("replay", junk)
    expect(out.code).toBe(1)
    expect(out.stderr).toContain(`skipped ${junk}`)
    expect(out.stderr).toContain("no sessions found")
  })
})
