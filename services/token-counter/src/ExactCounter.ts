/**
 * The exact backend's port: one shape for every provider's own count endpoint
 * ({@link AnthropicCounter} `count_tokens`, {@link OpenAICounter}
 * `responses.inputTokens.count`, `GeminiCounter` `models.countTokens`), and
 * the call machinery they share.
 *
 * Each provider's counter is its own instance of {@link makeCalls}: its own
 * circuit breaker, bulkhead, single flight, count cache and baselines, so a
 * sick provider opens its own breaker and never another's. Every call goes
 * through single flight (identical concurrent requests make one call), a
 * bulkhead (at most `maxInFlight` segment calls at once, default 16; more fail
 * at once with `saturated` instead of queueing), the circuit breaker, and a
 * timeout (default 2 s) that aborts the HTTP request. Counts are cached (LRU,
 * default 1,024 entries) by the SHA-256 of the model and the request body.
 *
 * The segment scheme (per provider, see each counter): a turn counts only its
 * new messages (older ones carry stored counts), so each segment (tools,
 * system, the batch of new messages) is counted inside a fixed envelope whose
 * cost (the baseline, measured once per model) is subtracted, so segment
 * counts add up to the count of the whole request.
 */
import type { Conversation } from "@ctxd/contracts"
import { ProviderErrors, Spans } from "@ctxd/observe"
import { Lru } from "@ctxd/tokens"
import { Data, Duration, Effect, Redacted, type Scope } from "effect"
import { createHash } from "node:crypto"
import * as CircuitBreaker from "./CircuitBreaker.ts"
import * as SingleFlight from "./SingleFlight.ts"

/** Why a count call failed. `rejected` (400/404/413/422: our request) and `saturated` do not count against the breaker. */
export type FailureReason = "timeout" | "rate_limited" | "server" | "connection" | "auth" | "rejected" | "saturated" | "unknown"

/** A provider count call failed. */
export class CountFailed extends Data.TaggedError("CountFailed")<{
  readonly reason: FailureReason
  readonly message: string
  readonly status?: number | undefined
}> {}

/** The providers with an exact count endpoint. */
export type Provider = "anthropic" | "openai" | "google"

/** The backend name of each provider's count (turn reports' `counter.backend`, `CTXD_TOKEN_BACKEND`). */
export type ExactBackend = "anthropic_api" | "openai_api" | "google_api"

export const backendOf: Readonly<Record<Provider, ExactBackend>> = {
  anthropic: "anthropic_api",
  openai: "openai_api",
  google: "google_api",
}

/** How to reach the provider; every field but the credentials has a default. */
export interface Options {
  /** Default: the SDK's (its base URL environment variable, else the public API). */
  readonly baseURL?: string | undefined
  /** Default: the SDK's (its API key environment variable). */
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
  /** True when the batch had to be changed beyond the renderer's own rules to be counted alone (see each provider's body builder). */
  readonly approximate: boolean
}

/** What {@link ExactCounter.countTurn} needs. */
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

export type Failure = CountFailed | CircuitBreaker.CircuitOpen

/** One provider's exact backend. */
export interface ExactCounter {
  readonly provider: Provider
  readonly backend: ExactBackend
  readonly countTurn: (input: TurnInput) => Effect.Effect<TurnCounts, Failure>
  /** The input tokens of a whole request body in the provider's format (keys its count endpoint does not take are dropped). */
  readonly countBody: (model: string, body: Readonly<Record<string, unknown>>) => Effect.Effect<number, Failure>
  /** Tokens of a text (as a system / instructions text, without framing). */
  readonly countText: (model: string, text: string) => Effect.Effect<number, Failure>
  readonly breaker: CircuitBreaker.CircuitBreaker
  readonly stats: () => Stats
}

/**
 * The API key to send: `option`'s, else the first of the environment
 * variables `fallbacks` that is set; a blank value counts as unset (an
 * `OPENAI_API_KEY=` line in an env file must not make an SDK constructor
 * throw at start).
 */
export const keyOf = (option: Redacted.Redacted<string> | string | undefined, ...fallbacks: ReadonlyArray<string>): string | undefined =>
  [Redacted.isRedacted(option) ? Redacted.value(option) : option, ...fallbacks.map((name) => process.env[name])].find(
    (value): value is string => value !== undefined && value.trim() !== "",
  )

/** Maps an HTTP status to a failure reason. */
export const reasonOfStatus = (status: number): FailureReason =>
  status === 429
    ? "rate_limited"
    : status >= 500
      ? "server"
      : status === 401 || status === 403
        ? "auth"
        : status === 400 || status === 404 || status === 413 || status === 422
          ? "rejected"
          : "unknown"

