/**
 * The summarizer's config, from the environment (constant case) through
 * Effect `Config`. Defaults:
 *
 * | env | default | meaning |
 * | --- | --- | --- |
 * | `CTXD_SUMMARIZER_MODEL` | empty | the summarizer model; empty = the session's own model |
 * | `CTXD_SUMMARIZER_PROVIDER` | empty | `anthropic`, `openai`, `google` or `openai_compatible` for `CTXD_SUMMARIZER_MODEL`; empty = `openai_compatible` when `CTXD_SUMMARIZER_BASE_URL` is set, else `anthropic` for `claude-*` names, `google` for `gemini-*` names, else `openai` |
 * | `CTXD_SUMMARIZER_BASE_URL` | empty | base URL of an OpenAI-compatible server for self-hosted models (vLLM, Ollama, llama.cpp...) |
 * | `CTXD_SUMMARIZER_API_KEY` | empty | its API key (redacted; `none` is sent when empty) |
 * | `ANTHROPIC_BASE_URL` / `ANTHROPIC_API_KEY` | the SDK's | the Anthropic client |
 * | `OPENAI_BASE_URL` / `OPENAI_API_KEY` | the SDK's | the OpenAI client |
 * | `GOOGLE_GEMINI_BASE_URL` / `GEMINI_API_KEY` | the SDK's | the Gemini client (`@google/genai`, Gemini Developer API) |
 * | `CTXD_SUMMARIZER_MODE` | `rolling` | `one_shot`, `rolling` or `structured` |
 * | `CTXD_SUMMARIZER_BULLETS` | 12 | bullets of a rolling summary (and items per list of a snapshot) |
 * | `CTXD_SUMMARIZER_TOOL_RESULT_MAX_PCT` | 0.25 | one tool result may take at most this share of the summarizer's input budget; longer ones are cut in the middle |
 * | `CTXD_SUMMARIZER_CONTEXT_WINDOW` | the model table's | the summarizer model's context window |
 * | `CTXD_SUMMARIZER_MAX_OUTPUT_TOKENS` | 2048 | output tokens asked for per call (capped by the model's) |
 * | `CTXD_SUMMARIZER_SAFETY_MARGIN` | 0.1 | share of the input budget kept free for local under-counts (lesson 3) |
 * | `CTXD_SUMMARIZER_MAX_DEPTH` | 4 | deepest hierarchy of summaries of summaries before giving up |
 * | `CTXD_SUMMARIZER_TIMEOUT_MS` | 120000 | one provider call |
 * | `CTXD_SUMMARIZER_RETRIES` | 3 | retries of a failed call (429, 5xx, timeout, connection) |
 * | `CTXD_SUMMARIZER_RETRY_BASE_MS` | 500 | first backoff; doubles per retry, jittered |
 */
import type { Summarize } from "@ctxd/contracts"
import * as ConfigReference from "@ctxd/config/ConfigReference"
import { Config, Option, Redacted } from "effect"

/** The provider clients the summarizer can use. */
export type ProviderKind = "anthropic" | "openai" | "openai_compatible" | "google"

/** Where one provider is reached; absent fields fall back to the SDK's own environment lookup. */
export interface Endpoint {
  readonly baseURL?: string | undefined
  readonly apiKey?: Redacted.Redacted<string> | undefined
}

/** Everything the summarizer needs (defaults in the module doc and in {@link defaults}). */
export interface Config {
  /** Empty: the session's model. */
  readonly model: string
  /** Empty: inferred (see the module doc). */
  readonly provider: ProviderKind | ""
  readonly anthropic: Endpoint
  readonly openai: Endpoint
  /** The Gemini Developer API (`@google/genai`). */
  readonly google: Endpoint
  /** The OpenAI-compatible server; `baseURL` undefined = none configured. */
  readonly compatible: Endpoint
  readonly mode: Summarize.Mode
  readonly bullets: number
  readonly toolResultMaxPct: number
  /** Undefined: the model table's window for the summarizer model. */
  readonly contextWindow: number | undefined
  readonly maxOutputTokens: number
  readonly safetyMargin: number
  readonly maxDepth: number
  readonly timeoutMs: number
  readonly retries: number
  readonly retryBaseMs: number
}

/** The defaults: the session's model, rolling summaries of 12 bullets, the SDKs' environment. */
export const defaults: Config = {
  model: "",
  provider: "",
  anthropic: {},
  openai: {},
  google: {},
  compatible: {},
  mode: "rolling",
  bullets: 12,
  toolResultMaxPct: 0.25,
  contextWindow: undefined,
  maxOutputTokens: 2_048,
  safetyMargin: 0.1,
  maxDepth: 4,
  timeoutMs: 120_000,
  retries: 3,
  retryBaseMs: 500,
}

const text = (name: string, description: string) =>
  Config.string(name).pipe(
    Config.withDescription(description),
    Config.withDefault(""),
    Config.map((s) => s.trim()),
  )

const optionalUrl = (name: string, description: string) =>
  Config.map(text(name, description).pipe(ConfigReference.shownAs("URL")), (s) => (s === "" ? undefined : s))

