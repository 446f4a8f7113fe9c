/**
 * The token counter's config and where it comes from: the environment
 * (constant case) through Effect `Config`. Defaults:
 *
 * | env | default | meaning |
 * | --- | --- | --- |
 * | `CTXD_TOKEN_BACKEND` | `auto` | `auto`, `anthropic_api`, `openai_api`, `google_api`, `tiktoken` or `heuristic`; a request's own choice wins |
 * | `CTXD_TOKEN_CACHE_SIZE` | 1024 | LRU entries, for exact segment counts and for local text segments alike |
 * | `CTXD_TOKEN_TIMEOUT_MS` | 2000 | bound of one provider call and of a turn's wait for the exact count |
 * | `CTXD_TOKEN_MAX_IN_FLIGHT` | 16 | provider calls at once, per provider; beyond, turns answer locally at once |
 * | `CTXD_TOKEN_BREAKER_FAILURES` | 3 | consecutive failures that open a provider's breaker (one breaker per provider) |
 * | `CTXD_TOKEN_BREAKER_OPEN_MS` | 30000 | first open period |
 * | `CTXD_TOKEN_BREAKER_MAX_OPEN_MS` | 300000 | longest open period (doubling after each failed probe) |
 * | `CTXD_TOKEN_CALIBRATION` | `true` | multiply local estimates by the learned per-model factor |
 * | `CTXD_TOKEN_CALIBRATION_ALPHA` | 0.1 | EWMA weight of a new usage report |
 * | `CTXD_TOKEN_CALIBRATION_PRIOR_TENANTS` | 10 | weight (in tenants at factor 1) of the prior in a model's global factor |
 * | `CTXD_TOKEN_CALIBRATION_TENANT_FACTORS` | 10000 | per-tenant factors kept (least recently updated dropped first) |
 * | `CTXD_TOKEN_MAX_MODELS` | 100 | distinct model labels in calibration and metrics; later models share `other` |
 * | `ANTHROPIC_BASE_URL` | unset | the SDK's base URL; setting it (or the key) enables `auto` → `anthropic_api` |
 * | `ANTHROPIC_API_KEY` | unset | the SDK's API key (redacted) |
 * | `OPENAI_BASE_URL` | unset | the `openai` SDK's base URL; setting it (or the key) enables `auto` → `openai_api` |
 * | `OPENAI_API_KEY` | unset | the `openai` SDK's API key (redacted) |
 * | `GOOGLE_GEMINI_BASE_URL` | unset | the `@google/genai` SDK's base URL (Gemini Developer API); setting it (or the key) enables `auto` → `google_api` |
 * | `GEMINI_API_KEY` | unset | the Gemini API key (redacted) |
 */
import type { Tokens } from "@ctxd/contracts"
import * as ConfigReference from "@ctxd/config/ConfigReference"
import { Config, Option, Redacted } from "effect"

/** Everything the token counter needs; see the module doc for the defaults. */
export interface Config {
  readonly backend: Tokens.BackendChoice
  readonly cacheCapacity: number
  readonly timeoutMs: number
  readonly maxInFlight: number
  readonly breaker: {
    readonly failureThreshold: number
    readonly openForMs: number
    readonly maxOpenForMs: number
  }
  readonly calibration: boolean
  readonly calibrationAlpha: number
  /** Bounds of the calibration state (`CalibrationState.Limits`). */
  readonly calibrationLimits: {
    readonly maxModels: number
    readonly maxTenantFactors: number
    readonly priorTenants: number
  }
  /** How to reach Anthropic's count endpoint; `undefined` = not configured (`auto` stays local). */
  readonly anthropic: Endpoint | undefined
  /** How to reach OpenAI's count endpoint; `undefined` = not configured (`auto` stays local). */
  readonly openai: Endpoint | undefined
  /** How to reach Gemini's count endpoint; `undefined` = not configured (`auto` stays local). */
  readonly google: Endpoint | undefined
}

/** How to reach a provider: its base URL and API key (either enables it). */
export interface Endpoint {
  readonly baseURL?: string | undefined
  readonly apiKey?: Redacted.Redacted<string> | undefined
}

/** The defaults (no provider configured). */
export const defaults: Config = {
  backend: "auto",
  cacheCapacity: 1_024,
  timeoutMs: 2_000,
  maxInFlight: 16,
  breaker: { failureThreshold: 3, openForMs: 30_000, maxOpenForMs: 300_000 },
  calibration: true,
  calibrationAlpha: 0.1,
  calibrationLimits: { maxModels: 100, maxTenantFactors: 10_000, priorTenants: 10 },
  anthropic: undefined,
  openai: undefined,
  google: undefined,
}

const positive = (name: string, fallback: number, description: string) =>
  Config.integer(name).pipe(
    ConfigReference.within({ min: 1 }, "must be at least 1"),
    Config.withDescription(description),
    Config.withDefault(fallback),
  )

const nonEmpty = (o: Option.Option<string>): string | undefined => (Option.isSome(o) && o.value.trim() !== "" ? o.value.trim() : undefined)