const hashOf = (model: string, body: unknown): string =>
  createHash("sha256").update(model).update("\0").update(JSON.stringify(body)).digest("base64")

/** What a provider's counter plugs into {@link makeCalls}. */
export interface Transport {
  /** Breaker and span name, e.g. `anthropic count_tokens`. */
  readonly name: string
  /** The span of one call, e.g. `anthropic.count_tokens`. */
  readonly span: string
  /** `gen_ai.system` of the span. */
  readonly system: string
  /** One count call through the provider's SDK (no retries, aborted by `signal`). */
  readonly request: (model: string, body: Readonly<Record<string, unknown>>, signal: AbortSignal) => Promise<number>
  /** An SDK error as a {@link CountFailed}. */
  readonly classify: (error: unknown) => CountFailed
  /** The API key the calls send: replaced in failure messages, since a provider's error may echo it. */
  readonly secret?: string | null | undefined
}

/** `failure` with every occurrence of `secret` in its message replaced by `[redacted]`. */
export const scrub = (failure: CountFailed, secret: string | null | undefined): CountFailed =>
  secret === undefined || secret === null || secret.length < 4 || !failure.message.includes(secret)
    ? failure
    : new CountFailed({
        reason: failure.reason,
        message: failure.message.replaceAll(secret, "[redacted]"),
        ...(failure.status === undefined ? {} : { status: failure.status }),
      })

/** The shared machinery of one provider's counter. */
export interface Calls {
  /** A cached, single-flight, bulkheaded count of `body` for `model`. */
  readonly cached: (model: string, body: Readonly<Record<string, unknown>>) => Effect.Effect<number, Failure>
  /** The count of a fixed envelope, measured once per model and kept (outside the bulkhead: a cold turn must not be refused for lack of room). */
  readonly baseline: (model: string, envelope: string, body: Readonly<Record<string, unknown>>) => Effect.Effect<number, Failure>
  /** `count(body) − baseline(envelope)`, both concurrently, at least 0. */
  readonly segment: (
    model: string,
    envelope: string,
    envelopeBody: Readonly<Record<string, unknown>>,
    body: Readonly<Record<string, unknown>>,
  ) => Effect.Effect<number, Failure>
  readonly breaker: CircuitBreaker.CircuitBreaker
  readonly stats: () => Stats
}