const optionalKey = (name: string, description: string) =>
  Config.option(Config.redacted(name).pipe(Config.withDescription(description))).pipe(
    Config.map((o) => (Option.isSome(o) && Redacted.value(o.value).trim() !== "" ? o.value : undefined)),
  )

const integer = (name: string, fallback: number, min: number, description: string) =>
  Config.integer(name).pipe(
    ConfigReference.within({ min }, `must be at least ${min}`),
    Config.withDescription(description),
    Config.withDefault(fallback),
  )

const fraction = (name: string, fallback: number, description: string) =>
  Config.number(name).pipe(
    ConfigReference.within({ above: 0, below: 1 }, "must be in (0, 1)"),
    Config.withDescription(description),
    Config.withDefault(fallback),
  )

/** {@link Config} from the environment (table in the module doc). */
export const config: Config.Config<Config> = Config.all({
  model: text("CTXD_SUMMARIZER_MODEL", "Model that writes the compaction summaries; empty: the session's own model"),
  provider: Config.literal(
    "",
    "anthropic",
    "openai",
    "openai_compatible",
    "google",
  )("CTXD_SUMMARIZER_PROVIDER").pipe(
    Config.withDescription(
      "Provider client of CTXD_SUMMARIZER_MODEL; empty: openai_compatible when CTXD_SUMMARIZER_BASE_URL is set, else anthropic for claude-* names, google for gemini-*, else openai",
    ),
    Config.withDefault("" as const),
  ),
  anthropic: Config.all({
    baseURL: optionalUrl("ANTHROPIC_BASE_URL", "Anthropic API base URL (unset: the SDK's)"),
    apiKey: optionalKey("ANTHROPIC_API_KEY", "Anthropic API key: summaries and the loop judge for Anthropic sessions"),
  }),
  openai: Config.all({
    baseURL: optionalUrl("OPENAI_BASE_URL", "OpenAI API base URL, with /v1 (unset: the SDK's)"),
    apiKey: optionalKey("OPENAI_API_KEY", "OpenAI API key: summaries for OpenAI sessions"),
  }),
  google: Config.all({
    baseURL: optionalUrl("GOOGLE_GEMINI_BASE_URL", "Gemini Developer API base URL, without /v1beta (unset: the SDK's)"),
    apiKey: optionalKey("GEMINI_API_KEY", "Gemini API key: summaries and the loop judge for google sessions"),
  }),
  compatible: Config.all({
    baseURL: optionalUrl(
      "CTXD_SUMMARIZER_BASE_URL",
      "Base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp...) for a self-hosted summarizer",
    ),
    apiKey: optionalKey("CTXD_SUMMARIZER_API_KEY", "API key of that server (none is sent when unset)"),
  }),
  mode: Config.literal(
    "one_shot",
    "rolling",
    "structured",
  )("CTXD_SUMMARIZER_MODE").pipe(
    Config.withDescription(
      "Summary mode: one_shot, rolling (bounded bullets, CTXD_SUMMARIZER_BULLETS) or structured (findings, hypotheses, entities, preferences, task state, open questions; JSON validated)",
    ),
    Config.withDefault("rolling" as const),
  ),
  bullets: integer(
    "CTXD_SUMMARIZER_BULLETS",
    defaults.bullets,
    1,
    "Bullets of a rolling summary (and items per list of a structured snapshot)",
  ),
  toolResultMaxPct: fraction(
    "CTXD_SUMMARIZER_TOOL_RESULT_MAX_PCT",
    defaults.toolResultMaxPct,
    "Largest share of the summarizer's input budget one tool result may take; a longer one is cut in the middle",
  ),
  contextWindow: Config.option(
    Config.integer("CTXD_SUMMARIZER_CONTEXT_WINDOW").pipe(
      ConfigReference.within({ min: 1_024 }, "must be at least 1024"),
      Config.withDescription("Context window of the summarizer model, in tokens"),
    ),
  ).pipe(Config.map(Option.getOrUndefined)),
  maxOutputTokens: integer(
    "CTXD_SUMMARIZER_MAX_OUTPUT_TOKENS",
    defaults.maxOutputTokens,
    64,
    "Output tokens asked for per summarizer call (capped by the model's)",
  ),
  safetyMargin: fraction(
    "CTXD_SUMMARIZER_SAFETY_MARGIN",
    defaults.safetyMargin,
    "Share of the summarizer's input budget kept free for local under-counts",
  ),
  maxDepth: integer(
    "CTXD_SUMMARIZER_MAX_DEPTH",
    defaults.maxDepth,
    1,
    "Deepest hierarchy of summaries of summaries before the compaction gives up",
  ),
  timeoutMs: integer("CTXD_SUMMARIZER_TIMEOUT_MS", defaults.timeoutMs, 1, "Time limit of one summarizer call"),
  retries: integer(
    "CTXD_SUMMARIZER_RETRIES",
    defaults.retries,
    0,
    "Retries of a failed summarizer call (429, 5xx, timeout, connection), with exponential backoff",
  ),
  retryBaseMs: integer("CTXD_SUMMARIZER_RETRY_BASE_MS", defaults.retryBaseMs, 1, "First retry backoff; doubles per retry, jittered"),
})
