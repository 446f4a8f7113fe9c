// No provider key at all (neither in the config nor in the SDKs' environment
// variables): a summary is a coded refusal naming the missing variable, for
// every provider, and no SDK exception reaches the endpoint's handler.
import { Workloads } from "@ctxd/testing"
import { LocalCounter } from "@ctxd/tokens"
import { Effect, Exit, Layer } from "effect"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { Llm, SummarizeEndpoint, Summarizer, SummarizerConfig } from "../src/index.ts"

const VARIABLES = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"]

const cases = [
  { provider: "anthropic", name: "claude-sonnet-4-6", variable: "ANTHROPIC_API_KEY" },
  { provider: "openai", name: "gpt-4o", variable: "OPENAI_API_KEY" },
  { provider: "google", name: "gemini-2.5-flash", variable: "GEMINI_API_KEY" },
] as const

describe("a summary with no provider key", () => {
  const saved: Record<string, string | undefined> = {}
  beforeEach(() => {
    for (const name of VARIABLES) {
      saved[name] = process.env[name]
      delete process.env[name]
    }
  })
  afterEach(() => {
    for (const name of VARIABLES)
      if (saved[name] === undefined) delete process.env[name]
      else process.env[name] = saved[name]
  })

  it.each(cases)("$provider: BadRequest naming $variable, never an SDK exception", async ({ provider, name, variable }) => {
    const config: SummarizerConfig.Config = {
      ...SummarizerConfig.defaults,
      // nothing listens here: a call that is made anyway fails fast as a connection error
      anthropic: { baseURL: "http://127.0.0.1:9" },
      openai: { baseURL: "http://127.0.0.1:9/v1" },
      google: { baseURL: "http://127.0.0.1:9" },
      retries: 0,
      timeoutMs: 2_000,
    }
    const layer = Summarizer.layer(config).pipe(Layer.provide(Layer.merge(Llm.layer(config), LocalCounter.layerTiktoken())))
    const messages = Workloads.tauBenchSessions()[0]!
      .turns.flatMap((t) => t.messages)
      .slice(0, 4)
    const request = { format: "openai", model: { provider, name }, messages }
    const exit = await Effect.runPromiseExit(
      SummarizeEndpoint.handle(new TextEncoder().encode(JSON.stringify(request)), "acme").pipe(Effect.provide(layer)),
    )
    expect(Exit.isSuccess(exit)).toBe(true)
    if (!Exit.isSuccess(exit)) return
    const reply = exit.value as { ok: boolean; error?: { code: string; message: string } }
    expect(reply.ok).toBe(false)
    expect(reply.error?.code).toBe("BadRequest")
    expect(reply.error?.message).toContain(variable)
  })
})
