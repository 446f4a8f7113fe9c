/**
 * The token counter: counts a turn's tokens for the assembler (in-process)
 * and for `ctx.v1.tokens.count`.
 *
 * - Backends: exact, one per provider with a count endpoint
 *   ({@link ExactCounter}): `anthropic_api` ({@link AnthropicCounter},
 *   `count_tokens`), `openai_api` (`OpenAICounter`, Responses
 *   `input_tokens`) and `google_api` ({@link GeminiCounter}, `countTokens`);
 *   local: `tiktoken` and `heuristic` (`@ctxd/tokens`). `auto` (the default)
 *   = the model's provider's count when that provider is configured
 *   (`ANTHROPIC_API_KEY` / `ANTHROPIC_BASE_URL`, `OPENAI_API_KEY` /
 *   `OPENAI_BASE_URL`, `GEMINI_API_KEY` / `GOOGLE_GEMINI_BASE_URL`), else
 *   `tiktoken`. OpenAI Chat Completions turns and bodies have no count
 *   endpoint: they are counted locally (`fallback: "chat_completions"` when
 *   `openai_api` was asked for by name); so are `google` turns in another
 *   format than `gemini` (`unsupported_format`).
 * - Local fallbacks per family: o200k for current OpenAI models (cl100k for
 *   gpt-4 / gpt-3.5), cl100k for Claude, Gemini and everything else, each
 *   times its calibration factor (see `CalibrationState`: a new model starts
 *   from its family's factor; Gemini's from a documented 1.05).
 * - Never fails and never waits on a sick provider: each provider's counter
 *   has its own breaker, bulkhead, timeout, single flight and cache; when its
 *   breaker is open, the call fails, the bulkhead is full or the answer takes
 *   longer than the timeout (default 2 s), the local `tiktoken` backend
 *   answers with `exact: false` and the reason in `fallback`. A sick provider
 *   never touches another provider's breaker or exactness.
 * - `exact` is true only for a provider count while that provider's breaker
 *   has never opened in this process: once it has, its counts are no longer
 *   trusted as exact (turn reports say false for good).
 * - Calibration (default on): usage reports teach a per-model factor that
 *   multiplies local estimates (`calibration` in the answer; 1 when none).
 */
import { Tokens, type Turn } from "@ctxd/contracts"
import { LocalCounter } from "@ctxd/tokens"
import { ProviderKeys, Providers } from "@ctxd/context"
import { Cause, type ConfigError, Context, Duration, Effect, Either, FiberRef, HashMap, Layer, Option, type Scope } from "effect"
import * as ExactCounter from "./ExactCounter.ts"
import * as Calibration from "./Calibration.ts"
import * as CalibrationState from "./CalibrationState.ts"
import * as ExactPool from "./internal/exactPool.ts"
import * as LocalBody from "./internal/localBody.ts"
import type {
  CounterReport,
  CountRequestInput,
  CountResult,
  CountTurnInput,
  Metrics,
  Model,
  TokenCounterService,
  TurnCount,
  UsageInput,
  UsageResult,
} from "./internal/counterModel.ts"
import * as TokenCounterConfig from "./TokenCounterConfig.ts"

export type * from "./internal/counterModel.ts"

const { BadUsage } = Tokens
type BadUsage = Tokens.BadUsage
type BackendChoice = Tokens.BackendChoice

/** The token counter of this process. */
export class TokenCounter extends Context.Tag("@ctxd/token-counter/TokenCounter")<TokenCounter, TokenCounterService>() {}

/** A {@link BadUsage} for a usage report whose turn the session does not know (the caller looks the turn up). */
export const unknownTurn = (turnId: string): BadUsage =>
  new BadUsage({
    reason: "unknown_turn",
    path: "turnId",
    message: `unknown turn ${JSON.stringify(turnId)}: no turn with this id was answered for this session`,
  })

/** `: <message>` of a failed count (status, error type and body size: `ExactCounter.classifySdkError`), or nothing. */
const detailOf = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  return failure._tag === "Some" && failure.value instanceof ExactCounter.CountFailed ? `: ${failure.value.message}` : ""
}

const reasonOf = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (failure._tag === "Some") {
    const e = failure.value as { readonly _tag?: string; readonly reason?: string }
    if (e._tag === "CircuitOpen") return "circuit_open"
    if (e._tag === "CountFailed" && e.reason !== undefined) return e.reason
    if (e._tag === "TimeoutException") return "timeout"
  }
  return Cause.isInterruptedOnly(cause) ? "interrupted" : "error"
}

const record = <V>(map: ReadonlyMap<string, V>): Record<string, V> => Object.fromEntries(map)

/**
 * Builds the service; provider calls run in the current scope. `keys`
 * chooses whose key a tenant's exact count uses (default: the worker's for
 * every call); each tenant key gets its own counter — breaker, bulkhead,
 * cache — so one tenant's bad key never opens the breaker for the others.
 */