/** Builds one provider's call machinery (breaker, bulkhead, timeout, single flight, cache); calls run in the current scope. */
export const makeCalls = (transport: Transport, options: Options): Effect.Effect<Calls, never, Scope.Scope> =>
  Effect.gen(function* () {
    const timeoutMs = options.timeoutMs ?? 2_000
    const maxInFlight = Math.max(1, options.maxInFlight ?? 16)
    const breaker = yield* CircuitBreaker.make({
      ...options.breaker,
      name: transport.name,
      isFailure: (e) => !(e instanceof CountFailed && (e.reason === "rejected" || e.reason === "saturated")),
    })
    const flights = yield* SingleFlight.make
    const cache = Lru.make<number>(options.cacheCapacity ?? 1_024)
    const baselines = new Map<string, number>()
    let calls = 0
    let failures = 0
    let inFlight = 0
    let segmentCalls = 0

    /** One provider call: bulkhead, breaker, timeout (which aborts the request). */
    const call = (model: string, body: Readonly<Record<string, unknown>>, bulkhead = true) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend(() => {
          // reserve the slot in the same synchronous step as the check
          if (bulkhead && segmentCalls >= maxInFlight) {
            return Effect.fail(new CountFailed({ reason: "saturated", message: `${segmentCalls} count calls already in flight` }))
          }
          if (bulkhead) segmentCalls++
          const attempt = Effect.tryPromise({
            try: (signal) => transport.request(model, body, signal),
            catch: (error) => scrub(transport.classify(error), transport.secret),
          }).pipe(
            Effect.timeoutFail({
              duration: Duration.millis(timeoutMs),
              onTimeout: () => new CountFailed({ reason: "timeout", message: `${transport.name} took longer than ${timeoutMs} ms` }),
            }),
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
            Spans.child(transport.span, {
              kind: "client",
              attributes: { "gen_ai.system": transport.system, "gen_ai.request.model": model },
            }),
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

    const cached = (model: string, body: Readonly<Record<string, unknown>>) =>
      Effect.suspend(() => {
        const key = hashOf(model, body)
        const hit = cache.get(key)
        if (hit !== undefined) return Effect.succeed(hit)
        return flights.run(
          key,
          Effect.tap(call(model, body), (n) => Effect.sync(() => cache.set(key, n))),
        )
      })

    const baseline = (model: string, envelope: string, body: Readonly<Record<string, unknown>>) =>
      Effect.suspend(() => {
        const key = `${model}\0${envelope}`
        const known = baselines.get(key)
        if (known !== undefined) return Effect.succeed(known)
        return flights.run(
          `baseline\0${key}`,
          Effect.tap(call(model, body, false), (n) => Effect.sync(() => baselines.set(key, n))),
        )
      })

    const segment = (
      model: string,
      envelope: string,
      envelopeBody: Readonly<Record<string, unknown>>,
      body: Readonly<Record<string, unknown>>,
    ) =>
      Effect.zipWith(baseline(model, envelope, envelopeBody), cached(model, body), (base, n) => Math.max(0, n - base), { concurrent: true })

    return {
      cached,
      baseline,
      segment,
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

/**
 * Splits `total` over items in proportion to `weights` (local estimates),
 * with largest-remainder rounding so the parts are integers that sum to
 * `total` exactly. Zero weights everywhere: an even split.
 */
export const apportion = (total: number, weights: ReadonlyArray<number>): Array<number> => {
  if (weights.length === 0) return []
  const clean = weights.map((w) => (Number.isFinite(w) && w > 0 ? w : 0))
  const sum = clean.reduce((a, b) => a + b, 0)
  const target = Math.max(0, Math.round(total))
  const shares = clean.map((w) => (sum === 0 ? target / clean.length : (target * w) / sum))
  const parts = shares.map(Math.floor)
  let left = target - parts.reduce((a, b) => a + b, 0)
  const order = shares.map((s, i) => [s - Math.floor(s), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1])
  for (const [, i] of order) {
    if (left <= 0) break
    parts[i]!++
    left--
  }
  return parts
}

/** The framing of one request under `calls`: `plain − (twoDots − plain)`, from two baselines. */
export const framing = (
  calls: Calls,
  model: string,
  plain: Readonly<Record<string, unknown>>,
  twoDots: Readonly<Record<string, unknown>>,
): Effect.Effect<number, Failure> =>
  Effect.all([calls.baseline(model, "plain", plain), calls.baseline(model, "twoDots", twoDots)], { concurrency: "unbounded" }).pipe(
    Effect.map(([one, two]) => Math.max(0, one - (two - one))),
  )

/**
 * A turn counted where the provider reads the system and the tools together
 * (OpenAI `instructions` + `tools`, Gemini's system instruction + tools): the
 * prefix and the tools alone are counted, the system is their difference;
 * the batch of new messages is apportioned over them by `weights`. All
 * counts run concurrently; an absent segment counts 0.
 */
export const prefixedTurn = (parts: {
  readonly framing: Effect.Effect<number, Failure>
  readonly prefix: Effect.Effect<number, Failure> | undefined
  readonly tools: Effect.Effect<number, Failure> | undefined
  readonly batch: { readonly tokens: Effect.Effect<number, Failure>; readonly approximate: boolean } | undefined
  readonly weights: ReadonlyArray<number>
}): Effect.Effect<TurnCounts, Failure> =>
  Effect.all(
    [parts.framing, parts.prefix ?? Effect.succeed(0), parts.tools ?? Effect.succeed(0), parts.batch?.tokens ?? Effect.succeed(0)],
    {
      concurrency: "unbounded",
    },
  ).pipe(
    Effect.map(([framing, prefixTokens, toolsTokens, batchTokens]) => ({
      systemTokens: Math.max(0, prefixTokens - toolsTokens) + framing,
      toolsTokens: Math.min(toolsTokens, prefixTokens),
      messageTokens: apportion(batchTokens, parts.weights),
      approximate: parts.batch?.approximate ?? false,
    })),
  )

/** The error classes of a Stainless-generated SDK (`@anthropic-ai/sdk`, `openai`). */
export interface SdkErrors {
  readonly APIConnectionTimeoutError: abstract new (...args: never) => Error
  readonly APIConnectionError: abstract new (...args: never) => Error
  readonly APIError: abstract new (...args: never) => Error & { readonly status?: number | undefined }
}

/**
 * Classifies an error of a Stainless-generated SDK: timeout, connection, by
 * HTTP status, else unknown. The message holds the status, the provider's
 * error type and code, the request id and the body's size, never the body
 * (`ProviderErrors.safeMessage`): a provider may echo the counted request.
 */
export const classifySdkError =
  (sdk: SdkErrors) =>
  (error: unknown): CountFailed => {
    const message = ProviderErrors.safeMessage(error)
    if (error instanceof sdk.APIConnectionTimeoutError) return new CountFailed({ reason: "timeout", message })
    if (error instanceof sdk.APIConnectionError) return new CountFailed({ reason: "connection", message })
    if (error instanceof sdk.APIError && typeof error.status === "number") {
      return new CountFailed({ reason: reasonOfStatus(error.status), message, status: error.status })
    }
    return new CountFailed({ reason: "unknown", message })
  }
