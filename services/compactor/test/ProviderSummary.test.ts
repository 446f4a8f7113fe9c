// The `provider` summarizer backend: the backend chosen per model and format, the cut it takes, the view that swaps
// exactly the summarized span for the signed block (turns appended meanwhile kept), and the compactor asking the
// fake provider through the official SDK, falling back to ctxd's summarizer when the provider fails.
import { it as effectIt } from "@effect/vitest"
import { AnthropicProvider, Models, type Pipeline } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import { SessionStore } from "@ctxd/db"
import { FakeProvider } from "@ctxd/testing"
import { Effect, Layer, Option } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { CompactionStore, ProviderSummary, View } from "../src/index.ts"
import * as Fixture from "./Fixture.ts"

const OPUS = "claude-opus-5-5"
const user = (text: string): Conversation.Message => ({ role: "user", parts: [{ type: "text", text }] })
const assistant = (text: string): Conversation.Message => ({ role: "assistant", parts: [{ type: "text", text }] })
const stored = (messages: ReadonlyArray<Conversation.Message>): Array<Pipeline.StoredMessage> =>
  messages.map((message, i) => ({ seq: i + 1, message, tokens: 10 }))
const exchange = (n: number): Array<Conversation.Message> =>
  Array.from({ length: n }, (_, i) => (i % 2 === 0 ? user(`question ${i}`) : assistant(`answer ${i}`)))

const block = { type: "compaction", content: "The user asked questions 0 to 2.", encrypted_content: "e30", signature: "fakecmp1.x" }
const summary = (to: number): View.Summary => ({
  coversFromSeq: 1,
  coversToSeq: to,
  text: block.content,
  mode: "one_shot",
  depth: 1,
  block,
})

describe("ProviderSummary: which backend", () => {
  it("defaults to provider where the model has on-demand compaction and binds thinking, in the anthropic format only", () => {
    expect(ProviderSummary.backendFor(undefined, OPUS, "anthropic")).toBe("provider")
    // on-demand compaction but no prefix check: ctxd unless asked
    expect(ProviderSummary.backendFor(undefined, "claude-opus-5", "anthropic")).toBe("ctxd")
    expect(ProviderSummary.backendFor("provider", "claude-opus-5", "anthropic")).toBe("provider")
    expect(ProviderSummary.backendFor("ctxd", OPUS, "anthropic")).toBe("ctxd")
    // no on-demand compaction (not on the docs' list), or another format: never provider
    expect(ProviderSummary.backendFor("provider", "claude-sonnet-4-5", "anthropic")).toBe("ctxd")
    expect(ProviderSummary.backendFor("provider", OPUS, "openai-responses")).toBe("ctxd")
  })

  it("moves the cut back to a user message that follows an assistant one", () => {
    expect(ProviderSummary.alignCut(stored(exchange(6)), 0, 5)).toBe(4)
    // a user message after tool results, or an assistant after an assistant, never qualifies
    const history = stored([user("a"), assistant("b"), { role: "tool", parts: [] }, user("c"), assistant("d"), assistant("e")])
    expect(ProviderSummary.alignCut(history, 0, 5)).toBeUndefined()
    expect(ProviderSummary.alignCut(stored(exchange(6)), 2, 3)).toBeUndefined()
  })
})

describe("ProviderSummary: the compaction request", () => {
  const thinking: Conversation.Message = {
    role: "assistant",
    parts: [
      { type: "opaque", format: "anthropic", block: { type: "thinking", thinking: "Look it up.", signature: "sig" } },
      { type: "text", text: "It shipped." },
    ],
  }
  const history = stored([user("Where is order 42?"), thinking, user("Thanks. And order 43?"), assistant("Looking.")])
  const messages = (name: string) =>
    JSON.stringify(ProviderSummary.requestMessages(history, undefined, 2, Models.resolve({ provider: "anthropic", name }), () => 1))

  it("holds the view up to the cut, without cache marks; thinking left out where the model binds it to a prefix", () => {
    expect(messages(OPUS)).toContain("It shipped.")
    expect(messages(OPUS)).not.toContain("order 43")
    expect(messages(OPUS)).not.toContain("cache_control")
    expect(messages(OPUS)).not.toContain('"thinking"')
    expect(messages("claude-opus-5")).toContain('"thinking"')
  })
})

