/**
 * Test wiring: a migrated throwaway schema with the session and compaction
 * stores, the summarizer on the real SDKs against a fake provider, real
 * tau-bench messages stored as sessions.
 */
import { Normalize } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import { Migrations, SessionStore } from "@ctxd/db"
import { Llm, SummarizerConfig, Summarizer } from "@ctxd/summarizer"
import { FakeProvider, TestDatabase, Workloads } from "@ctxd/testing"
import { LocalCounter } from "@ctxd/tokens"
import { Effect, Layer, Redacted } from "effect"
import { CompactionStore, Compactor, CompactorConfig } from "../src/index.ts"

/** The session model of the tests: an effective window of 14,000 tokens. */
export const MODEL = { provider: "openai", name: "gpt-4o", contextWindow: 16_000, maxOutputTokens: 2_000 } as const

/** Both stores on a fresh, migrated schema (and the `Database` itself). */
export const Stores = Layer.mergeAll(SessionStore.layer, CompactionStore.layer).pipe(
  Layer.provide(Migrations.layer),
  Layer.provideMerge(TestDatabase.layer),
)

export const counter = LocalCounter.make({ backend: "tiktoken", cacheCapacity: 100_000 })

/** Summarizer config on the fake provider: fast retries, short timeouts. */
export const summarizerConfig = (
  server: FakeProvider.FakeProviderServer,
  overrides: Partial<SummarizerConfig.Config> = {},
): SummarizerConfig.Config => ({
  ...SummarizerConfig.defaults,
  anthropic: { baseURL: server.url, apiKey: Redacted.make("test") },
  openai: { baseURL: server.openaiBaseURL, apiKey: Redacted.make("test") },
  retryBaseMs: 10,
  timeoutMs: 10_000,
  ...overrides,
})

/** The summarizer (and its local counter) over the fake provider. */
export const summarizer = (server: FakeProvider.FakeProviderServer, overrides: Partial<SummarizerConfig.Config> = {}) => {
  const s = summarizerConfig(server, overrides)
  return Summarizer.layer(s).pipe(Layer.provideMerge(Layer.merge(Llm.layer(s), Layer.succeed(LocalCounter.LocalCounter, counter))))
}

/**
 * The lease TTL of the compactors in the test process. They are never killed
 * and run on the event loop of the fake provider, which tokenizes their calls:
 * a loaded 2-core machine stalls that loop for seconds, and a lease short
 * enough to run out in a stall (renewed every third of its TTL) would make a
 * compaction lose its write. Tests of expiry take their own short leases.
 */
export const LEASE_TTL_MS = 30_000

/** Compactor config for tests: {@link LEASE_TTL_MS}, the test model's thresholds. */
export const config = (overrides: Partial<CompactorConfig.Config> = {}): CompactorConfig.Config => ({
  ...CompactorConfig.defaults,
  leaseTtlMs: LEASE_TTL_MS,
  ...overrides,
})

/** A compactor over whatever stores and summarizer are in context. */
export const compactor = (overrides: Partial<CompactorConfig.Config> = {}) => Compactor.make(config(overrides))

/** `n` real messages: tau-bench sessions back to back (call ids made unique per session). */
export const tauMessages = (n: number, from = 0): Array<Conversation.Message> => {
  const out: Array<Conversation.Message> = []
  const sessions = Workloads.tauBenchSessions()
  for (let s = from; out.length < n; s++) {
    const session = sessions[s % sessions.length]!
    const messages = Normalize.fromOpenAI(session.turns.flatMap((t) => t.messages)).map((m) => ({
      ...m,
      parts: m.parts.map((p) =>
        p.type === "tool_call" ? { ...p, id: `${s}-${p.id}` } : p.type === "tool_result" ? { ...p, callId: `${s}-${p.callId}` } : p,
      ),
    }))
    for (const message of messages) {
      if (out.length === n) break
      out.push(message)
    }
  }
  return out
}

/**
 * Loads the tokenizers a compaction uses (o200k for the stored messages, the
 * fake provider's Claude BPE for its usage) and counts the test sessions'
 * messages once: the first use takes seconds of blocking CPU on a loaded
 * machine, which belongs in a `beforeAll`, not inside a test's leases and timings.
 */
export const warmUp = (): void => {
  for (const message of tauMessages(150)) counter.countMessage(message, "o200k_base")
  FakeProvider.countTextTokens("warm up")
}

let sessions = 0
/** A session name no other test of this process uses. */
export const fresh = (): string => `s${++sessions}-${process.pid}`

/** Stores `messages` as one turn of a new session (tokens counted with o200k). */
export const storeSession = (tenant: string, session: string, messages: ReadonlyArray<Conversation.Message>) =>
  Effect.flatMap(SessionStore.SessionStore, (store) =>
    store.commitTurn({
      tenant,
      session,
      turnId: `t-${session}`,
      requestHash: "h",
      expectedLastSeq: 0,
      messages: messages.map((message) => ({ message, tokens: counter.countMessage(message, "o200k_base"), encoding: "o200k_base" })),
      reply: { ok: true },
    }),
  )
