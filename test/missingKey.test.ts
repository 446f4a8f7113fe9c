// A worker with a database and no provider key at all (neither ctxd's
// variables nor the SDKs' own): learn and summarize answer BadRequest naming
// the variable to set, for every provider; turns (exact counting, the loop
// judge) and counts still answer; no SDK exception reaches a NATS handler
// (no Internal reply, no "handler died" in the log).
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Harness from "./Harness.ts"

const UNSET = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "CTXD_SUMMARIZER_API_KEY"]
// nothing listens here: a call made anyway fails fast, and never reaches a real provider
const NOWHERE = "http://127.0.0.1:9"

const cases = [
  { provider: "anthropic", name: "claude-sonnet-4-5", variable: "ANTHROPIC_API_KEY" },
  { provider: "openai", name: "gpt-4o", variable: "OPENAI_API_KEY" },
  { provider: "google", name: "gemini-2.5-flash", variable: "GEMINI_API_KEY" },
] as const

let h: Harness.Harness
beforeAll(async () => {
  h = await Harness.start({
    ...Object.fromEntries(UNSET.map((name) => [name, ""])),
    ANTHROPIC_BASE_URL: NOWHERE,
    OPENAI_BASE_URL: `${NOWHERE}/v1`,
    GOOGLE_GEMINI_BASE_URL: NOWHERE,
    CTXD_SUMMARIZER_RETRIES: "0",
  })
  // a session with stored messages to learn from
  for (let k = 0; k < 2; k++) {
    const messages = [
      ...(k === 0 ? [] : [{ role: "assistant", content: "Your reservation is changed." }]),
      { role: "user", content: k === 0 ? "Change my reservation to Friday." : "Thanks." },
    ]
    const reply = await h.request(h.turnSubject("acme", "done"), {
      turnId: `t${k}`,
      format: "openai",
      model: { provider: "openai", name: "gpt-4o" },
      messages,
    })
    expect(reply.ok, JSON.stringify(reply.error)).toBe(true)
  }
}, 60_000)
afterAll(async () => {
  await h?.close()
})

describe("no provider key", () => {
  it.each(cases)("learn with $provider: BadRequest naming $variable", async ({ provider, name, variable }) => {
    const reply = await h.request(`${h.root}.v1.learn.acme.done`, { model: { provider, name } }, 20_000)
    expect(reply).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    expect(reply.error.message).toContain(variable)
    expect(reply.error.message).not.toContain(NOWHERE)
  })

  it.each(cases)("summarize with $provider: BadRequest naming $variable", async ({ provider, name, variable }) => {
    const reply = await h.request(
      `${h.root}.v1.summarize.acme`,
      {
        format: "openai",
        model: { provider, name },
        messages: [
          { role: "user", content: "hello" },
          { role: "assistant", content: "hi" },
        ],
      },
      20_000,
    )
    expect(reply).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    expect(reply.error.message).toContain(variable)
  })

  it("turns with exact counting and the loop judge, and counts, still answer", async () => {
    const anthropic = await h.request(h.turnSubject("acme", "anth"), {
      turnId: "t0",
      format: "anthropic",
      model: { provider: "anthropic", name: "claude-sonnet-4-5" },
      messages: [{ role: "user", content: "count me" }],
    })
    expect(anthropic.ok, JSON.stringify(anthropic.error)).toBe(true)
    const gemini = await h.request(h.turnSubject("acme", "gem"), {
      turnId: "t0",
      format: "gemini",
      model: { provider: "google", name: "gemini-2.5-flash" },
      contents: [{ role: "user", parts: [{ text: "count me" }] }],
    })
    expect(gemini.ok, JSON.stringify(gemini.error)).toBe(true)

    const judged = (turnId: string, messages: unknown[]) =>
      h.request(h.turnSubject("acme", "judged"), {
        turnId,
        format: "openai",
        model: { provider: "openai", name: "gpt-4o" },
        messages,
        options: { loop: { judge: { enabled: true } } },
      })
    const sameCall = (i: number) => [
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: `c${i}`, type: "function", function: { name: "search", arguments: '{"q":"x"}' } }],
      },
      { role: "tool", tool_call_id: `c${i}`, content: "no results" },
    ]
    await judged("j0", [{ role: "user", content: "find x" }])
    await judged("j1", sameCall(1))
    const third = await judged("j2", sameCall(2))
    expect(third.ok, JSON.stringify(third.error)).toBe(true)
    expect(third.report.loop.judge).toMatchObject({ answered: false })
    expect(third.report.loop.judge.reason).toContain("OPENAI_API_KEY")

    for (const provider of cases) {
      const count = await h.request(`${h.root}.v1.tokens.count.acme`, {
        model: { provider: provider.provider, name: provider.name },
        segments: ["hello world"],
      })
      expect(count.ok, JSON.stringify(count.error)).toBe(true)
    }
    const loop = await h.request(`${h.root}.v1.loop.check`, {
      format: "openai",
      messages: [{ role: "user", content: "x" }, ...sameCall(1)],
    })
    expect(loop.ok, JSON.stringify(loop.error)).toBe(true)

    const output = h.worker.output()
    expect(output).not.toContain("handler died")
    expect(output).not.toContain('"code":"Internal"')
  })
})
