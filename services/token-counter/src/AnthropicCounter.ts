/**
 * The exact backend: Anthropic's `count_tokens` endpoint through
 * `@anthropic-ai/sdk` (`new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout })`).
 *
 * Segment-wise, so a warm session costs at most one call per turn: the tools
 * block, the system block and the batch of a turn's new messages are counted
 * with one call each, and each count is cached (LRU, default 1,024 entries) by
 * the SHA-256 of the model and the request; the stable prefix hits the cache
 * from the second turn on. Every request carries a fixed envelope (see
 * `internal/AnthropicBody.ts`) whose cost (the baseline, measured once per
 * model) is subtracted, so segment counts add up. All new messages of a turn
 * go in one call; its total is attributed to the messages in proportion to
 * their local estimates. The per-request framing, measured from the same
 * baselines, is reported once with the system block.
 *
 * Every call goes through single-flight (identical concurrent requests make
 * one call), a bulkhead (at most `maxInFlight` segment calls at once, default
 * 16; more fail at once with `saturated` instead of queueing; a cold turn needs
 * 3), the circuit breaker, and
 * a timeout (default 2 s) that aborts the HTTP request.
 */
import Anthropic, { APIConnectionError, APIConnectionTimeoutError, APIError } from "@anthropic-ai/sdk"
import type { Conversation } from "@ctxd/contracts"
import { Data, Duration, Effect, Redacted, type Scope } from "effect"
import { createHash } from "node:crypto"
import * as CircuitBreaker from "./CircuitBreaker.ts"
import * as Body from "./internal/AnthropicBody.ts"
import { Spans } from "@ctxd/observe"
import { Lru } from "@ctxd/tokens"
import * as SingleFlight from "./SingleFlight.ts"

/** Why a count call failed. `rejected` (400/404/413/422: our request) does not count against the breaker. */
export type FailureReason = "timeout" | "rate_limited" | "server" | "connection" | "auth" | "rejected" | "saturated" | "unknown"

/** A `count_tokens` call failed. */
export class CountFailed extends Data.TaggedError("CountFailed")<{
  readonly reason: FailureReason
  readonly message: string
  readonly status?: number | undefined
}> {}

/** How to reach the provider; every field but the credentials has a default. */
export interface Options {
  /** Default: the SDK's (`ANTHROPIC_BASE_URL`, else the public API). */
  readonly baseURL?: string | undefined
  /** Default: the SDK's (`ANTHROPIC_API_KEY`). */
  readonly apiKey?: Redacted.Redacted<string> | string | undefined
  /** Per call; default 2,000 ms. */
  readonly timeoutMs?: number | undefined
  /** Cached segment counts; default 1,024. */
  readonly cacheCapacity?: number | undefined
  /** Calls in flight at once; default 16. */
  readonly maxInFlight?: number | undefined
  /** Breaker options (defaults: 3 failures, 30 s doubling to 300 s). */
  readonly breaker?: Omit<CircuitBreaker.Options, "isFailure" | "name"> | undefined
}

/** Exact counts of one turn's segments. */
export interface TurnCounts {
  /** The system block plus the per-request framing (so the parts add up to the whole request). */
  readonly systemTokens: number
  readonly toolsTokens: number
  /** The batch total split over the messages by their local estimates. */
  readonly messageTokens: ReadonlyArray<number>
  /** True when unpaired tool blocks in the batch had to be counted as text (see `internal/AnthropicBody.ts`). */
  readonly approximate: boolean
}

/** What {@link AnthropicCounter.countTurn} needs. */
export interface TurnInput {
  readonly model: string
  readonly system: ReadonlyArray<Conversation.SystemSection>
  readonly tools: ReadonlyArray<Conversation.Tool>
  readonly messages: ReadonlyArray<Conversation.Message>
  /** Local estimates of `messages`, the weights of the attribution. */
  readonly weights: ReadonlyArray<number>
}

/** Counters for metrics. */
export interface Stats {
  /** Provider calls started. */
  readonly calls: number
  readonly failures: number
  readonly cacheHits: number
  readonly cacheMisses: number
  readonly cacheSize: number
  /** Calls that joined an identical call in flight. */
  readonly shared: number
  /** Provider calls in flight now. */
  readonly inFlight: number
}