export const make = (
  options: Partial<TokenCounterConfig.Config> = {},
  keys: ProviderKeys.ProviderKeysService = ProviderKeys.workerOnly,
): Effect.Effect<TokenCounterService, never, Scope.Scope> =>
  Effect.gen(function* () {
    const config: TokenCounterConfig.Config = { ...TokenCounterConfig.defaults, ...options }
    const tiktoken = LocalCounter.make({ backend: "tiktoken", cacheCapacity: config.cacheCapacity })
    const heuristic = LocalCounter.make({ backend: "heuristic" })
    const pool = yield* ExactPool.make(config, keys)
    const { exacts, exactFor } = pool
    // mutated in place, only inside Effect.sync (one fiber at a time on the JS thread)
    const calibration = CalibrationState.make(config.calibrationLimits)
    const factorOptions: Calibration.FactorOptions = { ...Calibration.defaultFactorOptions, alpha: config.calibrationAlpha }
    const deadline = Duration.millis(config.timeoutMs)
    const tally = { turns: 0, exactTurns: 0, fallbacks: new Map<string, number>() }

    type Route = { readonly exact: ExactCounter.ExactCounter; readonly local: "tiktoken" } | LocalRoute
    type LocalRoute = { readonly exact?: undefined; readonly local: "tiktoken" | "heuristic"; readonly fallback?: string }

    /** A local route: silent under `auto` (no provider count was promised), else with the reason. */
    const localFor = (wanted: BackendChoice, fallback: string): LocalRoute =>
      wanted === "auto" ? { local: "tiktoken" } : { local: "tiktoken", fallback }

    /**
     * The local backend of a turn whose route needs no exact counter (a local
     * backend asked for, another provider's asked for, none configured for
     * its provider, or one the tenant may not use), found as a plain call;
     * undefined: an exact counter decides ({@link route}).
     */
    const localRoute = (model: Model, choice: BackendChoice | undefined, tenant: string | undefined): LocalRoute | undefined => {
      const wanted = choice ?? config.backend
      if (wanted === "heuristic" || wanted === "tiktoken") return { local: wanted }
      if (wanted !== "auto" && Providers.byExactBackend(wanted) !== model.provider) return localFor(wanted, "unsupported_provider")
      if (!pool.supports(model.provider)) return localFor(wanted, "not_configured")
      const key = keys.choose(tenant, model.provider as ExactCounter.Provider)
      if (key._tag === "Denied") return localFor(wanted, "key_not_allowed")
      if (key._tag === "Worker" && exacts.get(model.provider as ExactCounter.Provider) === undefined)
        return localFor(wanted, "not_configured")
      return undefined
    }

    /**
     * The exact counter to try first, or the local backend and why. `auto`
     * falls back silently (no provider count was promised); a backend asked
     * for by name says why it did not answer.
     */
    const route = (
      model: Model,
      choice: BackendChoice | undefined,
      unsupportedFormat: string | undefined,
      tenant: string | undefined,
    ): Effect.Effect<Route> => {
      const known = localRoute(model, choice, tenant)
      if (known !== undefined) return Effect.succeed(known)
      const wanted = choice ?? config.backend
      // the worker's exact counter, or the tenant's own (made on first use)
      return Effect.map(exactFor(model.provider, tenant), (exact): Route => {
        if (exact === undefined) return localFor(wanted, "not_configured")
        if (exact === "denied") return localFor(wanted, "key_not_allowed")
        if (unsupportedFormat !== undefined) return localFor(wanted, unsupportedFormat)
        return { exact, local: "tiktoken" }
      })
    }

    /** Why a turn in `format` cannot be counted by its provider's endpoint (`undefined`: it can, or the format is not known). */
    const formatProblem = (model: Model, format: Turn.Format | undefined): string | undefined =>
      format === undefined ? undefined : Providers.ofProvider(model.provider).exactCount?.formatProblem(format)

    /** Local counting for `tenant` (its own factor, else the global one; the global one when undefined). */
    const localNow = (backend: "tiktoken" | "heuristic", model: Model, fallback: string | undefined, tenant?: string | undefined) => {
      const counter = backend === "heuristic" ? heuristic : tiktoken
      const factor = !config.calibration
        ? 1
        : tenant === undefined
          ? CalibrationState.globalFactorOf(calibration, model, backend)
          : CalibrationState.factorOf(calibration, model, backend, tenant)
      const report: CounterReport = {
        backend,
        encoding: counter.encodingFor(model),
        exact: false,
        calibration: factor,
        ...(fallback === undefined ? {} : { fallback }),
      }
      return { counter, encoding: counter.encodingFor(model), scale: (n: number) => (factor === 1 ? n : Math.round(n * factor)), report }
    }
    const local = (backend: "tiktoken" | "heuristic", model: Model, fallback: string | undefined, tenant?: string | undefined) =>
      Effect.sync(() => localNow(backend, model, fallback, tenant))

    const noteFallbackNow = (reason: string | undefined) => {
      if (reason !== undefined) tally.fallbacks.set(reason, (tally.fallbacks.get(reason) ?? 0) + 1)
    }
    const noteFallback = (reason: string | undefined) => Effect.sync(() => noteFallbackNow(reason))

    const exactReport = (counter: ExactCounter.ExactCounter, approximate: boolean) =>
      Effect.map(counter.breaker.hasOpened, (opened): CounterReport => ({
        backend: counter.backend,
        encoding: counter.provider,
        exact: !opened && !approximate,
        calibration: 1,
      }))

    /** The tenant of a turn: given, else the calling fiber's `tenant` log annotation. */
    const tenantOf = (input: CountTurnInput): Effect.Effect<string | undefined> =>
      input.tenant !== undefined
        ? Effect.succeed(input.tenant)
        : Effect.map(FiberRef.get(FiberRef.currentLogAnnotations), (annotations) => {
            const tenant = HashMap.get(annotations, "tenant")
            return Option.isSome(tenant) && typeof tenant.value === "string" ? tenant.value : undefined
          })

    /** A turn counted locally, as a plain call. */
    const countLocallyNow = (
      input: CountTurnInput,
      backend: "tiktoken" | "heuristic",
      fallback: string | undefined,
      tenant: string | undefined,
    ): TurnCount => {
      noteFallbackNow(fallback)
      const { counter, encoding, scale, report } = localNow(backend, input.model, fallback, tenant)
      return {
        ...report,
        systemTokens: scale(counter.countSystem(input.system, encoding)),
        toolsTokens: scale(counter.countTools(input.tools, encoding)),
        messageTokens: input.messages.map((m) => scale(counter.countMessage(m, encoding))),
      } satisfies TurnCount
    }

    const countLocally = (input: CountTurnInput, backend: "tiktoken" | "heuristic", fallback: string | undefined) =>
      Effect.map(tenantOf(input), (tenant) => countLocallyNow(input, backend, fallback, tenant))

    const countTurn = (input: CountTurnInput): Effect.Effect<TurnCount> =>
      Effect.suspend(() => {
        // the usual local turn (its tenant given): counted in one step
        const quick = input.tenant === undefined ? undefined : localRoute(input.model, input.backend, input.tenant)
        if (quick === undefined) return countRouted(input)
        tally.turns++
        return Effect.succeed(countLocallyNow(input, quick.local, quick.fallback, input.tenant))
      }).pipe(
        // belt and braces: a defect in counting must not fail a turn
        Effect.catchAllDefect((defect) =>
          Effect.logError("token counting failed; heuristic answer", defect).pipe(
            Effect.zipRight(countLocally(input, "heuristic", "error")),
          ),
        ),
      )

    const countRouted = (input: CountTurnInput): Effect.Effect<TurnCount> =>
      Effect.gen(function* () {
        tally.turns++
        const path = yield* route(input.model, input.backend, formatProblem(input.model, input.format), yield* tenantOf(input))
        const exact = path.exact
        if (exact === undefined) return yield* countLocally(input, path.local, path.fallback)
        const encoding = tiktoken.encodingFor(input.model)
        const weights = input.messages.map((m) => tiktoken.countMessage(m, encoding))
        const answer = yield* exact
          .countTurn({ model: input.model.name, system: input.system, tools: input.tools, messages: input.messages, weights })
          .pipe(Effect.timeout(deadline), Effect.sandbox, Effect.either)
        if (Either.isLeft(answer)) {
          yield* Effect.logDebug(`exact count unavailable (${reasonOf(answer.left)}${detailOf(answer.left)}); counting locally`)
          return yield* countLocally(input, "tiktoken", reasonOf(answer.left))
        }
        const report = yield* exactReport(exact, answer.right.approximate)
        if (report.exact) tally.exactTurns++
        const { approximate: _approximate, ...counts } = answer.right
        return { ...report, ...counts } satisfies TurnCount
      })

    const countRequestLocally = (input: CountRequestInput, backend: "tiktoken" | "heuristic", fallback: string | undefined) =>
      Effect.gen(function* () {
        yield* noteFallback(fallback)
        const { counter, encoding, scale, report } = yield* local(backend, input.model, fallback, input.tenant)
        if (input.segments !== undefined) {
          const segments = input.segments.map((s) => scale(counter.countText(s, encoding)))
          return { ...report, tokens: segments.reduce((a, b) => a + b, 0), segments } satisfies CountResult
        }
        return {
          ...report,
          tokens: scale(LocalBody.count(counter, input.model.provider, input.body ?? {}, encoding)),
        } satisfies CountResult
      })

    const countRequest = (input: CountRequestInput): Effect.Effect<CountResult> =>
      Effect.gen(function* () {
        const bodyProblem =
          input.body === undefined ? undefined : Providers.ofProvider(input.model.provider).exactCount?.bodyProblem(input.body)
        const path = yield* route(input.model, input.backend, bodyProblem, input.tenant)
        const exact = path.exact
        if (exact === undefined) return yield* countRequestLocally(input, path.local, path.fallback)
        const segments = input.segments
        const work: Effect.Effect<Omit<CountResult, keyof CounterReport>, unknown> = segments !== undefined
          ? Effect.map(
              Effect.forEach(segments, (s) => exact.countText(input.model.name, s), { concurrency: 4 }),
              (counts) => ({
                tokens: counts.reduce((a, b) => a + b, 0),
                segments: counts,
              }),
            )
          : Effect.map(exact.countBody(input.model.name, input.body ?? {}), (tokens) => ({ tokens }))
        const answer = yield* work.pipe(Effect.timeout(deadline), Effect.sandbox, Effect.either)
        if (Either.isLeft(answer)) return yield* countRequestLocally(input, "tiktoken", reasonOf(answer.left))
        return { ...(yield* exactReport(exact, false)), ...answer.right }
      }).pipe(Effect.catchAllDefect(() => countRequestLocally(input, "heuristic", "error")))

    const recordUsage = (input: UsageInput): Effect.Effect<UsageResult, BadUsage> =>
      Effect.gen(function* () {
        if (typeof input.estimate !== "number" || !Number.isFinite(input.estimate) || input.estimate <= 0) {
          return yield* new BadUsage({
            reason: "bad_estimate",
            path: "estimate",
            message: `the turn's estimate must be a positive number of tokens, got ${String(input.estimate)}`,
          })
        }
        const parsed = Calibration.parseUsage(input.usage)
        if (Either.isLeft(parsed)) return yield* new BadUsage({ reason: "malformed", path: parsed.left.path, message: parsed.left.message })
        const billed = parsed.right.billedPrompt
        if (billed <= 0) {
          return yield* new BadUsage({
            reason: "malformed",
            path: "usage",
            message: "usage bills 0 prompt tokens; there is nothing to compare the estimate with",
          })
        }
        const observation: CalibrationState.Observation = {
          tenant: input.tenant,
          model: input.model,
          estimate: input.estimate,
          billed,
          backend: input.backend ?? "tiktoken",
          calibration: input.calibration ?? 1,
        }
        const dryRun = input.count === false
        const recorded = yield* Effect.sync(() => CalibrationState.record(calibration, observation, factorOptions, dryRun))
        if (!dryRun) {
          yield* Effect.logDebug(
            `usage: billed ${billed}, estimate ${input.estimate}, drift ${recorded.drift.toFixed(4)}, factor ${recorded.factor.toFixed(4)}`,
          )
        }
        return { billed, drift: recorded.drift, factor: recorded.factor }
      }).pipe(Effect.annotateLogs({ tenant: input.tenant, session: input.session, turn: input.turnId }))

    const metrics: Effect.Effect<Metrics> = Effect.gen(function* () {
      const learned = yield* Effect.sync(() => CalibrationState.snapshot(calibration))
      const { providers, breaker, stats } = yield* pool.stats
      return {
        calls: stats.calls,
        callFailures: stats.failures,
        cacheHits: stats.cacheHits,
        cacheMisses: stats.cacheMisses,
        cacheSize: stats.cacheSize,
        shared: stats.shared,
        inFlight: stats.inFlight,
        local: tiktoken.stats(),
        turns: tally.turns,
        exactTurns: tally.exactTurns,
        fallbacks: record(tally.fallbacks),
        breaker,
        providers,
        exactEver: !breaker.hasOpened,
        ...learned,
      }
    })

    return { countTurn, countRequest, recordUsage, metrics, local: tiktoken }
  })

/** The service with `config` (defaults for the rest: see `TokenCounterConfig.defaults`). */
export const layer = (config: Partial<TokenCounterConfig.Config> = {}): Layer.Layer<TokenCounter> =>
  Layer.scoped(TokenCounter, make(config))

/** The service configured from the environment (see `TokenCounterConfig.config`). */
export const layerConfig: Layer.Layer<TokenCounter, ConfigError.ConfigError> = Layer.scoped(
  TokenCounter,
  Effect.gen(function* () {
    const config = yield* TokenCounterConfig.config
    const keys = yield* Effect.serviceOption(ProviderKeys.ProviderKeys)
    return yield* make(config, Option.getOrUndefined(keys))
  }),
)