describe("View: a provider-written summary", () => {
  it("is sent as the signed block, verbatim, in place of exactly the span; its text elsewhere", () => {
    const history = stored(exchange(8))
    const view = View.applySummary(history, summary(4), () => 5, "anthropic")
    expect(view.messages[0]!.message).toEqual(View.blockMessage(block))
    expect(view.messages.slice(1)).toEqual(history.slice(4))
    expect(view.prefixLength).toBe(1)
    const other = View.applySummary(history, summary(4), () => 5, "openai")
    expect(JSON.stringify(other.messages[0]!.message)).toContain(block.content)
    expect(JSON.stringify(other.messages)).not.toContain("fakecmp1")
  })

  it("property: the swap drops exactly the summarized messages and keeps every one appended since, in order", () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 40 }), fc.integer({ min: 0, max: 20 }), (span, appended) => {
        const history = stored(exchange(span + appended + 1))
        const view = View.applySummary(history, summary(span), () => 1, "anthropic")
        expect(view.messages).toHaveLength(1 + history.length - span)
        expect(view.messages.slice(1).map((m) => m.seq)).toEqual(history.slice(span).map((m) => m.seq))
        expect(View.extend(view, stored(exchange(span + appended + 3))).messages.slice(1)).toEqual(
          stored(exchange(span + appended + 3)).slice(span),
        )
      }),
    )
  })

  it("renders first in an Anthropic body, with no continuation message before it", () => {
    const view = View.applySummary(stored(exchange(6)), summary(4), () => 5, "anthropic")
    const body = AnthropicProvider.Render.render({
      model: Models.resolve({ provider: "anthropic", name: OPUS }),
      system: [],
      tools: [],
      messages: view.messages.map((m) => m.message),
    }).body
    const messages = body["messages"] as Array<{ role: string; content: Array<Record<string, unknown>> }>
    expect(messages[0]!.role).toBe("assistant")
    expect(messages[0]!.content[0]).toMatchObject(block)
  })
})

let server: FakeProvider.FakeProviderServer
beforeAll(async () => {
  server = await FakeProvider.start()
  Fixture.warmUp()
})
afterAll(() => server?.close())
beforeEach(() => server.reset())

const layers = () =>
  Layer.mergeAll(SessionStore.layerMemory(), CompactionStore.layerMemory()).pipe(Layer.provideMerge(Fixture.summarizer(server)))

const MODEL = { provider: "anthropic", name: OPUS, contextWindow: 16_000, maxOutputTokens: 2_000 } as const

const compactOnce = (session: string, backend: ProviderSummary.Backend) =>
  Effect.gen(function* () {
    yield* Fixture.storeSession("acme", session, Fixture.tauMessages(120))
    const compactor = yield* Fixture.compactor()
    const result = yield* compactor.compact({ tenant: "acme", session, model: MODEL, trigger: "manual", format: "anthropic", backend })
    const live = Option.getOrUndefined(yield* (yield* CompactionStore.CompactionStore).latestSummary("acme", session))
    const history = yield* (yield* SessionStore.SessionStore).loadMessages("acme", session, 0)
    return { result, live, history }
  })