/** The exact backend. */
export interface AnthropicCounter {
  readonly countTurn: (input: TurnInput) => Effect.Effect<TurnCounts, CountFailed | CircuitBreaker.CircuitOpen>
  /** The input tokens of a whole Messages request body (keys `count_tokens` does not take are dropped). */
  readonly countBody: (model: string, body: Readonly<Record<string, unknown>>) => Effect.Effect<number, CountFailed | CircuitBreaker.CircuitOpen>
  /** Tokens of a text (as a system text block, without framing). */
  readonly countText: (model: string, text: string) => Effect.Effect<number, CountFailed | CircuitBreaker.CircuitOpen>
  readonly breaker: CircuitBreaker.CircuitBreaker
  readonly stats: () => Stats
}

/** Top-level keys `count_tokens` accepts; the rest of a Messages body (`max_tokens`, `stream`...) is dropped. */
const COUNT_KEYS: ReadonlySet<string> = new Set([
  "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers", "context_management", "output_config", "output_format",
])

const classify = (error: unknown): CountFailed => {
  const message = error instanceof Error ? error.message : String(error)
  if (error instanceof APIConnectionTimeoutError) return new CountFailed({ reason: "timeout", message })
  if (error instanceof APIConnectionError) return new CountFailed({ reason: "connection", message })
  if (error instanceof APIError && typeof error.status === "number") {
    const status = error.status
    const reason: FailureReason =
      status === 429 ? "rate_limited"
      : status >= 500 ? "server"
      : status === 401 || status === 403 ? "auth"
      : status === 400 || status === 404 || status === 413 || status === 422 ? "rejected"
      : "unknown"
    return new CountFailed({ reason, message, status })
  }
  return new CountFailed({ reason: "unknown", message })
}

const hashOf = (model: string, body: unknown): string =>
  createHash("sha256").update(model).update("\0").update(JSON.stringify(body)).digest("base64")

