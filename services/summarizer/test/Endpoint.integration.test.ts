/** `ctx.v1.summarize` over a real NATS server, the summarizer on the fake provider. */
import { Summarize } from "@ctxd/contracts"
import { Json, Request } from "@ctxd/nats"
import { FakeProvider, TestNats, Workloads } from "@ctxd/testing"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Schema } from "effect"
import { SummarizeEndpoint } from "../src/index.ts"
import * as Fixture from "./Fixture.ts"

const call = (subject: string, value: unknown) =>
  Request.request(subject, Json.encode(value), { timeoutMs: 10_000 }).pipe(Effect.map((msg) => Either.getOrThrow(Json.decode(msg.data))))

describe("ctx.v1.summarize", () => {
  it.scopedLive("summarizes OpenAI and Anthropic messages, rejects malformed requests, maps provider failures", () =>
    Effect.gen(function* () {
      const server = yield* FakeProvider.scoped()
      yield* body(server).pipe(Effect.provide(Layer.merge(Fixture.layer(server, { retries: 1 }), TestNats.layer("ctxd-summarizer-test"))))
    }),
  )
})

const body = (server: FakeProvider.FakeProviderServer) =>
  Effect.gen(function* () {
    const root = TestNats.uniqueRoot()
    yield* SummarizeEndpoint.serve({ root })
    const subject = SummarizeEndpoint.subject(root)
    expect(subject).toBe(`${root}.v1.summarize`)
    const session = Workloads.tauBenchSessions()[0]!
    const messages = session.turns.slice(0, 4).flatMap((t) => t.messages)

    const reply = yield* call(subject, { format: "openai", model: Fixture.GPT, messages, mode: "rolling", maxBullets: 3 })
    expect(reply).toMatchObject({
      ok: true,
      mode: "rolling",
      depth: 1,
      provider: "openai",
      model: "gpt-4o",
      fallback: null,
      snapshot: null,
    })
    expect(Schema.is(Summarize.SummarizeReply)(reply)).toBe(true)

    const anthropic = Workloads.toAnthropic(session)
      .turns.slice(0, 4)
      .flatMap((t) => t.messages)
    server.control({ replies: [{ text: JSON.stringify({ currentTask: { description: "help", state: "started" } }) }] })
    const structured = yield* call(subject, { format: "anthropic", model: Fixture.CLAUDE, messages: anthropic, mode: "structured" })
    expect(structured).toMatchObject({
      ok: true,
      mode: "structured",
      provider: "anthropic",
      snapshot: { currentTask: { description: "help" } },
    })

    for (const bad of [{}, { format: "openai", model: Fixture.GPT, messages: [] }, { format: "x", model: Fixture.GPT, messages }]) {
      expect(yield* call(subject, bad)).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    }
    // the tenant-scoped subject answers the same way; with legacy: false the tenant-less one is not served
    const tenantSubject = SummarizeEndpoint.tenantSubject("acme", root)
    expect(tenantSubject).toBe(`${root}.v1.summarize.acme`)
    expect(yield* call(tenantSubject, { format: "openai", model: Fixture.GPT, messages, mode: "rolling" })).toMatchObject({
      ok: true,
      mode: "rolling",
    })
    expect(yield* call(tenantSubject, {})).toMatchObject({ ok: false, error: { code: "BadRequest" } })
    const scoped = TestNats.uniqueRoot()
    yield* SummarizeEndpoint.serve({ root: scoped, legacy: false })
    expect(yield* call(SummarizeEndpoint.tenantSubject("acme", scoped), { format: "openai", model: Fixture.GPT, messages })).toMatchObject({
      ok: true,
    })
    const legacy = yield* Effect.either(Request.request(SummarizeEndpoint.subject(scoped), Json.encode({}), { timeoutMs: 5_000 }))
    expect(Either.isLeft(legacy) && legacy.left._tag).toBe("NoResponders")

    server.control({ failNext: 5 })
    expect(yield* call(subject, { format: "openai", model: Fixture.GPT, messages })).toMatchObject({
      ok: false,
      error: { code: "Unavailable" },
    })
  })
