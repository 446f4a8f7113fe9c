/**
 * Each real agent CLI through the gateway with ctxd's own engine answering
 * (the in-process port `ctxd gateway` runs without NATS, and the gateway's
 * session rules): only the CLI's base URL changes, ctxd's prompts go
 * upstream in active mode and the strict fake accepts every one, the tool
 * loop completes; in shadow mode the client's bodies go and ctxd's are
 * still built. Looks `InProcessPort` and `Session` up at run time and skips
 * on a gateway without them; per CLI when the CLI is not installed.
 */
import * as Gateway from "@ctxd/gateway"
import { type GatewayServer, type Port, type ServerOptions, startServer } from "@ctxd/gateway"
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { binary, type Cli } from "./AgentClis.ts"
import * as CliRun from "./CliRun.ts"

type SessionOf = NonNullable<ServerOptions["sessionOf"]>
interface Parts {
  readonly port: () => Port.TurnPort
  readonly sessionOf: SessionOf
}

/** The in-process port and the session rules, when this build of the gateway has them. */
const parts = ((): Parts | undefined => {
  const g = Gateway as Record<string, unknown>
  const port = (g["InProcessPort"] as { make?: () => Port.TurnPort } | undefined)?.make
  const forServer = (g["Session"] as { SessionOf?: { forServer?: () => SessionOf } } | undefined)?.SessionOf?.forServer
  return port === undefined || forServer === undefined ? undefined : { port, sessionOf: forServer() }
})()

/** Each request the gateway asked the engine, in order, with its reply or why it failed. */
const asked: Array<{ readonly request: Port.PromptRequest; readonly reply?: Port.PromptReply; readonly error?: string }> = []

let fake: FakeProvider.FakeProviderServer
let gateway: GatewayServer
let engine: Port.TurnPort
let mode: "active" | "shadow" = "active"

beforeAll(async () => {
  if (parts === undefined) return
  fake = await FakeProvider.start()
  engine = parts.port()
  const recording: Port.TurnPort = {
    ...engine,
    prompt: async (request, signal) => {
      try {
        const reply = await engine.prompt(request, signal)
        asked.push({ request, reply })
        return reply
      } catch (e) {
        asked.push({ request, error: String(e) })
        throw e
      }
    },
  }
  gateway = await startServer({
    turns: recording,
    upstreams: { anthropic: fake.url, openai: fake.url, google: fake.url },
    sessionOf: parts.sessionOf,
    mode: () => mode,
    // the default policy: a turn ctxd cannot build would go with the client's body, which the checks below tell apart
    failure: "failOpen",
    promptTimeoutMs: 30_000,
  })
})
afterAll(async () => {
  await gateway?.close()
  await engine?.close()
  await fake?.close()
})
beforeEach(() => {
  fake?.reset()
  asked.splice(0)
})

/** The conversation of a body, whichever API (what ctxd rewrites). */
const conversation = (body: unknown): string => {
  const b = body as Record<string, unknown>
  return JSON.stringify(b["messages"] ?? b["input"] ?? b["contents"])
}

const TIMEOUT = 150_000

const tried = async (cli: Cli, which: "active" | "shadow") => {
  mode = which
  const run = await CliRun.run(cli, { baseUrl: gateway.url, fake, timeoutMs: 120_000 })
  expect(run.code, run.stderr.slice(-1_500)).toBe(0)
  expect(run.stdout).toContain(run.answer)
  const posts = fake.requests().filter((r) => r.method === "POST")
  expect(posts.map((r) => r.status)).toEqual(posts.map(() => 200))
  const sent = posts.map((r) => conversation(r.body))
  // every turn of the main loop answered by the engine, and what it answered went upstream (active) or the client's body (shadow)
  const turns = asked.filter((a) => !a.request.key.side)
  expect(turns.length).toBeGreaterThanOrEqual(2)
  expect(turns.filter((a) => a.error !== undefined).map((a) => a.error)).toEqual([])
  for (const a of turns) expect(sent).toContain(conversation(which === "active" ? a.reply!.body : a.request.body))
  // a side call (not a turn) goes with the client's own body, whether or not the engine was asked
  for (const a of asked.filter((x) => x.request.key.side)) expect(sent).toContain(conversation(a.request.body))
  expect(JSON.stringify(posts.at(-1)!.body)).toContain(run.nonce)
  return { run, posts }
}

describe.skipIf(parts === undefined)("agent CLIs through the gateway, ctxd's engine in process", () => {
  for (const cli of ["claude", "codex", "gemini"] as const) {
    for (const which of ["active", "shadow"] as const) {
      it.skipIf(binary(cli) === undefined)(
        `${cli}, ${which}: every call accepted upstream, the loop completes`,
        () => tried(cli, which),
        TIMEOUT,
      )
    }
  }
})