/** Builds the exact backend; its calls run in the current scope. */
export const make = (options: Options = {}): Effect.Effect<AnthropicCounter, never, Scope.Scope> =>
  Effect.gen(function* () {
    const timeoutMs = options.timeoutMs ?? 2_000
    const maxInFlight = Math.max(1, options.maxInFlight ?? 16)
    const apiKey = Redacted.isRedacted(options.apiKey) ? Redacted.value(options.apiKey) : options.apiKey
    const client = new Anthropic({
      ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
      ...(apiKey === undefined ? {} : { apiKey }),
      maxRetries: 0,
      timeout: timeoutMs,
    })
    const breaker = yield* CircuitBreaker.make({
      ...options.breaker,
      name: "anthropic count_tokens",
      isFailure: (e) => !(e instanceof CountFailed && (e.reason === "rejected" || e.reason === "saturated")),
    })
    const flights = yield* SingleFlight.make
    const cache = Lru.make<number>(options.cacheCapacity ?? 1_024)
    const baselines = new Map<string, number>()
    let calls = 0
    let failures = 0
    let inFlight = 0
    let segmentCalls = 0

    /**
     * One provider call: bulkhead, breaker, timeout (which aborts the request).
     * Baselines skip the bulkhead: there are three per model, once, and a cold
     * turn must not be refused for lack of room.
     */
    const call = (model: string, body: Readonly<Record<string, unknown>>, bulkhead = true) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend(() => {
          // reserve the slot in the same synchronous step as the check
          if (bulkhead && segmentCalls >= maxInFlight) {
            return Effect.fail(new CountFailed({ reason: "saturated", message: `${segmentCalls} count calls already in flight` }))
          }
          if (bulkhead) segmentCalls++
          const attempt = Effect.tryPromise({
            try: (signal) =>
              client.messages.countTokens({ ...body, model } as unknown as Anthropic.MessageCountTokensParams, {
                signal,
                timeout: timeoutMs,
                maxRetries: 0,
              }),
            catch: classify,
          }).pipe(
            Effect.timeoutFail({
              duration: Duration.millis(timeoutMs),
              onTimeout: () => new CountFailed({ reason: "timeout", message: `count_tokens took longer than ${timeoutMs} ms` }),
            }),
            Effect.map((r) => r.input_tokens),
          )
          const counted = Effect.acquireUseRelease(
            Effect.sync(() => {
              inFlight++
              calls++
            }),
            () => attempt,
            (_, exit) =>
              Effect.sync(() => {
                inFlight--
                if (exit._tag === "Failure") failures++
              }),
          )
          const traced = counted.pipe(
            Spans.child("anthropic.count_tokens", { kind: "client", attributes: { "gen_ai.system": "anthropic", "gen_ai.request.model": model } }),
          )
          return restore(breaker.run(traced)).pipe(
            Effect.ensuring(
              Effect.sync(() => {
                if (bulkhead) segmentCalls--
              }),
            ),
          )
        }),
      )

    /** A cached, single-flight count of `body` for `model`. */
    const cached = (model: string, body: Readonly<Record<string, unknown>>) =>
      Effect.suspend(() => {
        const key = hashOf(model, body)
        const hit = cache.get(key)
        if (hit !== undefined) return Effect.succeed(hit)
        return flights.run(key, Effect.tap(call(model, body), (n) => Effect.sync(() => cache.set(key, n))))
      })

    /** The cost of an envelope alone, measured once per model. */
    const baseline = (model: string, envelope: Body.Envelope) =>
      Effect.suspend(() => {
        const key = `${model}\0${envelope}`
        const known = baselines.get(key)
        if (known !== undefined) return Effect.succeed(known)
        return flights.run(
          `baseline\0${key}`,
          Effect.tap(call(model, Body.envelopeBody(envelope) as unknown as Record<string, unknown>, false), (n) =>
            Effect.sync(() => baselines.set(key, n)),
          ),
        )
      })

    const segment = (model: string, envelope: Body.Envelope, body: Body.CountBody) =>
      Effect.zipWith(baseline(model, envelope), cached(model, body as unknown as Record<string, unknown>), (base, n) => Math.max(0, n - base), {
        concurrent: true,
      })

    /** Framing of one request: plain − (stubUserAssistant − stubUser), i.e. the plain envelope minus one message. */
    const frame = (model: string) =>
      Effect.all([baseline(model, "plain"), baseline(model, "stubUser"), baseline(model, "stubUserAssistant")], {
        concurrency: "unbounded",
      }).pipe(Effect.map(([plain, user, userAssistant]) => Math.max(0, plain - (userAssistant - user))))

    const countTurn = (input: TurnInput) =>
      Effect.gen(function* () {
        const hasSystem = Body.system(input.system).length > 0
        const batch = input.messages.length === 0 ? undefined : Body.batch(input.messages)
        const [framing, systemTokens, toolsTokens, batchTokens] = yield* Effect.all(
          [
            frame(input.model),
            hasSystem ? segment(input.model, "plain", Body.systemBody(input.system)) : Effect.succeed(0),
            input.tools.length > 0 ? segment(input.model, "plain", Body.toolsBody(input.tools)) : Effect.succeed(0),
            batch === undefined ? Effect.succeed(0) : segment(input.model, batch.envelope, batch.body),
          ],
          { concurrency: "unbounded" },
        )
        return {
          systemTokens: systemTokens + framing,
          toolsTokens,
          messageTokens: Body.apportion(batchTokens, input.weights),
          approximate: batch?.approximate ?? false,
        }
      })

    const countBody = (model: string, body: Readonly<Record<string, unknown>>) =>
      cached(model, Object.fromEntries(Object.entries(body).filter(([k]) => COUNT_KEYS.has(k))))

    const countText = (model: string, text: string) =>
      text.trim() === ""
        ? Effect.succeed(0)
        : segment(model, "plain", Body.systemBody([{ id: "text", text, cache: "none" }]))

    return {
      countTurn,
      countBody,
      countText,
      breaker,
      stats: () => ({
        calls,
        failures,
        cacheHits: cache.hits(),
        cacheMisses: cache.misses(),
        cacheSize: cache.size(),
        shared: flights.shared(),
        inFlight,
      }),
    }
  })
