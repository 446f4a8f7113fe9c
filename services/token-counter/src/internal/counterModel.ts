/** What the token counter counts and answers: its inputs, reports, metrics and service interface. */
import type { Conversation, Tokens, Turn } from "@ctxd/contracts"
import type { LocalCounter } from "@ctxd/tokens"
import type { Effect } from "effect"
import type * as Calibration from "../Calibration.ts"
import type * as CircuitBreaker from "../CircuitBreaker.ts"
import type * as ExactCounter from "../ExactCounter.ts"

type BadUsage = Tokens.BadUsage
type BackendChoice = Tokens.BackendChoice

/** Who counted: a provider's exact backend or a local one. */
export type Backend = ExactCounter.ExactBackend | "tiktoken" | "heuristic"

/** A model as the counter needs it. */
export interface Model {
  readonly provider: Turn.Provider
  readonly name: string
}

/** One turn to count: the stable prefix and only the NEW messages (older ones carry stored counts). */
export interface CountTurnInput {
  readonly model: Model
  /**
   * Whose turn it is: local estimates use this tenant's correction factor
   * (else the global one). When absent, the `tenant` log annotation of the
   * calling fiber is used (the assembler annotates every turn with it).
   */
  readonly tenant?: string | undefined
  /** Per-request backend; default the process setting. */
  readonly backend?: BackendChoice | undefined
  /**
   * The request format the turn is rendered in; default the provider's own
   * (`openai-responses` for OpenAI). OpenAI Chat Completions (`openai`) has
   * no count endpoint and is counted locally.
   */
  readonly format?: Turn.Format | undefined
  readonly system: ReadonlyArray<Conversation.SystemSection>
  readonly tools: ReadonlyArray<Conversation.Tool>
  readonly messages: ReadonlyArray<Conversation.Message>
}

/** Which backend counted, and how far to trust it. */
export interface CounterReport {
  readonly backend: Backend
  /** Local vocabulary (`o200k_base`, `cl100k_base`), `heuristic`, or the provider (`anthropic`, `openai`) for its own count. */
  readonly encoding: string
  /**
   * True only for the provider's own count, while its breaker has never
   * opened in this process, and when the batch could be counted as sent
   * (no unpaired tool block counted as text, no OpenAI reasoning item).
   */
  readonly exact: boolean
  /** Factor applied to local counts (1 when none). */
  readonly calibration: number
  /** Why a local backend answered although the provider's count was wanted. */
  readonly fallback?: string | undefined
}

/** The counts of one turn. With the exact backend, `systemTokens` includes the per-request framing. */
export interface TurnCount extends CounterReport {
  readonly systemTokens: number
  readonly toolsTokens: number
  readonly messageTokens: ReadonlyArray<number>
}

/** A `ctx.v1.tokens.count` request, decoded. */
export interface CountRequestInput {
  readonly model: Model
  readonly backend?: BackendChoice | undefined
  readonly body?: Readonly<Record<string, unknown>> | undefined
  readonly segments?: ReadonlyArray<string> | undefined
  /** On whose behalf (`tokens.count.<tenant>`): a local count uses this tenant's factor, else the global one. */
  readonly tenant?: string | undefined
}

/** The answer to a count request: total tokens, per-segment tokens for segment requests. */
export interface CountResult extends CounterReport {
  readonly tokens: number
  readonly segments?: ReadonlyArray<number> | undefined
}

/** The usage billed for a turn, with what ctxd estimated for it. */
export interface UsageInput {
  readonly tenant: string
  readonly session: string
  readonly turnId: string
  readonly model: Model
  /** The provider's usage object, either provider's field names. */
  readonly usage: unknown
  /** The prompt estimate the turn report gave (report `tokens.total`). */
  readonly estimate: number
  /** The backend that made it (report `counter.backend`); only local ones teach the factor. Default `tiktoken`. */
  readonly backend?: string | undefined
  /** The factor applied to it (report `counter.calibration`); default 1. */
  readonly calibration?: number | undefined
  /**
   * False: validate and compute the drift, but record nothing (a duplicate
   * report, or a check before the report is claimed). Default true.
   */
  readonly count?: boolean | undefined
}

/** What a usage report gave. */
export interface UsageResult {
  readonly billed: number
  readonly drift: number
  /** The model's factor for the estimating backend after this report (1 for exact backends). */
  readonly factor: number
}

/** One provider's exact backend, for metrics. */
export interface ProviderMetrics extends ExactCounter.Stats {
  readonly backend: ExactCounter.ExactBackend
  readonly breaker: CircuitBreaker.Snapshot
}

/** A snapshot for metrics endpoints. */
export interface Metrics {
  /** Provider count calls started (all providers; per provider in `providers`). */
  readonly calls: number
  readonly callFailures: number
  /** Exact segment cache (LRU by content hash). */
  readonly cacheHits: number
  readonly cacheMisses: number
  readonly cacheSize: number
  /** Count requests that joined an identical call in flight. */
  readonly shared: number
  readonly inFlight: number
  /** Local text segment cache (`@ctxd/tokens`). */
  readonly local: LocalCounter.Stats
  readonly turns: number
  readonly exactTurns: number
  /** Local answers when the provider's count was wanted, by reason. */
  readonly fallbacks: Readonly<Record<string, number>>
  /** The least healthy provider breaker (open, then half open, then closed; `hasOpened` if any has). */
  readonly breaker: CircuitBreaker.Snapshot
  /** Each configured provider's calls, cache and breaker, by provider. */
  readonly providers: Readonly<Record<string, ProviderMetrics>>
  /** The `exact` metric label: false for the rest of the process once any provider's breaker has opened. */
  readonly exactEver: boolean
  /** Drift of reported estimates per model label (`provider/name`, normalized; at most `maxModels` and `other`). */
  readonly drift: Readonly<Record<string, Calibration.DriftSummary>>
  /** Drift of raw local estimates (before the factor) per model label. */
  readonly rawDrift: Readonly<Record<string, Calibration.DriftSummary>>
  /** Global correction factors per `provider/name#backend` label, with the reports and tenants behind them. */
  readonly factors: Readonly<Record<string, { readonly factor: number; readonly reports: number; readonly tenants: number }>>
  /** Family factors per `family#backend` (`claude`, `gpt`, `gemini`): where a new model of the family starts, over how many learned models. */
  readonly families: Readonly<Record<string, { readonly factor: number; readonly models: number }>>
  /** Model labels in use, the cap, and reports recorded under `other`. */
  readonly labels: { readonly used: number; readonly max: number; readonly overflow: number }
  /** Per-tenant factors kept. */
  readonly tenantFactors: number
}

/** The service interface. */
export interface TokenCounterService {
  readonly countTurn: (input: CountTurnInput) => Effect.Effect<TurnCount>
  readonly countRequest: (input: CountRequestInput) => Effect.Effect<CountResult>
  readonly recordUsage: (input: UsageInput) => Effect.Effect<UsageResult, BadUsage>
  readonly metrics: Effect.Effect<Metrics>
  /** The local counter (tiktoken, shared cache) for callers that must count synchronously. */
  readonly local: LocalCounter.LocalCounterService
}
