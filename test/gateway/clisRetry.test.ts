/**
 * A rate limit through the gateway: the fake answers a CLI's first
 * main-loop call with 429 and `retry-after`; the gateway relays it as sent and never
 * retries by itself, the CLI retries on its own after the wait and its run
 * completes. Each attempt the fake saw is one request the CLI made (one
 * prompt asked of the port), and only the accepted calls report usage.
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

beforeAll(async () => {
  fake = await FakeProvider.start()
  port = StubPort.make()
  gateway = await startServer({ turns: port, upstreams: { anthropic: fake.url, openai: fake.url, google: fake.url } })
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

const RETRY_AFTER_MS = 1_000

/** A run whose first main-loop call is answered 429; the failed call and the client's retry of it. */
const rateLimitedRun = async (cli: Cli) => {
  const run = await CliRun.run(cli, { baseUrl: gateway.url, fake, codexRetries: 2, rateLimitMs: RETRY_AFTER_MS })
  expect(run.code, run.stderr).toBe(0)
  expect(run.stdout).toContain(run.answer)
  const posts = fake.requests().filter((r) => r.method === "POST")
  const failed = posts.findIndex((r) => r.status === 429)
  expect(failed).toBeGreaterThanOrEqual(0)
  expect(posts.filter((r) => r.status !== 200)).toHaveLength(1)
  const [limited, retry] = [posts[failed]!, posts[failed + 1]!]
  // the retry is the client's: the same call again after the wait (the gateway makes no call of its own)
  expect(retry.path).toBe(limited.path)
  const conversation = (r: FakeProvider.LoggedRequest) => {
    const b = r.body as Record<string, unknown>
    return JSON.stringify(b["messages"] ?? b["input"] ?? b["contents"])
  }
  expect(conversation(retry) === conversation(limited), "the retry sends the same conversation").toBe(true)
  expect(retry.timestamp - limited.timestamp).toBeGreaterThanOrEqual(RETRY_AFTER_MS - 50)
  expect(port.prompts).toHaveLength(posts.length)
  await expect.poll(() => port.usages.length).toBe(posts.length - 1)
  return { limited, retry }
}

const TIMEOUT = 120_000

describe("agent CLIs retry a 429 the gateway relays", () => {
  it.skipIf(binary("claude") === undefined)(
    "Claude Code: the same call again, same session",
    async () => {
      const { limited, retry } = await rateLimitedRun("claude")
      expect(retry.headers["x-claude-code-session-id"]).toBe(limited.headers["x-claude-code-session-id"])
    },
    TIMEOUT,
  )

  it.skipIf(binary("codex") === undefined)(
    "Codex CLI (stream_max_retries 2): the same request again",
    async () => {
      const { limited, retry } = await rateLimitedRun("codex")
      expect(retry.headers["session-id"]).toBe(limited.headers["session-id"])
    },
    TIMEOUT,
  )

  it.skipIf(binary("gemini") === undefined)(
    "Gemini CLI: the same request again",
    async () => {
      const { retry } = await rateLimitedRun("gemini")
      expect(retry.search).toBe("?alt=sse")
    },
    TIMEOUT,
  )
})
