/**
 * The sessions the gateway names from each real CLI's own traffic, with
 * the session rules of `@ctxd/gateway`'s `Session` (gw-session's
 * `SessionOf.forServer`) as the server's `sessionOf`: Claude Code's
 * `x-claude-code-session-id` and its title call taken as side (a session
 * of its own next to the main one), Codex's
 * `session-id`, Gemini CLI's derived session and its routing call taken as
 * side. Skipped when the installed gateway has no such rules yet, and per
 * CLI when the CLI is not installed.
 */
import * as Gateway from "@ctxd/gateway"
import { type GatewayServer, type ServerOptions, startServer } from "@ctxd/gateway"
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { binary } from "./AgentClis.ts"
import * as CliRun from "./CliRun.ts"
import * as StubPort from "./StubPort.ts"

type SessionOf = NonNullable<ServerOptions["sessionOf"]>

/** `Session.SessionOf.forServer` when this build of the gateway has it. */
const rules = ((): SessionOf | undefined => {
  const session = (Gateway as Record<string, unknown>)["Session"] as { SessionOf?: { forServer?: () => SessionOf } } | undefined
  return session?.SessionOf?.forServer?.()
})()

let fake: FakeProvider.FakeProviderServer
let gateway: GatewayServer
let port: StubPort.StubPort

beforeAll(async () => {
  if (rules === undefined) return
  fake = await FakeProvider.start()
  port = StubPort.make()
  gateway = await startServer({
    turns: port,
    upstreams: { anthropic: fake.url, openai: fake.url, google: fake.url },
    sessionOf: rules,
  })
})
afterAll(async () => {
  await gateway?.close()
  await fake?.close()
})
beforeEach(() => {
  fake?.reset()
  port?.prompts.splice(0)
})

const TIMEOUT = 120_000
const keys = () => port.prompts.map((p) => p.key)

describe.skipIf(rules === undefined)("sessions named from the CLIs' own traffic", () => {
  it.skipIf(binary("claude") === undefined)(
    "Claude Code: the loop is its x-claude-code-session-id; the title call is side, in a session of its own",
    async () => {
      const run = await CliRun.run("claude", { baseUrl: gateway.url, fake })
      expect(run.code, run.stderr).toBe(0)
      const id = (JSON.parse(run.stdout) as { session_id: string }).session_id
      // the main loop is the CLI's session; a side call gets one of its own next to it
      expect(
        new Set(
          keys()
            .filter((k) => !k.side)
            .map((k) => k.session),
        ),
      ).toEqual(new Set([id]))
      expect(keys().every((k) => k.side || k.session === id)).toBe(true)
      expect(
        keys()
          .filter((k) => k.side)
          .every((k) => k.session !== id && k.session.startsWith(id)),
      ).toBe(true)
      expect(keys().every((k) => k.from === "client-header")).toBe(true)
      const tools = port.prompts.map((p) => (Array.isArray(p.body["tools"]) ? p.body["tools"].length : 0))
      // side exactly where the call offers no tools (the title); every main-loop call is a turn
      expect(keys().map((k) => k.side)).toEqual(tools.map((n) => n === 0))
      expect(keys().filter((k) => k.side)).toHaveLength(1)
    },
    TIMEOUT,
  )

  it.skipIf(binary("codex") === undefined)(
    "Codex CLI: one session, its session-id; no side call",
    async () => {
      const run = await CliRun.run("codex", { baseUrl: gateway.url, fake })
      expect(run.code, run.stderr).toBe(0)
      const sent = fake.requests().filter((r) => r.method === "POST")
      expect(new Set(keys().map((k) => k.session))).toEqual(new Set([sent[0]!.headers["session-id"]]))
      expect(keys().every((k) => k.from === "client-header" && !k.side)).toBe(true)
    },
    TIMEOUT,
  )

  it.skipIf(binary("gemini") === undefined)(
    "Gemini CLI (automatic model): one derived session for the loop; the routing call is side",
    async () => {
      const run = await CliRun.run("gemini", { baseUrl: gateway.url, fake, geminiModel: null })
      expect(run.code, run.stderr).toBe(0)
      const main = keys().filter((k) => !k.side)
      expect(main.length).toBeGreaterThanOrEqual(2)
      expect(new Set(main.map((k) => k.session)).size).toBe(1)
      expect(main.every((k) => k.from === "derived")).toBe(true)
      const routing = port.prompts.filter((p) => p.body["tools"] === undefined)
      expect(routing.length).toBeGreaterThanOrEqual(1)
      expect(routing.every((p) => p.key.side)).toBe(true)
    },
    TIMEOUT,
  )
})
