/**
 * The exact counters of a token counter: one per configured provider with
 * the worker's key, and one per tenant key (`ProviderKeys`), made on first
 * use in its own scope and closed when dropped; each has its own breaker,
 * bulkhead, single flight and cache, so one tenant's bad key never opens
 * the breaker for the others.
 */
import { type ProviderKeys, Providers } from "@ctxd/context"
import { Duration, Effect, ExecutionStrategy, Exit, Scope } from "effect"
import * as AnthropicCounter from "../AnthropicCounter.ts"
import type * as CircuitBreaker from "../CircuitBreaker.ts"
import type * as ExactCounter from "../ExactCounter.ts"
import type { ProviderMetrics } from "./counterModel.ts"
import * as GeminiCounter from "../GeminiCounter.ts"
import * as OpenAICounter from "../OpenAICounter.ts"
import type * as TokenCounterConfig from "../TokenCounterConfig.ts"

/** Exact counters with tenants' own keys kept at once (the least recently created is closed first; rebuilt on its next use). */
const MAX_TENANT_COUNTERS = 64

/** The counters of `config`'s providers, and those of tenant keys as `keys` chooses; closed with the current scope. */
export const make = (config: TokenCounterConfig.Config, keys: ProviderKeys.ProviderKeysService) =>
  Effect.gen(function* () {
    const shared = {
      timeoutMs: config.timeoutMs,
      cacheCapacity: config.cacheCapacity,
      maxInFlight: config.maxInFlight,
      breaker: {
        failureThreshold: config.breaker.failureThreshold,
        openFor: Duration.millis(config.breaker.openForMs),
        maxOpenFor: Duration.millis(config.breaker.maxOpenForMs),
      },
    }
    // one exact counter (breaker, bulkhead, single flight, cache) per configured provider
    const exacts = new Map<string, ExactCounter.ExactCounter>()
    if (config.anthropic !== undefined) exacts.set("anthropic", yield* AnthropicCounter.make({ ...config.anthropic, ...shared }))
    if (config.openai !== undefined) exacts.set("openai", yield* OpenAICounter.make({ ...config.openai, ...shared }))
    if (config.google !== undefined) exacts.set("google", yield* GeminiCounter.make({ ...config.google, ...shared }))
    // and one per tenant key (`ProviderKeys`), made on first use in its own scope, closed when dropped
    const scope = yield* Effect.scope
    const tenantExacts = new Map<string, { readonly counter: ExactCounter.ExactCounter; readonly scope: Scope.CloseableScope }>()
    // each provider's SDK-bound counter, for the descriptors that have an exact count (`ModelProvider.exactCount`)
    const makers: { readonly [P in ExactCounter.Provider]: typeof AnthropicCounter.make } = {
      anthropic: AnthropicCounter.make,
      openai: OpenAICounter.make,
      google: GeminiCounter.make,
    }
    /** Whether `provider`'s descriptor has an exact count endpoint (and so a counter here). */
    const supports = (provider: string): boolean =>
      Providers.isProvider(provider) && Providers.ofProvider(provider).exactCount !== undefined && provider in makers
    /**
     * The exact counter of `provider` for `tenant`: the tenant's own key's,
     * the worker's (undefined when the worker has none), or `denied`.
     */
    const exactFor = (provider: string, tenant: string | undefined): Effect.Effect<ExactCounter.ExactCounter | "denied" | undefined> =>
      Effect.gen(function* () {
        if (!supports(provider)) return undefined
        const kind = provider as ExactCounter.Provider
        const choice = keys.choose(tenant, kind)
        if (choice._tag === "Worker") return exacts.get(kind)
        if (choice._tag === "Denied") return "denied"
        const id = `${kind} ${choice.ref}`
        const known = tenantExacts.get(id)
        if (known !== undefined) return known.counter
        if (tenantExacts.size >= MAX_TENANT_COUNTERS) {
          const [oldest, entry] = tenantExacts.entries().next().value!
          tenantExacts.delete(oldest)
          yield* Scope.close(entry.scope, Exit.void)
        }
        const child = yield* Scope.fork(scope, ExecutionStrategy.sequential)
        const counter = yield* makers[kind]({ ...config[kind], apiKey: choice.key, ...shared }).pipe(Scope.extend(child))
        tenantExacts.set(id, { counter, scope: child })
        return counter
      })
    const closed: CircuitBreaker.Snapshot = {
      status: "closed",
      failures: 0,
      openForMs: config.breaker.openForMs,
      retryAfterMs: 0,
      openings: 0,
      hasOpened: false,
    }
    const sickness: Readonly<Record<CircuitBreaker.Status, number>> = { closed: 0, half_open: 1, open: 2 }
    const zero: ExactCounter.Stats = { calls: 0, failures: 0, cacheHits: 0, cacheMisses: 0, cacheSize: 0, shared: 0, inFlight: 0 }

    /** The worker's counters' calls, cache and breaker, by provider; their sum; the least healthy breaker (`hasOpened` if any has). */
    const stats = Effect.gen(function* () {
      const providers: Record<string, ProviderMetrics> = {}
      for (const [provider, counter] of exacts)
        providers[provider] = { backend: counter.backend, ...counter.stats(), breaker: yield* counter.breaker.snapshot }
      const all = Object.values(providers)
      const worst = all.reduce<CircuitBreaker.Snapshot | undefined>(
        (w, p) => (w === undefined || sickness[p.breaker.status] > sickness[w.status] ? p.breaker : w),
        undefined,
      )
      const breaker = worst === undefined ? closed : { ...worst, hasOpened: all.some((p) => p.breaker.hasOpened) }
      const sum = all.reduce<ExactCounter.Stats>(
        (sum, p) => ({
          calls: sum.calls + p.calls,
          failures: sum.failures + p.failures,
          cacheHits: sum.cacheHits + p.cacheHits,
          cacheMisses: sum.cacheMisses + p.cacheMisses,
          cacheSize: sum.cacheSize + p.cacheSize,
          shared: sum.shared + p.shared,
          inFlight: sum.inFlight + p.inFlight,
        }),
        zero,
      )
      return { providers, breaker, stats: sum }
    })

    return {
      stats,
      /** The worker's counters, by provider. */
      exacts: exacts as ReadonlyMap<string, ExactCounter.ExactCounter>,
      exactFor,
      /** Whether `provider` has an exact count endpoint. */
      supports,
    }
  })