/** {@link Config} from the environment (table in the module doc). */
export const config: Config.Config<Config> = Config.all({
  backend: Config.literal(
    "auto",
    "anthropic_api",
    "openai_api",
    "google_api",
    "tiktoken",
    "heuristic",
  )("CTXD_TOKEN_BACKEND").pipe(
    Config.withDescription(
      "Who counts: auto (the model's provider's count endpoint when that provider is configured, else tiktoken), anthropic_api, openai_api, google_api (that endpoint; another provider's model is counted locally), tiktoken or heuristic (4 chars per token); options.tokenBackend wins",
    ),
    Config.withDefault("auto" as const),
  ),
  cacheCapacity: positive(
    "CTXD_TOKEN_CACHE_SIZE",
    defaults.cacheCapacity,
    "Token counts cached by content hash (LRU entries), exact and local alike",
  ),
  timeoutMs: positive(
    "CTXD_TOKEN_TIMEOUT_MS",
    defaults.timeoutMs,
    "Bound of one provider count call and of a turn's wait for it; past it the turn is counted locally",
  ),
  maxInFlight: positive(
    "CTXD_TOKEN_MAX_IN_FLIGHT",
    defaults.maxInFlight,
    "Provider count calls at once, per provider; beyond that turns count locally at once (no pile-up)",
  ),
  failureThreshold: positive(
    "CTXD_TOKEN_BREAKER_FAILURES",
    defaults.breaker.failureThreshold,
    "Consecutive failures (error, timeout, 429, 5xx) that open a provider's circuit breaker (one per provider)",
  ),
  openForMs: positive(
    "CTXD_TOKEN_BREAKER_OPEN_MS",
    defaults.breaker.openForMs,
    "First open period of the breaker; doubles after each failed half-open probe",
  ),
  maxOpenForMs: positive("CTXD_TOKEN_BREAKER_MAX_OPEN_MS", defaults.breaker.maxOpenForMs, "Longest open period of the breaker"),
  calibration: Config.boolean("CTXD_TOKEN_CALIBRATION").pipe(
    Config.withDescription("Multiply local estimates by the per-model correction factor learned from usage reports"),
    Config.withDefault(true),
  ),
  calibrationAlpha: Config.number("CTXD_TOKEN_CALIBRATION_ALPHA").pipe(
    ConfigReference.within({ above: 0, max: 1 }, "must be in (0, 1]"),
    Config.withDescription("EWMA weight of one usage report in the correction factor"),
    Config.withDefault(defaults.calibrationAlpha),
  ),
  maxModels: positive(
    "CTXD_TOKEN_MAX_MODELS",
    defaults.calibrationLimits.maxModels,
    "Distinct model labels (lowercase, [a-z0-9._:/-], at most 64 chars) in calibration and metrics; later models share `other` (drift only, no factor)",
  ),
  maxTenantFactors: positive(
    "CTXD_TOKEN_CALIBRATION_TENANT_FACTORS",
    defaults.calibrationLimits.maxTenantFactors,
    "Per-tenant correction factors kept in memory (least recently updated dropped first; that tenant falls back to the global factor)",
  ),
  priorTenants: positive(
    "CTXD_TOKEN_CALIBRATION_PRIOR_TENANTS",
    defaults.calibrationLimits.priorTenants,
    "Weight, in tenants at the model's family factor, of the prior in a model's global correction factor: one tenant moves it by at most (its factor − family factor) / (this + 1)",
  ),
  baseURL: Config.option(
    Config.string("ANTHROPIC_BASE_URL").pipe(
      Config.withDescription("Anthropic API base URL (unset: the SDK's); it or ANTHROPIC_API_KEY makes auto count Claude prompts exactly"),
      ConfigReference.shownAs("URL"),
    ),
  ),
  apiKey: Config.option(Config.redacted("ANTHROPIC_API_KEY").pipe(Config.withDescription("Anthropic API key"))),
  openaiBaseURL: Config.option(
    Config.string("OPENAI_BASE_URL").pipe(
      Config.withDescription(
        "OpenAI API base URL, with /v1 (unset: the SDK's); it or OPENAI_API_KEY makes auto count OpenAI Responses prompts exactly",
      ),
      ConfigReference.shownAs("URL"),
    ),
  ),
  openaiApiKey: Config.option(Config.redacted("OPENAI_API_KEY").pipe(Config.withDescription("OpenAI API key"))),
  googleBaseURL: Config.option(
    Config.string("GOOGLE_GEMINI_BASE_URL").pipe(
      Config.withDescription(
        "Gemini Developer API base URL, without /v1beta (unset: the SDK's); it or GEMINI_API_KEY makes auto count google prompts exactly",
      ),
      ConfigReference.shownAs("URL"),
    ),
  ),
  googleApiKey: Config.option(Config.redacted("GEMINI_API_KEY").pipe(Config.withDescription("Gemini API key"))),
}).pipe(
  Config.map((c): Config => {
    const endpoint = (url: Option.Option<string>, apiKey: Option.Option<Redacted.Redacted<string>>): Endpoint | undefined => {
      const baseURL = nonEmpty(url)
      const key = Option.isSome(apiKey) && Redacted.value(apiKey.value).trim() !== "" ? apiKey.value : undefined
      return baseURL === undefined && key === undefined ? undefined : { baseURL, apiKey: key }
    }
    return {
      backend: c.backend,
      cacheCapacity: c.cacheCapacity,
      timeoutMs: c.timeoutMs,
      maxInFlight: c.maxInFlight,
      breaker: { failureThreshold: c.failureThreshold, openForMs: c.openForMs, maxOpenForMs: c.maxOpenForMs },
      calibration: c.calibration,
      calibrationAlpha: c.calibrationAlpha,
      calibrationLimits: { maxModels: c.maxModels, maxTenantFactors: c.maxTenantFactors, priorTenants: c.priorTenants },
      anthropic: endpoint(c.baseURL, c.apiKey),
      openai: endpoint(c.openaiBaseURL, c.openaiApiKey),
      google: endpoint(c.googleBaseURL, c.googleApiKey),
    }
  }),
)
