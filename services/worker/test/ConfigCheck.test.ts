// `npm run config:check`: the example file is valid; a broken one is reported by key path and line, with exit code 1.
import { ConfigFile, RuntimeConfig } from "@ctxd/config"
import { WorkerProcess } from "@ctxd/testing"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as ConfigCheck from "../src/ConfigCheck.ts"

const example = join(WorkerProcess.repoRoot, "deploy", "ctxd.example.yaml")
const dir = mkdtempSync(join(tmpdir(), "ctxd-config-check-"))
const write = (name: string, text: string) => {
  const file = join(dir, name)
  writeFileSync(file, text)
  return file
}
const run = (...files: Array<string>) =>
  spawnSync(process.execPath, [join(WorkerProcess.repoRoot, "services/worker/scripts/config-check.ts"), ...files], { encoding: "utf8" })

describe("config:check", () => {
  it("deploy/ctxd.example.yaml is valid", async () => {
    const checked = await Effect.runPromise(ConfigCheck.check(example))
    expect(checked).toEqual({ ok: true, lines: [expect.stringMatching(/valid .*: 8 environment keys, 2 tenants, 2 agents$/)] })
  })

  it("names the key path and line of each problem: sections by the request Schemas, environment keys by the worker's readers", async () => {
    const sections = write("sections.yaml", "defaults:\n  maskKeep: -1\nagents:\n  coder:\n    promptCache: maybe\n")
    expect((await Effect.runPromise(ConfigCheck.check(sections))).lines).toEqual([
      `${sections}:2:3: defaults.maskKeep: Expected a number between 0 and 1000000`,
      `${sections}:5:5: agents.coder.promptCache: Expected boolean`,
    ])
    const knobs = write("knobs.yaml", "NATS_URL: nats://x\nCTXD_MAX_CONCURRENT: many\nCTXD_HTTP_PORT: 70000\n")
    expect(await Effect.runPromise(ConfigCheck.check(knobs))).toEqual({
      ok: false,
      lines: [
        `${knobs}:2:1: CTXD_MAX_CONCURRENT: Expected an integer value but received "many"`,
        `${knobs}:3:1: CTXD_HTTP_PORT: a port number 0..65535 (0: off)`,
      ],
    })
    // a rule across two keys names the key that breaks it
    const retention = write("retention.yaml", "CTXD_REPLY_RETENTION: 24h\nCTXD_TURN_RETENTION: 1h\n")
    expect((await Effect.runPromise(ConfigCheck.check(retention))).lines).toEqual([
      `${retention}:2:1: CTXD_TURN_RETENTION: CTXD_TURN_RETENTION (3600 s) must not be shorter than CTXD_REPLY_RETENTION (86400 s)`,
    ])
  })

  it("an unresolved alias or an oversized file is a located problem, not a crash", async () => {
    const alias = write("alias.yaml", "defaults:\n  windowMessages: *w\n")
    expect(await Effect.runPromise(ConfigCheck.check(alias))).toEqual({
      ok: false,
      lines: [`${alias}:2:19: (file): YAML: the alias *w names no anchor defined before it`],
    })
    const huge = write("huge.yaml", `defaults:\n  agent: ${"x".repeat(ConfigFile.limits.maxBytes)}\n`)
    expect(await Effect.runPromise(ConfigCheck.check(huge))).toEqual({
      ok: false,
      lines: [expect.stringMatching(/^.*huge\.yaml: \(file\): \d+ bytes, more than the \d+ a configuration file may have$/)],
    })
  })

  it("checks the CTXD_TENANTS_FILE the file names, and prints the hash a worker reports", async () => {
    const tenants = write("tenants.json", '{\n  "acme": { "share": { "turnsPercent": 500 } }\n}')
    const file = write("with-tenants.yaml", `CTXD_TENANTS_FILE: ${tenants}\n`)
    expect((await Effect.runPromise(ConfigCheck.check(file))).lines).toEqual([
      `${tenants}:2:24: acme.share.turnsPercent: Expected a number between 1 and 100`,
    ])
    writeFileSync(tenants, JSON.stringify({ acme: { maskKeep: 1 }, beta: {} }))
    const { snapshot } = await Effect.runPromise(RuntimeConfig.load({ configFile: file, tenantsFile: tenants }))
    expect(await Effect.runPromise(ConfigCheck.check(file))).toEqual({
      ok: true,
      lines: [`${file}: valid (hash ${snapshot.hash}): 1 environment keys, 2 tenants, 0 agents`],
    })
  })

  it("exit codes: 0 valid, 1 not valid, 2 no file", () => {
    const good = run(example)
    expect(good.status).toBe(0)
    expect(good.stdout).toContain("valid")
    const bad = run(example, write("bad.json", '{\n  "defaults": {"windowMessages": 0}\n}'))
    expect(bad.status).toBe(1)
    expect(bad.stderr).toContain("bad.json:2:16: defaults.windowMessages: Expected a number greater than or equal to 1")
    expect(run().status).toBe(2)
  })
})
