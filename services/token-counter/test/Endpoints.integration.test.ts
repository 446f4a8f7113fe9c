/** `ctx.v1.tokens.count` and `ctx.v1.usage.<tenant>.<session>` over a real NATS server. */
import { Subjects } from "@ctxd/contracts"
import { Json, Request } from "@ctxd/nats"
import { FakeProvider, TestNats } from "@ctxd/testing"
import { beforeAll, describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Layer, Option, Redacted, Schema } from "effect"
import { CountEndpoint, TokenCounter, UsageEndpoint } from "../src/index.ts"
import { Tokens as UsageSchema } from "@ctxd/contracts"
import * as Replay from "./Replay.ts"

// These tests check what the endpoints answer, not how fast: the request timeout and the count
// calls' deadline leave room for the event loop stalls of a loaded machine (the fake provider
// tokenizes on this process's loop), so a slow answer is never mistaken for a missing one or a fallback.
const call = (subject: string, value: unknown) =>
  Request.request(subject, Json.encode(value), { timeoutMs: 30_000 }).pipe(Effect.map((msg) => Either.getOrThrow(Json.decode(msg.data))))

const fake = Layer.scoped(
  TokenCounter.TokenCounter,
  Effect.flatMap(FakeProvider.scoped(), (server) =>
    TokenCounter.make({
      anthropic: { baseURL: server.url, apiKey: Redacted.make("test") },
      openai: { baseURL: `${server.url}/v1`, apiKey: Redacted.make("test") },
      google: { baseURL: server.url, apiKey: Redacted.make("test") },
      timeoutMs: 30_000,
    }),
  ),
).pipe(Layer.orDie)

beforeAll(() => Replay.warmUp())

