// A worker at LOG_LEVEL=debug whose every provider call fails with an error
// body that echoes the request (the prompt text): exact counting (Anthropic
// count_tokens, Gemini countTokens), summaries (ctx.v1.summarize), manual
// compaction, learn and the loop judge all fail, and no log line holds the
// prompt, while the log still names the status and the provider's error type.
import { randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

const MARKER = `PROMPT-MARKER-${randomBytes(8).toString("hex")}`

/** A provider that answers every call 400 with the request body echoed in its error message (each provider's error shape). */
const echoingProvider = async (): Promise<{ url: string; calls: () => ReadonlyArray<string>; close: () => Promise<void> }> => {
  const calls: string[] = []
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const echoed = Buffer.concat(chunks).toString("utf8")
      const path = req.url ?? ""
      calls.push(path)
      const body = /:(?:countTokens|generateContent)$/.test(path)
        ? { error: { code: 400, message: `Invalid request: ${echoed}`, status: "INVALID_ARGUMENT" } }
        : path.startsWith("/v1/messages")
          ? { type: "error", error: { type: "invalid_request_error", message: `bad request: ${echoed}` } }
          : { error: { message: `bad request: ${echoed}`, type: "invalid_request_error", code: "invalid_value" } }
      res.writeHead(400, { "content-type": "application/json", "request-id": "req_echo_1" }).end(JSON.stringify(body))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { url, calls: () => calls, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

let h: Harness.Harness
let provider: Awaited<ReturnType<typeof echoingProvider>>
beforeAll(async () => {
  provider = await echoingProvider()
  h = await Harness.start({
    LOG_LEVEL: "debug",
    ANTHROPIC_BASE_URL: provider.url,
    ANTHROPIC_API_KEY: "test-key-anthropic",
    OPENAI_BASE_URL: `${provider.url}/v1`,
    OPENAI_API_KEY: "test-key-openai",
    GOOGLE_GEMINI_BASE_URL: provider.url,
    GEMINI_API_KEY: "test-key-gemini",
    CTXD_SUMMARIZER_RETRIES: "0",
    // a manual compaction of a short session folds something (and calls the provider)
    CTXD_COMPACT_TAIL_KEEP_TOKENS: "10",
  })
}, 60_000)
afterAll(async () => {
  await h?.close()
  await provider?.close()
})

const openai = { format: "openai", model: { provider: "openai", name: "gpt-4o" } }

it("no provider error body reaches the log at debug; the log names the status and error type", async () => {
  // exact counting: Anthropic count_tokens and Gemini countTokens fail, the turns are counted locally
  const anthropic = await h.request(h.turnSubject("acme", "anth"), {
    turnId: "t0",
    format: "anthropic",
    model: { provider: "anthropic", name: "claude-sonnet-4-5" },
    system: `You are a helper. ${MARKER}`,
    messages: [{ role: "user", content: `count me ${MARKER}` }],
  })
  expect(anthropic.ok, JSON.stringify(anthropic.error)).toBe(true)
  const gemini = await h.request(h.turnSubject("acme", "gem"), {
    turnId: "t0",
    format: "gemini",
    model: { provider: "google", name: "gemini-2.5-flash" },
    contents: [{ role: "user", parts: [{ text: `count me ${MARKER}` }] }],
  })
  expect(gemini.ok, JSON.stringify(gemini.error)).toBe(true)

  // the loop judge at the borderline: its call fails
  const judged = (turnId: string, messages: unknown[]) =>
    h.request(h.turnSubject("acme", "judged"), { ...openai, turnId, messages, options: { loop: { judge: { enabled: true } } } })
  const sameCall = (i: number) => [
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: `c${i}`, type: "function", function: { name: "search", arguments: `{"q":"${MARKER}"}` } }],
    },
    { role: "tool", tool_call_id: `c${i}`, content: `no results for ${MARKER}` },
  ]
  await judged("j0", [{ role: "user", content: `find ${MARKER}` }])
  await judged("j1", sameCall(1))
  const third = await judged("j2", sameCall(2))
  expect(third.report.loop.judge).toMatchObject({ answered: false })
  expect(third.report.loop.judge.reason).toContain("400")

  // a summary: Unavailable after the provider's 400
  const summary = await h.request(
    `${h.root}.v1.summarize.acme`,
    {
      ...openai,
      messages: [
        { role: "user", content: `summarize ${MARKER}` },
        { role: "assistant", content: `sure ${MARKER}` },
      ],
    },
    20_000,
  )
  expect(summary).toMatchObject({ ok: false })
  expect(summary.error.code).not.toBe("Internal")

  // a manual compaction and a learn request of a plain session: both fail at the provider
  const plain = h.turnSubject("acme", "plain")
  for (let k = 0; k < 4; k++) {
    const messages = [
      ...(k === 0 ? [] : [{ role: "assistant", content: `answer ${k} ${MARKER}` }]),
      { role: "user", content: `question ${k} ${MARKER}` },
    ]
    expect((await h.request(plain, { ...openai, turnId: `p${k}`, messages })).ok).toBe(true)
  }
  const compact = await h.request(`${h.root}.v1.compact.acme.plain`, { model: openai.model }, 20_000)
  expect(compact).toMatchObject({ ok: true, outcome: "failed" })
  const learned = await h.request(`${h.root}.v1.learn.acme.plain`, { model: openai.model }, 20_000)
  expect(learned).toMatchObject({ ok: false })
  expect(learned.error.code).not.toBe("Internal")

  const paths = provider.calls()
  expect(paths.some((p) => p.includes("count_tokens"))).toBe(true)
  expect(paths.some((p) => p.includes(":countTokens"))).toBe(true)
  expect(paths.filter((p) => p.includes("chat/completions")).length).toBeGreaterThanOrEqual(4)

  // let background work (compaction jobs, breaker changes) finish writing
  await new Promise((resolve) => setTimeout(resolve, 500))
  const output = h.worker.output()
  expect(output).toContain("exact count unavailable") // the debug lines were written
  const leaked = output.split("\n").filter((line) => line.includes(MARKER))
  expect(leaked.map((line) => line.slice(0, 400))).toEqual([])
  // the log still explains: the status and the provider's error type
  const lines = output.split("\n")
  expect(lines.some((line) => line.includes("count unavailable (rejected: 400 invalid_request_error (request req_echo_1,"))).toBe(true)
  expect(lines.some((line) => line.includes("count unavailable (rejected: 400 INVALID_ARGUMENT"))).toBe(true)
  expect(lines.some((line) => line.includes("compaction failed: openai rejected: 400 invalid_request_error (code invalid_value"))).toBe(
    true,
  )
  expect(lines.some((line) => line.includes("loop judge failed: openai rejected: 400 invalid_request_error"))).toBe(true)
  expect(lines.filter((line) => line.includes("summarizer call (openai gpt-4o,")).length).toBeGreaterThanOrEqual(3)
}, 90_000)
