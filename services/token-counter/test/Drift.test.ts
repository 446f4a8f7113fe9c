/**
 * Drift and calibration over replayed tau-bench sessions: tiktoken estimates
 * against the usage the fake provider bills (Claude tokenizer ground truth).
 */
import Anthropic from "@anthropic-ai/sdk"
import type { Conversation } from "@ctxd/contracts"
import { FakeProvider } from "@ctxd/testing"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import { Calibration, CalibrationState, TokenCounter, UsageEndpoint } from "../src/index.ts"
import { Tokens as UsageSchema } from "@ctxd/contracts"
import * as Replay from "./Replay.ts"

let server: FakeProvider.FakeProviderServer
let client: Anthropic
beforeAll(async () => {
  server = await FakeProvider.start()
  client = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
})
afterAll(() => server.close())

const ids = { tenant: "acme", session: "s1" }

describe("drift and calibration", () => {
  it.scopedLive("calibrated drift p99 ≤ 3 % after 20 usage reports (fake ground truth vs tiktoken)", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({ backend: "tiktoken" })
      const calibrated: Array<number> = []
      const raw: Array<number> = []
      let reports = 0
      for (const [index, session] of Replay.tauBench().entries()) {
        const history: Array<Conversation.Message> = []
        let historyTokens = 0
        for (const messages of session.turns) {
          const count = yield* service.countTurn({
            tenant: ids.tenant,
            model: Replay.MODEL,
            system: session.system,
            tools: session.tools,
            messages,
          })
          history.push(...messages)
          historyTokens += count.messageTokens.reduce((a, b) => a + b, 0)
          const estimate = count.systemTokens + count.toolsTokens + historyTokens
          // the first sessions go through the real SDK (Anthropic usage, cache reads and writes);
          // the rest report the same ground truth in OpenAI field names
          const usage =
            index < 4
              ? (yield* Effect.promise(() =>
                  client.messages.create(Replay.render(session, history) as unknown as Anthropic.MessageCreateParamsNonStreaming),
                )).usage
              : { prompt_tokens: Replay.groundTruth(session, history), completion_tokens: 12, prompt_tokens_details: { cached_tokens: 0 } }
          const result = yield* service.recordUsage({
            ...ids,
            turnId: `${session.id}-${reports}`,
            model: Replay.MODEL,
            usage,
            estimate,
            backend: count.backend,
            calibration: count.calibration,
          })
          expect(result.billed).toBe(Replay.groundTruth(session, history))
          reports++
          if (reports > 20) {
            calibrated.push(Math.abs(result.drift))
            raw.push(Math.abs(Calibration.drift(estimate / count.calibration, result.billed)))
          }
        }
      }
      const p99 = Calibration.quantile(calibrated, 0.99)
      const rawP99 = Calibration.quantile(raw, 0.99)
      expect(calibrated.length).toBeGreaterThan(80)
      expect(p99).toBeLessThanOrEqual(0.03)
      expect(p99).toBeLessThan(rawP99)
      expect(Calibration.quantile(calibrated, 0.5)).toBeLessThan(Calibration.quantile(raw, 0.5))

      const metrics = yield* service.metrics
      const key = CalibrationState.modelKey(Replay.MODEL)
      expect(metrics.drift[key]!.count).toBe(reports)
      expect(metrics.drift[key]!.absP99).toBeLessThanOrEqual(0.03)
      expect(metrics.factors[`${key}#tiktoken`]!.reports).toBe(reports)
      expect(metrics.factors[`${key}#tiktoken`]!.factor).toBeGreaterThan(1)
      expect(metrics.factors[`${key}#tiktoken`]!.tenants).toBe(1)
      // a new turn carries the factor it applied: the tenant's own; without a tenant, the global one
      const next = yield* service.countTurn({
        tenant: ids.tenant,
        model: Replay.MODEL,
        system: [],
        tools: [],
        messages: Replay.typical().turns[0]!,
      })
      expect(next.calibration).toBeGreaterThan(metrics.factors[`${key}#tiktoken`]!.factor)
      const anonymous = yield* service.countTurn({ model: Replay.MODEL, system: [], tools: [], messages: Replay.typical().turns[0]! })
      expect(anonymous.calibration).toBe(metrics.factors[`${key}#tiktoken`]!.factor)
    }),
  )

  it.scoped("bad usage reports are rejected with a clear error and do not touch calibration", () =>
    Effect.gen(function* () {
      const service = yield* TokenCounter.make({ backend: "tiktoken" })
      const report = (usage: unknown, estimate = 1_000) =>
        Effect.either(service.recordUsage({ ...ids, turnId: "t1", model: Replay.MODEL, usage, estimate }))
      yield* report({ input_tokens: 1_100 })
      const before = yield* service.metrics

      const cases: ReadonlyArray<readonly [unknown, number, string, string]> = [
        [{ input_tokens: -3 }, 1_000, "malformed", "usage.input_tokens must not be negative, got -3"],
        [
          { output_tokens: 3 },
          1_000,
          "malformed",
          "usage has neither input_tokens (Anthropic) nor prompt_tokens (OpenAI) nor promptTokenCount (Gemini)",
        ],
        [{ prompt_tokens: "many" }, 1_000, "malformed", 'usage.prompt_tokens must be a number of tokens, got "many"'],
        [{ input_tokens: 0 }, 1_000, "malformed", "usage bills 0 prompt tokens; there is nothing to compare the estimate with"],
        ["usage", 1_000, "malformed", "usage must be an object with the provider's token counts"],
        [{ input_tokens: 10 }, -1, "bad_estimate", "the turn's estimate must be a positive number of tokens, got -1"],
        [{ input_tokens: 10 }, Number.NaN, "bad_estimate", "the turn's estimate must be a positive number of tokens, got NaN"],
      ]
      for (const [usage, estimate, reason, message] of cases) {
        const result = yield* report(usage, estimate)
        expect(Either.isLeft(result)).toBe(true)
        if (Either.isLeft(result)) {
          expect(result.left).toBeInstanceOf(UsageSchema.BadUsage)
          expect({ reason: result.left.reason, message: result.left.message }).toEqual({ reason, message })
        }
      }

      // through the usage endpoint's handler: unknown turn, schema violations, bad JSON
      const lookup: UsageEndpoint.Lookup<never, never> = (_tenant, _session, turnId) =>
        Effect.succeed(
          turnId === "known" ? Option.some({ model: Replay.MODEL, estimate: 1_000, backend: "tiktoken", calibration: 1 }) : Option.none(),
        )
      const send = (value: unknown) =>
        Effect.provideService(
          UsageEndpoint.handle(
            ids.tenant,
            ids.session,
            new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value)),
            lookup,
          ),
          TokenCounter.TokenCounter,
          service,
        )
      expect(yield* send({ turnId: "nope", usage: { input_tokens: 900 } })).toEqual({
        ok: false,
        error: {
          code: "BadRequest",
          message: 'unknown turn "nope": no turn with this id was answered for this session',
          path: "turnId",
          hint: "report usage with the turnId of a turn this session answered",
        },
      })
      expect(yield* send({ turnId: "known", usage: { input_tokens: -1 } })).toMatchObject({ ok: false, error: { code: "BadRequest" } })
      expect(yield* send({ usage: { input_tokens: 5 } })).toMatchObject({
        ok: false,
        error: { code: "BadRequest", message: expect.stringContaining("turnId") },
      })
      expect(yield* send("{nope")).toMatchObject({ ok: false, error: { code: "BadRequest" } })
      expect(yield* send({ turnId: "known", usage: { prompt_tokens: 5, prompt_tokens_details: { cached_tokens: 9 } } })).toMatchObject({
        ok: false,
        error: { code: "BadRequest", path: "usage.prompt_tokens_details.cached_tokens" },
      })

      const after = yield* service.metrics
      expect(after.factors).toEqual(before.factors)
      expect(after.drift).toEqual(before.drift)

      // and a good one goes through
      const ok = yield* send({
        turnId: "known",
        usage: { input_tokens: 100, cache_read_input_tokens: 900, cache_creation_input_tokens: 100 },
      })
      expect(ok).toEqual({ ok: true, turnId: "known", billed: 1_100, drift: (1_000 - 1_100) / 1_100, factor: 1.1, counted: true })
    }),
  )
})
