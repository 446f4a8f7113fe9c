/**
 * Each real agent CLI through the gateway (a stub port answering for the
 * fleet), the strict fake provider upstream, in active and in shadow mode:
 * the CLI's tool loop completes with only its base URL changed, every model
 * call is accepted upstream, each call asks the port once and reports its
 * streamed usage, and upstream gets ctxd's body (active) or the client's
 * untouched (shadow). A CLI that is not installed is skipped
 * (`node test/gateway/install-clis.ts`).
 */
import { type GatewayServer, startServer } from "@ctxd/gateway"
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { binary, type Cli } from "./AgentClis.ts"
import * as CliRun from "./CliRun.ts"
import * as StubPort from "./StubPort.ts"

let fake: FakeProvider.FakeProviderServer
let gateway: GatewayServer
let port: StubPort.StubPort
let mode: "active" | "shadow" = "active"

beforeAll(async () => {
  fake = await FakeProvider.start()
  port = StubPort.make()
  gateway = await startServer({
    turns: port,
    upstreams: { anthropic: fake.url, openai: fake.url, google: fake.url },
    mode: () => mode,
    failure: "failClosed",
  })
})
afterAll(async () => {
  await gateway?.close()
  await fake?.close()
})
beforeEach(() => {
  fake?.reset()
  port?.prompts.splice(0)
  port?.usages.splice(0)
})

/** The model calls that reached the fake (Claude Code's `HEAD /` probe aside). */
const calls = () => fake.requests().filter((r) => r.method === "POST")
const marked = (r: FakeProvider.LoggedRequest): boolean => JSON.stringify(r.body).includes(StubPort.MARK)

/** The session the gateway named from each CLI's own traffic (gw-session's rules replace the default). */
const sessions = () => new Set(port.prompts.map((p) => p.key.session))

const TIMEOUT = 120_000

const expectations = async (cli: Cli, which: "active" | "shadow") => {
  mode = which
  const run = await CliRun.run(cli, { baseUrl: gateway.url, fake })
  expect(run.code, run.stderr).toBe(0)
  expect(run.stdout).toContain(run.answer)
  const posts = calls()
  expect(posts.length).toBeGreaterThanOrEqual(2)
  expect(posts.map((r) => r.status)).toEqual(posts.map(() => 200))
  // one prompt per model call, each call's streamed usage reported once, in the request's mode
  expect(port.prompts).toHaveLength(posts.length)
  expect(port.prompts.every((p) => (p.mode ?? "active") === which)).toBe(true)
  await expect.poll(() => port.usages.length).toBe(posts.length)
  expect(port.usages.every((u) => (u.mode ?? "active") === which)).toBe(true)
  // active: ctxd's body went up; shadow: the client's, untouched
  expect(posts.map(marked)).toEqual(posts.map(() => which === "active"))
  // the tool's output (the nonce) came back through the gateway in the last call
  expect(JSON.stringify(posts.at(-1)!.body)).toContain(run.nonce)
  return { run, posts }
}

describe.skipIf(binary("claude") === undefined)("Claude Code through the gateway", () => {
  for (const which of ["active", "shadow"] as const) {
    it(
      `${which}: the tool loop completes; query string, betas and the session header reach upstream`,
      async () => {
        const { posts } = await expectations("claude", which)
        for (const r of posts) {
          expect(r.search).toBe("?beta=true")
          expect(r.headers["anthropic-beta"]).toContain("claude-code-20250219")
          expect(r.headers["x-claude-code-session-id"]).toMatch(/^[0-9a-f-]{36}$/)
        }
        const usage = port.usages.at(-1)!.usage
        expect(usage["input_tokens"]).toBeTypeOf("number")
      },
      TIMEOUT,
    )
  }
})

describe.skipIf(binary("codex") === undefined)("Codex CLI through the gateway", () => {
  for (const which of ["active", "shadow"] as const) {
    it(
      `${which}: the tool loop completes; session-id and prompt_cache_key reach upstream`,
      async () => {
        const { posts } = await expectations("codex", which)
        const session = posts[0]!.headers["session-id"]
        for (const r of posts) expect((r.body as Record<string, unknown>)["prompt_cache_key"]).toBe(session)
        expect(sessions().size).toBe(1)
        expect(port.usages.at(-1)!.usage["input_tokens"]).toBeTypeOf("number")
      },
      TIMEOUT,
    )
  }
})

describe.skipIf(binary("gemini") === undefined)("Gemini CLI through the gateway", () => {
  for (const which of ["active", "shadow"] as const) {
    it(
      `${which}: the tool loop completes over streamGenerateContent?alt=sse`,
      async () => {
        const { posts } = await expectations("gemini", which)
        for (const r of posts)
          expect(r).toMatchObject({ path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent", search: "?alt=sse" })
        expect(port.prompts.every((p) => p.model === "gemini-2.5-flash")).toBe(true)
        expect(port.usages.at(-1)!.usage["promptTokenCount"]).toBeTypeOf("number")
      },
      TIMEOUT,
    )
  }
})
