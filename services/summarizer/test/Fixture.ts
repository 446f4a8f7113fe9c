/** Test wiring: the real SDKs pointed at a fake provider, the tiktoken counter, real workloads. */
import { Normalize } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import { type FakeProvider, Workloads } from "@ctxd/testing"
import { LocalCounter } from "@ctxd/tokens"
import { Effect, Layer, Redacted } from "effect"
import { Llm, Summarizer, SummarizerConfig, type Transcript } from "../src/index.ts"

export const CLAUDE = { provider: "anthropic", name: "claude-sonnet-4-6" } as const
export const GPT = { provider: "openai", name: "gpt-4o" } as const
export const GEMINI = { provider: "google", name: "gemini-2.5-flash" } as const

/** Config whose endpoints are the fake provider's (fast retries). */
export const config = (
  server: FakeProvider.FakeProviderServer,
  overrides: Partial<SummarizerConfig.Config> = {},
): SummarizerConfig.Config => ({
  ...SummarizerConfig.defaults,
  anthropic: { baseURL: server.url, apiKey: Redacted.make("test") },
  openai: { baseURL: server.openaiBaseURL, apiKey: Redacted.make("test") },
  google: { baseURL: server.url, apiKey: Redacted.make("test") },
  retryBaseMs: 10,
  timeoutMs: 10_000,
  ...overrides,
})

/** A summarizer over the fake provider. */
export const make = (server: FakeProvider.FakeProviderServer, overrides: Partial<SummarizerConfig.Config> = {}) => {
  const s = config(server, overrides)
  return Summarizer.make(s).pipe(Effect.provide(Layer.merge(Llm.layer(s), LocalCounter.layerTiktoken())))
}

/** A summarizer layer over the fake provider. */
export const layer = (server: FakeProvider.FakeProviderServer, overrides: Partial<SummarizerConfig.Config> = {}) => {
  const s = config(server, overrides)
  return Summarizer.layer(s).pipe(Layer.provide(Layer.merge(Llm.layer(s), LocalCounter.layerTiktoken())))
}

/** Real messages: tau-bench sessions back to back (call ids made unique), numbered from 1. */
export const tauItems = (count: number): Array<Transcript.Item> => {
  const out: Array<Transcript.Item> = []
  const sessions = Workloads.tauBenchSessions()
  for (let s = 0; out.length < count; s++) {
    const session = sessions[s % sessions.length]!
    const messages: Array<Conversation.Message> = Normalize.fromOpenAI(session.turns.flatMap((t) => t.messages)).map((m) => ({
      ...m,
      parts: m.parts.map((p) =>
        p.type === "tool_call" ? { ...p, id: `${s}-${p.id}` } : p.type === "tool_result" ? { ...p, callId: `${s}-${p.callId}` } : p,
      ),
    }))
    for (const message of messages) {
      if (out.length === count) break
      out.push({ seq: out.length + 1, message })
    }
  }
  return out
}

/** The user prompt and system prompt of a logged provider request (either format). */
export const promptOf = (body: unknown): { system: string; user: string } => {
  const b = body as { system?: unknown; messages: Array<{ role: string; content: unknown }> }
  if (typeof b.system === "string") return { system: b.system, user: String(b.messages[0]!.content) }
  return { system: String(b.messages[0]!.content), user: String(b.messages[1]!.content) }
}