describe("endpoints", () => {
  layer(Layer.merge(TestNats.layer("ctxd-token-counter-test"), fake), { excludeTestServices: true })((it) => {
    it.scoped(
      "ctx.v1.tokens.count counts bodies and segments and rejects malformed requests",
      () =>
        Effect.gen(function* () {
          const root = TestNats.uniqueRoot()
          yield* CountEndpoint.serve({ root })
          const subject = CountEndpoint.subject(root)
          expect(subject).toBe(`${root}.v1.tokens.count`)
          const session = Replay.typical()
          const messages = session.turns.slice(0, 3).flat()
          const body = Replay.render(session, messages)

          const exact = yield* call(subject, { model: Replay.MODEL, body })
          expect(exact).toEqual({
            ok: true,
            tokens: Replay.groundTruth(session, messages),
            backend: "anthropic_api",
            countedBy: "anthropic_api",
            encoding: "anthropic",
            exact: true,
            calibration: 1,
          })
          expect(Schema.is(UsageSchema.CountReply)(exact)).toBe(true)

          // OpenAI's own count: `backend` stays a name old clients decode, `countedBy` says whose count it is
          const responses = Replay.renderResponses(session, messages)
          const openaiExact = yield* call(subject, { model: Replay.OPENAI_MODEL, body: responses })
          expect(openaiExact).toEqual({
            ok: true,
            tokens: Replay.groundTruthResponses(session, messages),
            backend: "anthropic_api",
            countedBy: "openai_api",
            encoding: "openai",
            exact: true,
            calibration: 1,
          })
          expect(Schema.is(UsageSchema.CountReply)(openaiExact)).toBe(true)
          const geminiExact = yield* call(subject, { model: Replay.GEMINI_MODEL, body: Replay.renderGemini(session, messages) })
          expect(geminiExact).toMatchObject({
            tokens: Replay.groundTruthGemini(session, messages),
            backend: "anthropic_api",
            countedBy: "google_api",
            encoding: "google",
            exact: true,
          })
          expect(Schema.is(UsageSchema.CountReply)(geminiExact)).toBe(true)

          const local = yield* call(subject, {
            model: Replay.MODEL,
            backend: "tiktoken",
            segments: ["hello world", "The quick brown fox jumps over the lazy dog."],
          })
          expect(local).toEqual({
            ok: true,
            tokens: 12,
            segments: [2, 10],
            backend: "tiktoken",
            countedBy: "tiktoken",
            encoding: "cl100k_base",
            exact: false,
            calibration: 1,
          })

          // a Chat Completions body has no count endpoint: local, silently under auto, with the reason when openai_api was asked for
          const chat = { messages: [{ role: "user", content: "hello world" }] }
          const openai = yield* call(subject, { model: { provider: "openai", name: "gpt-4o" }, body: chat })
          expect(openai).toMatchObject({ ok: true, backend: "tiktoken", encoding: "o200k_base", exact: false })
          expect(openai).not.toHaveProperty("fallback")
          expect(yield* call(subject, { model: { provider: "openai", name: "gpt-4o" }, backend: "openai_api", body: chat })).toMatchObject({
            backend: "tiktoken",
            fallback: "chat_completions",
          })

          for (const bad of [
            { model: Replay.MODEL },
            { model: Replay.MODEL, body, segments: [] },
            { model: { provider: "x", name: "y" }, segments: [] },
            { body },
          ]) {
            expect(yield* call(subject, bad)).toMatchObject({ ok: false, error: { code: "BadRequest" } })
          }
        }),
      120_000,
    )

    it.scoped(
      "ctx.v1.usage.<tenant>.<session> records drift for known turns only",
      () =>
        Effect.gen(function* () {
          const subjects = Subjects.make(TestNats.uniqueRoot())
          yield* UsageEndpoint.serve({
            subjects,
            lookup: (tenant, session, turnId) =>
              Effect.succeed(
                tenant === "acme" && session === "s1" && turnId === "t1"
                  ? Option.some({ model: Replay.MODEL, estimate: 950, backend: "tiktoken", calibration: 1 })
                  : Option.none(),
              ),
          })
          const reply = yield* call(subjects.usage("acme", "s1"), {
            turnId: "t1",
            usage: { input_tokens: 50, cache_read_input_tokens: 900, cache_creation_input_tokens: 50, output_tokens: 7 },
          })
          expect(reply).toEqual({ ok: true, turnId: "t1", billed: 1_000, drift: -0.05, factor: 1_000 / 950, counted: true })
          // the same report again is a duplicate: answered, not counted
          expect(
            yield* call(subjects.usage("acme", "s1"), {
              turnId: "t1",
              usage: { input_tokens: 50, cache_read_input_tokens: 900, cache_creation_input_tokens: 50 },
            }),
          ).toMatchObject({ ok: true, counted: false, factor: 1_000 / 950 })
          expect(Schema.is(UsageSchema.UsageReply)(reply)).toBe(true)
          expect(yield* call(subjects.usage("acme", "s2"), { turnId: "t1", usage: { input_tokens: 5 } })).toMatchObject({
            ok: false,
            error: { code: "BadRequest", path: "turnId" },
          })
          const metrics = yield* Effect.flatMap(TokenCounter.TokenCounter, (s) => s.metrics)
          expect(metrics.drift["anthropic/claude-sonnet-4-6"]!.count).toBe(1)
        }),
      120_000,
    )

    it.scoped(
      "ctx.v1.tokens.count.<tenant> counts with the tenant's own factor; legacy: false drops the tenant-less subject",
      () =>
        Effect.gen(function* () {
          const subjects = Subjects.make(TestNats.uniqueRoot())
          yield* CountEndpoint.serve({ root: subjects.root, legacy: false })
          yield* UsageEndpoint.serve({
            subjects,
            lookup: (tenant, session, turnId) =>
              Effect.succeed(
                tenant === "initech" && session === "s1" && turnId === "t1"
                  ? Option.some({ model: Replay.MODEL, estimate: 800, backend: "tiktoken", calibration: 1 })
                  : Option.none(),
              ),
          })
          const usage = yield* call(subjects.usage("initech", "s1"), { turnId: "t1", usage: { input_tokens: 1_000 } })
          expect(usage).toMatchObject({ ok: true, counted: true })
          const factor = (usage as { factor: number }).factor
          expect(factor).toBeGreaterThan(1.1)
          const request = { model: Replay.MODEL, backend: "tiktoken", segments: ["The quick brown fox jumps over the lazy dog."] }
          const own = yield* call(subjects.tokensCountFor("initech"), request)
          expect(own).toMatchObject({ ok: true, countedBy: "tiktoken", exact: false, calibration: factor })
          expect(Schema.is(UsageSchema.CountReply)(own)).toBe(true)
          // another tenant has no reports of its own: a factor below initech's, its tokens fewer
          const other = yield* call(subjects.tokensCountFor("hooli"), request)
          expect((other as { calibration: number }).calibration).toBeLessThan(factor)
          expect((other as { tokens: number }).tokens).toBeLessThan((own as { tokens: number }).tokens)
          // the tenant-less subject is not served
          const legacy = yield* Effect.either(Request.request(subjects.tokensCount, Json.encode(request), { timeoutMs: 5_000 }))
          expect(Either.isLeft(legacy) && legacy.left._tag).toBe("NoResponders")
        }),
      120_000,
    )
  })
})