describe("Compactor: the provider backend through the SDK", () => {
  effectIt.live("asks the API for the summary, stores the signed block with its readable copy; later bodies pass", () =>
    Effect.gen(function* () {
      server.control({ replies: [{ text: "Provider summary: the customer changed two orders." }] })
      const { result, live, history } = yield* compactOnce(Fixture.fresh(), "provider")
      expect(result.outcome).toBe("ok")
      expect(live?.block?.["type"]).toBe("compaction")
      expect(live?.text).toBe("Provider summary: the customer changed two orders.")
      const asked = server.requests().find((r) => JSON.stringify(r.body).includes('"summarize"'))
      expect(asked?.headers["anthropic-beta"]).toContain("compact-2026-09-04")
      // the kept tail starts with a user message after an assistant one
      const kept = history.findIndex((m) => m.seq === live!.coversToSeq + 1)
      expect(history[kept]!.message.role).toBe("user")
      expect(history[kept - 1]!.message.role).toBe("assistant")
      // a later turn's body: the block first, then the kept messages; the fake provider verifies the signature
      const view = View.applySummary(history, live, () => 1, "anthropic")
      const body = AnthropicProvider.Render.render({
        model: Models.resolve(MODEL),
        system: [{ id: "s", text: "You are a support agent.", cache: "5m" }],
        tools: [],
        messages: view.messages.map((m) => m.message),
      }).body
      const sent = yield* Effect.promise(() =>
        fetch(`${server.url}/v1/messages`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-api-key": "test",
            "anthropic-version": "2023-06-01",
            "anthropic-beta": "compact-2026-09-04",
          },
          body: JSON.stringify(body),
        }),
      )
      expect(sent.status).toBe(200)
      const tampered = {
        ...body,
        messages: [
          { role: "assistant", content: [{ ...live!.block, content: "edited" }] },
          ...(body["messages"] as Array<unknown>).slice(1),
        ],
      }
      const refused = yield* Effect.promise(() =>
        fetch(`${server.url}/v1/messages`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-api-key": "test",
            "anthropic-version": "2023-06-01",
            "anthropic-beta": "compact-2026-09-04",
          },
          body: JSON.stringify(tampered),
        }).then((r) => r.json() as Promise<{ error: { details: { error_code: string } } }>),
      )
      expect(refused.error.details.error_code).toBe("compaction_content_mismatch")
    }).pipe(Effect.provide(layers())),
  )

  effectIt.live("a provider error falls back to ctxd's summarizer for the same job: a whole summary, never a half-written one", () =>
    Effect.gen(function* () {
      server.control({ replies: [{ error: { status: 400, message: "compaction refused (scripted)" } }] })
      const { result, live } = yield* compactOnce(Fixture.fresh(), "provider")
      expect(result.outcome).toBe("ok")
      expect(live?.block).toBeUndefined()
      expect(live?.text.length).toBeGreaterThan(0)
      expect(result.detail).toContain("provider summary failed")
    }).pipe(Effect.provide(layers())),
  )

  effectIt.live("server errors are retried like the summarizer's calls; the provider still writes the summary", () =>
    Effect.gen(function* () {
      server.control({ failNext: 2 })
      const { result, live } = yield* compactOnce(Fixture.fresh(), "provider")
      expect(result.outcome).toBe("ok")
      expect(live?.block?.["type"]).toBe("compaction")
      expect(server.requests().filter((r) => r.status === 500)).toHaveLength(2)
    }).pipe(Effect.provide(layers())),
  )

  effectIt.live("the request carries the system and tools the session's latest prompt sent", () =>
    Effect.gen(function* () {
      const session = Fixture.fresh()
      const messages = Fixture.tauMessages(120)
      const system = [{ type: "text", text: "You are an airline agent.", cache_control: { type: "ephemeral" } }]
      const tools = [{ name: "get_user", description: "Look a user up", input_schema: { type: "object", properties: {} } }]
      yield* (yield* SessionStore.SessionStore).commitTurn({
        tenant: "acme",
        session,
        turnId: "t-1",
        requestHash: "h",
        expectedLastSeq: 0,
        messages: messages.map((message) => ({
          message,
          tokens: Fixture.counter.countMessage(message, "o200k_base"),
          encoding: "o200k_base",
        })),
        reply: { ok: true, request: { model: OPUS, max_tokens: 2_000, system, tools, messages: [] } },
      })
      const compactor = yield* Fixture.compactor()
      const result = yield* compactor.compact({
        tenant: "acme",
        session,
        model: MODEL,
        trigger: "manual",
        format: "anthropic",
        backend: "provider",
      })
      expect(result.outcome).toBe("ok")
      const asked = server.requests().find((r) => JSON.stringify(r.body).includes('"summarize"'))!.body as Record<string, unknown>
      expect(asked["system"]).toEqual(system)
      expect(asked["tools"]).toEqual(tools)
      expect(JSON.stringify(asked["messages"])).toContain('"tool_use"')
      expect(ProviderSummary.prefixOf({ ok: true })).toEqual({})
    }).pipe(Effect.provide(layers())),
  )

  effectIt.live("the ctxd backend never asks for an on-demand summary", () =>
    Effect.gen(function* () {
      const { live } = yield* compactOnce(Fixture.fresh(), "ctxd")
      expect(live?.block).toBeUndefined()
      expect(server.requests().some((r) => JSON.stringify(r.body).includes('"summarize"'))).toBe(false)
    }).pipe(Effect.provide(layers())),
  )
})
