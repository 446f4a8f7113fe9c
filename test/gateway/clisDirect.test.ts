/**
 * Each real agent CLI against the strict fake provider directly (no
 * gateway): a scripted tool call the CLI executes, then a final answer.
 * Pins down what each one sends — paths, query strings, streaming, the
 * headers naming its session, its side calls — which the gateway and its
 * session naming rely on (docs/agent-clis.md). A CLI that is not installed
 * is skipped: `node test/gateway/install-clis.ts` installs them.
 */
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { binary } from "./AgentClis.ts"
import * as CliRun from "./CliRun.ts"

let fake: FakeProvider.FakeProviderServer
beforeAll(async () => {
  fake = await FakeProvider.start()
})
afterAll(() => fake?.close())
beforeEach(() => fake?.reset())

/** The model calls the fake saw (not Claude Code's `HEAD /` probe), with the JSON body. */
const calls = () => fake.requests().filter((r) => r.method === "POST")
const bodyOf = (r: FakeProvider.LoggedRequest): Record<string, unknown> => r.body as Record<string, unknown>
const mentions = (r: FakeProvider.LoggedRequest, text: string): boolean => JSON.stringify(r.body).includes(text)

const TIMEOUT = 120_000

describe.skipIf(binary("claude") === undefined)("Claude Code against the fake provider", () => {
  it(
    "streams /v1/messages?beta=true, names its session in x-claude-code-session-id, titles the run in a tool-less side call",
    async () => {
      const run = await CliRun.run("claude", { baseUrl: fake.url, fake })
      expect(run.code, run.stderr).toBe(0)
      const result = JSON.parse(run.stdout) as { result: string; is_error: boolean; session_id: string }
      expect(result).toMatchObject({ is_error: false, result: run.answer })
      const posts = calls()
      expect(posts.every((r) => r.path === "/v1/messages" && r.search === "?beta=true")).toBe(true)
      expect(posts.every((r) => r.status === 200)).toBe(true)
      expect(posts.every((r) => bodyOf(r)["stream"] === true)).toBe(true)
      // one session id for the whole run, the same in the header and in metadata.user_id
      const ids = new Set(posts.map((r) => r.headers["x-claude-code-session-id"]))
      expect([...ids]).toEqual([result.session_id])
      const userId = JSON.parse(String((bodyOf(posts[0]!)["metadata"] as Record<string, unknown>)["user_id"])) as Record<string, string>
      expect(userId["session_id"]).toBe(result.session_id)
      // the side call: first, no tools, a structured title
      const side = bodyOf(posts[0]!)
      expect(side["tools"]).toEqual([])
      expect((side["output_config"] as Record<string, { type: string }>)["format"]?.type).toBe("json_schema")
      // the main loop: the tool result carries the nonce back, after a turn opened by thinking
      const last = posts.at(-1)!
      expect(mentions(last, run.nonce)).toBe(true)
      const messages = bodyOf(last)["messages"] as Array<{ role: string; content: Array<{ type: string }> }>
      expect(messages.at(-2)?.content.map((b) => b.type)).toEqual(["thinking", "tool_use"])
      expect(messages.at(-1)?.content[0]?.type).toBe("tool_result")
      expect(last.headers["anthropic-version"]).toBe("2023-06-01")
      expect(last.headers["anthropic-beta"]).toContain("claude-code-20250219")
      // the probe before the first call
      expect(fake.requests()[0]).toMatchObject({ method: "HEAD", path: "/" })
    },
    TIMEOUT,
  )
})

describe.skipIf(binary("codex") === undefined)("Codex CLI against the fake provider", () => {
  it(
    "streams /v1/responses, names its session in session-id, thread-id and prompt_cache_key, one turn id per user turn",
    async () => {
      const run = await CliRun.run("codex", { baseUrl: fake.url, fake })
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toContain(run.answer)
      const posts = calls()
      expect(posts).toHaveLength(2)
      expect(posts.every((r) => r.path === "/v1/responses" && r.status === 200)).toBe(true)
      expect(posts.every((r) => r.headers["accept"] === "text/event-stream" && bodyOf(r)["stream"] === true)).toBe(true)
      const session = posts[0]!.headers["session-id"]
      expect(session).toMatch(/^[0-9a-f-]{36}$/)
      for (const r of posts) {
        expect(r.headers["thread-id"]).toBe(session)
        expect(r.headers["x-client-request-id"]).toBe(session)
        expect(bodyOf(r)["prompt_cache_key"]).toBe(session)
        expect(bodyOf(r)["store"]).toBe(false)
      }
      const turn = (r: FakeProvider.LoggedRequest) =>
        (JSON.parse(r.headers["x-codex-turn-metadata"] ?? "{}") as Record<string, unknown>)["turn_id"]
      expect(turn(posts[0]!)).toBe(turn(posts[1]!))
      // the second call: the function call and its output, which holds the nonce
      const input = bodyOf(posts[1]!)["input"] as Array<{ type: string }>
      expect(input.slice(-2).map((i) => i.type)).toEqual(["function_call", "function_call_output"])
      expect(mentions(posts[1]!, run.nonce)).toBe(true)
    },
    TIMEOUT,
  )
})

describe.skipIf(binary("gemini") === undefined)("Gemini CLI against the fake provider", () => {
  it(
    "streams :streamGenerateContent?alt=sse and names no session at all",
    async () => {
      const run = await CliRun.run("gemini", { baseUrl: fake.url, fake })
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toContain(run.answer)
      const posts = calls()
      expect(posts).toHaveLength(2)
      for (const r of posts) {
        expect(r).toMatchObject({ path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent", search: "?alt=sse", status: 200 })
        expect(Object.keys(r.headers).filter((h) => /session|thread|conversation/.test(h))).toEqual([])
        expect(Object.keys(bodyOf(r)).sort()).toEqual(["contents", "generationConfig", "systemInstruction", "tools"])
      }
      const contents = bodyOf(posts[1]!)["contents"] as Array<{ role: string; parts: Array<Record<string, unknown>> }>
      expect(contents.at(-2)?.parts[0]).toHaveProperty("functionCall")
      expect(contents.at(-1)?.parts[0]).toHaveProperty("functionResponse")
      expect(mentions(posts[1]!, run.nonce)).toBe(true)
    },
    TIMEOUT,
  )

  it(
    "with no model given, routes first: one unary side call asking for a JSON score, no tools",
    async () => {
      const run = await CliRun.run("gemini", { baseUrl: fake.url, fake, geminiModel: null })
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toContain(run.answer)
      const posts = calls()
      const routing = posts.filter((r) => r.endpoint === "gemini_generate")
      // answered with JSON matching its schema, it is made once
      expect(routing).toHaveLength(1)
      const body = bodyOf(routing[0]!)
      expect(body["tools"]).toBeUndefined()
      expect((body["generationConfig"] as Record<string, unknown>)["responseMimeType"]).toBe("application/json")
      const main = posts.filter((r) => r.endpoint === "gemini_stream")
      expect(main.length).toBeGreaterThanOrEqual(2)
      expect(main.every((r) => r.status === 200 && r.search === "?alt=sse")).toBe(true)
    },
    TIMEOUT,
  )
})
