import { ConfigFile } from "@ctxd/config"
import { Either } from "effect"
import { describe, expect, it } from "vitest"

const ok = (text: string) => {
  const decoded = ConfigFile.decode(text, "ctxd.yaml")
  if (Either.isLeft(decoded)) throw new Error(decoded.left.message)
  return decoded.right
}
const issues = (text: string) => {
  const decoded = ConfigFile.decode(text, "ctxd.yaml")
  if (Either.isRight(decoded)) throw new Error("decoded")
  return decoded.left.issues.map((i) => ({ path: i.path.join("."), line: i.line, message: i.message }))
}

describe("ConfigFile.decode", () => {
  it("reads the environment-style keys, defaults, tenants and agents", () => {
    const contents = ok(`
NATS_URL: nats://nats:4222
CTXD_MAX_CONCURRENT: 8
CTXD_LEGACY_SUBJECTS: false
CTXD_DEFAULT_TOOLSETS: [github, jira]
defaults:
  toolCompression: minify
  loop: { policy: escalate }
tenants:
  acme:
    maskKeep: 5
    providers: { anthropic: { apiKeyEnv: ACME_ANTHROPIC_KEY } }
    share: { turnsPercent: 50 }
agents:
  coder:
    windowMessages: 12
`)
    expect(contents.knobs).toEqual({
      NATS_URL: "nats://nats:4222",
      CTXD_MAX_CONCURRENT: "8",
      CTXD_LEGACY_SUBJECTS: "false",
      CTXD_DEFAULT_TOOLSETS: "github,jira",
    })
    expect(contents.defaults).toEqual({ toolCompression: "minify", loop: { policy: "escalate" } })
    expect(contents.tenants).toEqual({
      acme: { maskKeep: 5, providers: { anthropic: { apiKeyEnv: "ACME_ANTHROPIC_KEY" } }, share: { turnsPercent: 50 } },
    })
    expect(contents.agents).toEqual({ coder: { windowMessages: 12 } })
  })

  it("still reads a JSON file of environment keys (the first form of CTXD_CONFIG_FILE)", () => {
    expect(ok(JSON.stringify({ NATS_URL: "nats://x:4222", CTXD_WINDOW_MESSAGES: 30 }))).toEqual({
      knobs: { NATS_URL: "nats://x:4222", CTXD_WINDOW_MESSAGES: "30" },
      defaults: {},
      tenants: {},
      agents: {},
    })
    expect(ok("")).toEqual(ConfigFile.empty)
  })

  it("names each problem's key path and line, one issue per key", () => {
    expect(
      issues(`defaults:
  toolCompression: mini
  windowMesages: 3
tenants:
  "a b":
    maskKeep: -1
agents:
  coder:
    agent: other
    loop:
      policy: never
foo: 1
CTXD_X: { a: 1 }
`),
    ).toEqual([
      { path: "defaults.toolCompression", line: 2, message: 'Expected "none" | "minify" | "truncate" | "aggressive"' },
      { path: "defaults.windowMesages", line: 3, message: expect.stringMatching(/^is unexpected, expected: "windowMessages"/) },
      { path: "tenants.a b", line: 5, message: "not a tenant id ([A-Za-z0-9_-]{1,128})" },
      { path: "tenants.a b.maskKeep", line: 6, message: "Expected a number between 0 and 1000000" },
      // an agent's section cannot name another agent
      { path: "agents.coder.agent", line: 9, message: expect.stringMatching(/^is unexpected/) },
      { path: "agents.coder.loop.policy", line: 11, message: 'Expected "nudge" | "escalate" | "off"' },
      { path: "foo", line: 12, message: 'is unexpected, expected: "defaults" | "tenants" | "agents"' },
      { path: "CTXD_X", line: 13, message: "an environment key's value is a string, a number, a boolean or a list of them" },
    ])
  })

  it("locates errors in JSON as well, and YAML syntax errors", () => {
    expect(issues(`{\n  "defaults": {\n    "maskKeep": "x"\n  }\n}`)).toEqual([
      { path: "defaults.maskKeep", line: 3, message: "Expected number" },
    ])
    expect(issues("defaults: [\n")).toEqual([{ path: "", line: 2, message: expect.stringMatching(/^YAML: /) }])
    expect(issues("a: 1\na: 2\n")[0]).toMatchObject({ line: 2, message: expect.stringMatching(/unique/) })
    expect(issues("- a\n")).toEqual([{ path: "", line: 1, message: "the file must be a map of keys" }])
  })

  it("never puts a value of the file in a message (it may hold secrets)", () => {
    const decoded = ConfigFile.decode(
      "NATS_PASSWORD: hunter2-secret\ntenants:\n  acme:\n    providers: { anthropic: { apiKeyEnv: sk-ant-hunter2 } }\n",
      "f.yaml",
    )
    expect(Either.isLeft(decoded)).toBe(true)
    if (Either.isRight(decoded)) return
    expect(decoded.left.message).toContain("f.yaml:4:")
    expect(decoded.left.message).toContain("tenants.acme.providers.anthropic")
    expect(decoded.left.message).not.toContain("hunter2")
  })
})

describe("ConfigFile.decodeTenants (CTXD_TENANTS_FILE)", () => {
  it("reads an options-only file and a full tenant section, and rejects bad ids with their line", () => {
    const decoded = ConfigFile.decodeTenants(
      JSON.stringify({ strict: { toolCompression: "aggressive" }, acme: { share: { bytesPercent: 20 } } }),
      "t.json",
    )
    expect(decoded).toEqual(Either.right({ strict: { toolCompression: "aggressive" }, acme: { share: { bytesPercent: 20 } } }))
    const bad = ConfigFile.decodeTenants('{\n  "ok": {},\n  "bad tenant!": {}\n}', "t.json")
    expect(Either.isLeft(bad) && bad.left.message).toBe("t.json:3:3: bad tenant!: not a tenant id ([A-Za-z0-9_-]{1,128})")
  })
})
