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
      { path: "foo", line: 12, message: 'is unexpected, expected: "defaults" | "tenants" | "agents" | "gateway"' },
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

/** A "billion laughs" file: each level lists the one before nine times (9^9 nodes once expanded, a few hundred bytes written). */
const aliasBomb = () => {
  let text = "defaults:\n  agent: x\nl0: &l0 [x, x, x, x, x, x, x, x, x]\n"
  for (let i = 1; i < 9; i++) text += `l${i}: &l${i} [${Array.from({ length: 9 }, () => `*l${i - 1}`).join(", ")}]\n`
  return text
}

describe("ConfigFile.decode: whatever the file holds, an issue and never a throw", () => {
  it("an unresolved alias is an issue at its line and column", () => {
    expect(issues("defaults:\n  windowMessages: *w\n")).toEqual([
      { path: "", line: 2, message: "YAML: the alias *w names no anchor defined before it" },
    ])
    expect(ConfigFile.decode("defaults:\n  windowMessages: *w\n", "f.yaml")).toMatchObject({
      left: { message: "f.yaml:2:19: (file): YAML: the alias *w names no anchor defined before it" },
    })
    // an alias inside the node it names (a cycle) is unresolved too
    expect(issues("defaults: &d\n  loop: *d\n")).toEqual([
      { path: "", line: 2, message: "YAML: the alias *d names no anchor defined before it" },
    ])
  })

  it("aliases still work within the bound; an alias bomb is refused without expanding it", () => {
    expect(ok("defaults: &c { maskKeep: 3 }\nagents:\n  coder: *c\n").agents).toEqual({ coder: { maskKeep: 3 } })
    const started = performance.now()
    expect(issues(aliasBomb())).toEqual([
      {
        path: "",
        line: expect.any(Number),
        message: `YAML: aliases expand the file to more than ${ConfigFile.limits.maxNodes} nodes`,
      },
    ])
    expect(performance.now() - started).toBeLessThan(1_000)
  })

  it(`nesting deeper than limits.maxDepth is refused at the first node too deep`, () => {
    const depth = ConfigFile.limits.maxDepth + 1
    expect(issues(`defaults:\n  agent: ${"[".repeat(depth)}${"]".repeat(depth)}\n`)).toEqual([
      { path: "", line: 2, message: `YAML: nested more than ${ConfigFile.limits.maxDepth} levels deep` },
    ])
    // far deeper than the parser's own stack: still one issue
    expect(issues(`defaults:\n  agent: ${"[".repeat(20_000)}${"]".repeat(20_000)}\n`)).toEqual([
      { path: "", line: expect.any(Number), message: expect.stringMatching(/^YAML: nested (more than \d+ levels|too) deep/) },
    ])
  })

  it("a file larger than limits.maxBytes is refused before it is parsed", () => {
    const text = `defaults:\n  agent: ${"x".repeat(ConfigFile.limits.maxBytes)}\n`
    expect(ConfigFile.decode(text, "f.yaml")).toMatchObject({
      left: {
        message: `f.yaml: (file): ${Buffer.byteLength(text)} bytes, more than the ${ConfigFile.limits.maxBytes} a configuration file may have`,
      },
    })
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
