/**
 * The exact backend for Anthropic: the `count_tokens` endpoint through
 * `@anthropic-ai/sdk` (`new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout })`),
 * behind its own breaker, bulkhead, timeout, single flight and cache
 * ({@link ExactCounter.makeCalls}).
 *
 * Segment-wise, so a warm session costs at most one call per turn: the tools
 * block, the system block and the batch of a turn's new messages are counted
 * with one call each, and each count is cached; the stable prefix hits the
 * cache from the second turn on. Every request carries a fixed envelope (see
 * `AnthropicProvider.CountBody`) whose cost (the baseline, measured once per
 * model) is subtracted, so segment counts add up. All new messages of a turn
 * go in one call; its total is attributed to the messages in proportion to
 * their local estimates. The per-request framing, measured from the same
 * baselines, is reported once with the system block. A cold turn needs 3
 * calls plus the 3 baselines.
 */
import Anthropic, { APIConnectionError, APIConnectionTimeoutError, APIError } from "@anthropic-ai/sdk"
import { Effect, type Scope } from "effect"
import * as ExactCounter from "./ExactCounter.ts"
import { AnthropicProvider } from "@ctxd/context"

export { CountFailed } from "./ExactCounter.ts"
export type { FailureReason, Options, Stats, TurnCounts, TurnInput } from "./ExactCounter.ts"

/** The exact backend for Anthropic (the common port). */
export type AnthropicCounter = ExactCounter.ExactCounter

/** Top-level keys `count_tokens` accepts; the rest of a Messages body (`max_tokens`, `stream`...) is dropped. */
const COUNT_KEYS: ReadonlySet<string> = new Set([
  "messages",
  "system",
  "tools",
  "tool_choice",
  "thinking",
  "mcp_servers",
  "context_management",
  "output_config",
  "output_format",
])

const classify = ExactCounter.classifySdkError({ APIConnectionTimeoutError, APIConnectionError, APIError })

type Json = Readonly<Record<string, unknown>>
const json = (body: AnthropicProvider.CountBody.CountBody): Json => body as unknown as Json

/** Builds the exact backend; its calls run in the current scope. */
export const make = (options: ExactCounter.Options = {}): Effect.Effect<AnthropicCounter, never, Scope.Scope> =>
  Effect.gen(function* () {
    const timeoutMs = options.timeoutMs ?? 2_000
    const apiKey = ExactCounter.keyOf(options.apiKey)
    const client = new Anthropic({
      ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
      ...(apiKey === undefined ? {} : { apiKey }),
      maxRetries: 0,
      timeout: timeoutMs,
    })
    const calls = yield* ExactCounter.makeCalls(
      {
        name: "anthropic count_tokens",
        span: "anthropic.count_tokens",
        system: "anthropic",
        request: (model, body, signal) =>
          client.messages
            .countTokens({ ...body, model } as unknown as Anthropic.MessageCountTokensParams, { signal, timeout: timeoutMs, maxRetries: 0 })
            .then((r) => r.input_tokens),
        classify,
        secret: client.apiKey,
      },
      options,
    )

    /** The cost of an envelope alone, measured once per model. */
    const baseline = (model: string, envelope: AnthropicProvider.CountBody.Envelope) =>
      calls.baseline(model, envelope, json(AnthropicProvider.CountBody.envelopeBody(envelope)))

    const segment = (model: string, envelope: AnthropicProvider.CountBody.Envelope, body: AnthropicProvider.CountBody.CountBody) =>
      calls.segment(model, envelope, json(AnthropicProvider.CountBody.envelopeBody(envelope)), json(body))

    /** Framing of one request: plain − (stubUserAssistant − stubUser), i.e. the plain envelope minus one message. */
    const frame = (model: string) =>
      Effect.all([baseline(model, "plain"), baseline(model, "stubUser"), baseline(model, "stubUserAssistant")], {
        concurrency: "unbounded",
      }).pipe(Effect.map(([plain, user, userAssistant]) => Math.max(0, plain - (userAssistant - user))))

    const countTurn = (input: ExactCounter.TurnInput) =>
      Effect.gen(function* () {
        const hasSystem = AnthropicProvider.CountBody.system(input.system).length > 0
        const batch = input.messages.length === 0 ? undefined : AnthropicProvider.CountBody.batch(input.messages)
        const [framing, systemTokens, toolsTokens, batchTokens] = yield* Effect.all(
          [
            frame(input.model),
            hasSystem ? segment(input.model, "plain", AnthropicProvider.CountBody.systemBody(input.system)) : Effect.succeed(0),
            input.tools.length > 0 ? segment(input.model, "plain", AnthropicProvider.CountBody.toolsBody(input.tools)) : Effect.succeed(0),
            batch === undefined ? Effect.succeed(0) : segment(input.model, batch.envelope, batch.body),
          ],
          { concurrency: "unbounded" },
        )
        return {
          systemTokens: systemTokens + framing,
          toolsTokens,
          messageTokens: ExactCounter.apportion(batchTokens, input.weights),
          approximate: batch?.approximate ?? false,
        }
      })

    const countBody = (model: string, body: Readonly<Record<string, unknown>>) =>
      calls.cached(model, Object.fromEntries(Object.entries(body).filter(([k]) => COUNT_KEYS.has(k))))

    const countText = (model: string, text: string) =>
      text.trim() === ""
        ? Effect.succeed(0)
        : segment(model, "plain", AnthropicProvider.CountBody.systemBody([{ id: "text", text, cache: "none" }]))

    return { provider: "anthropic", backend: "anthropic_api", countTurn, countBody, countText, breaker: calls.breaker, stats: calls.stats }
  })
