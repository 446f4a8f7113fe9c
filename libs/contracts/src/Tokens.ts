/**
 * Wire schemas of the token counter, for the JSON Schema documents:
 *
 * - `<root>.v1.usage.<tenant>.<session>`: {@link UsageReport} `{turnId, usage}`,
 *   the usage the provider billed for a turn, in Anthropic or OpenAI field
 *   names. A report that cannot be used is answered with {@link BadUsage}.
 * - `<root>.v1.tokens.count.<tenant>` (and the tenant-less
 *   `<root>.v1.tokens.count`): {@link CountRequest} → {@link CountReply}.
 */
import * as Errors from "./Errors.ts"
import { Schema } from "effect"

/**
 * Which backend counts: `auto` = exact where the model's provider offers a
 * count endpoint and is configured, else local; `anthropic_api` /
 * `openai_api` / `google_api` = that provider's count endpoint (a model of another provider
 * is counted locally, with `fallback: "unsupported_provider"`).
 */
export const BackendChoice = Schema.Literal("auto", "anthropic_api", "openai_api", "google_api", "tiktoken", "heuristic").annotations({
  identifier: "TokenBackendChoice",
  description:
    "auto = the provider's count endpoint where there is one (Anthropic, OpenAI Responses, Gemini; when configured), else tiktoken",
})
export type BackendChoice = typeof BackendChoice.Type

/**
 * The backend that answered, in the names the first release of
 * `ctx.v1.tokens.count` replies with (old clients decode them strictly, so
 * this list does not grow): a provider's own count says `anthropic_api`
 * whichever provider it is, and {@link CountReply} `countedBy` names it.
 */
export const Backend = Schema.Literal("anthropic_api", "tiktoken", "heuristic").annotations({ identifier: "TokenBackend" })
export type Backend = typeof Backend.Type

/** The reply's {@link Backend} for a backend name (`openai_api`, `google_api` and any later provider count → `anthropic_api`, "a provider's count"). */
export const replyBackend = (backend: string): Backend => (backend === "tiktoken" || backend === "heuristic" ? backend : "anthropic_api")

const Tokens = Schema.Int.pipe(Schema.nonNegative())
const OptionalTokens = Schema.optional(Schema.NullOr(Tokens))
const Loose = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/**
 * Token usage as a provider reports it. Anthropic: `input_tokens` (uncached),
 * `cache_read_input_tokens`, `cache_creation_input_tokens`, `output_tokens`.
 * OpenAI: `prompt_tokens` (cached included), `prompt_tokens_details.cached_tokens`,
 * `completion_tokens`. OpenAI Responses: `input_tokens` (cached included),
 * `input_tokens_details.cached_tokens`, `output_tokens`. Gemini (`usageMetadata`):
 * `promptTokenCount` (cached included), `cachedContentTokenCount`,
 * `candidatesTokenCount` (+ `thoughtsTokenCount`). One of `input_tokens` /
 * `prompt_tokens` / `promptTokenCount` is required; other fields are ignored.
 */
export const Usage = Schema.Struct(
  {
    input_tokens: OptionalTokens,
    cache_read_input_tokens: OptionalTokens,
    cache_creation_input_tokens: OptionalTokens,
    output_tokens: OptionalTokens,
    prompt_tokens: OptionalTokens,
    completion_tokens: OptionalTokens,
    prompt_tokens_details: Schema.optional(Schema.NullOr(Schema.Struct({ cached_tokens: OptionalTokens }, Loose))),
    /** OpenAI Responses: with it, `input_tokens` counts the cached tokens too (like `prompt_tokens`). */
    input_tokens_details: Schema.optional(Schema.NullOr(Schema.Struct({ cached_tokens: OptionalTokens }, Loose))),
    /** Gemini `usageMetadata`: the prompt, cached tokens included. */
    promptTokenCount: OptionalTokens,
    /** Gemini: prompt tokens read from the (implicit or explicit) cache. */
    cachedContentTokenCount: OptionalTokens,
    /** Gemini: output tokens (thinking excluded). */
    candidatesTokenCount: OptionalTokens,
    /** Gemini: thinking tokens, billed as output. */
    thoughtsTokenCount: OptionalTokens,
  },
  Loose,
).annotations({ identifier: "ProviderUsage" })
export type Usage = typeof Usage.Type

/** `<root>.v1.usage.<tenant>.<session>` request. */
export const UsageReport = Schema.Struct({
  /** The turn the usage was billed for. */
  turnId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  usage: Usage,
  /**
   * The provider's cache diagnostics as its response carried them, when the
   * turn asked for them (`previousResponseId`): Anthropic's `diagnostics`,
   * OpenAI Responses' `prompt_cache_diagnostics`. They explain a cache miss
   * the usage shows (`cache.misses` of the reply).
   */
  diagnostics: Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown }))),
}).annotations({ identifier: "UsageReport", description: "ctx.v1.usage.<tenant>.<session> request" })
export type UsageReport = typeof UsageReport.Type

/**
 * A usage reply's comparison of the billed cache reads with the turn's
 * expectation (present when the turn's report carried
 * `cache.expectedReadTokens`). `break` is `unexpected` when
 * `billedReadTokens < minReadTokens` = 0.9 × expected (in the provider's
 * tokens: scaled by the turn's billed / estimated prompt) − 64: the cache
 * broke where ctxd did not break it (the runtime changed the system prompt or
 * tools, the cache expired before the provider call, or the provider evicted
 * early).
 */
export const UsageCache = Schema.Struct({
  /** Tokens the turn's report expected the provider to read from its cache (ctxd's estimate). */
  expectedReadTokens: Schema.Number,
  /** Tokens the turn's report expected it to write (Anthropic) or bill uncached (OpenAI). */
  expectedWriteTokens: Schema.optional(Schema.Number),
  /** `cache_read_input_tokens` (Anthropic) or `prompt_tokens_details.cached_tokens` (OpenAI). */
  billedReadTokens: Schema.Number,
  /** `cache_creation_input_tokens` (Anthropic) or `prompt_tokens − cached_tokens` (OpenAI). */
  billedWriteTokens: Schema.Number,
  /** The billed read below which the break is `unexpected`. */
  minReadTokens: Schema.Number,
  /** `unexpected`: the provider read less than ctxd's own edits left cached; `none` otherwise. */
  break: Schema.Literal("unexpected", "none"),
  /** Why ctxd changed the prefix where it did (the turn's `report.cache.reason`; `append`: it did not). */
  reason: Schema.optional(Schema.String),
  /**
   * The prompt tokens not read from the cache, in the provider's tokens, by
   * cause: the turn's own `report.cache.miss`, then any unexpected shortfall,
   * explained by the report's `diagnostics` when given (absent: none missed).
   */
  misses: Schema.optional(
    Schema.Array(Schema.Struct({ cause: Schema.String, tokens: Schema.Number, reason: Schema.optional(Schema.String) })),
  ),
}).annotations({ identifier: "UsageCache" })
export type UsageCache = typeof UsageCache.Type

/** `<root>.v1.usage.<tenant>.<session>` success reply. */
export const UsageReply = Schema.Struct({
  ok: Schema.Literal(true),
  turnId: Schema.String,
  /** Billed prompt tokens: input + cache read + cache write (Anthropic) or prompt_tokens (OpenAI). */
  billed: Schema.Number,
  /** (estimate − billed) / billed for the turn; negative = under-count. */
  drift: Schema.Number,
  /** The model's correction factor for local estimates after this report (1 when none). */
  factor: Schema.Number,
  /**
   * True when this report was counted; false when the turn's usage had
   * already been reported (a duplicate: drift and calibration are left as
   * they were). Absent from workers older than this field.
   */
  counted: Schema.optional(Schema.Boolean),
  /**
   * The billed cache reads and writes against the turn's expectation; absent
   * when the turn's report has none (a worker older than the field).
   */
  cache: Schema.optional(UsageCache),
}).annotations({ identifier: "UsageReply", description: "ctx.v1.usage.<tenant>.<session> success reply" })
export type UsageReply = typeof UsageReply.Type

/** A usage report that cannot be used; calibration is left untouched. */
export class BadUsage extends Schema.TaggedError<BadUsage>()("BadUsage", {
  message: Schema.String,
  /** `malformed` usage fields, an `unknown_turn`, or an unusable `estimate`. */
  reason: Schema.Literal("malformed", "unknown_turn", "bad_estimate"),
  path: Schema.optional(Schema.String),
}) {}

/** The wire error for a {@link BadUsage}: a `BadRequest`. */
export const toWireError = (error: BadUsage): Errors.BadRequest =>
  new Errors.BadRequest({
    message: error.message,
    ...(error.path === undefined ? {} : { path: error.path }),
    hint:
      error.reason === "unknown_turn"
        ? "report usage with the turnId of a turn this session answered"
        : "send the provider's usage object as returned (non-negative whole token counts)",
  })

/** `<root>.v1.tokens.count` request: a provider request body, or a list of texts. Exactly one of `body` / `segments`. */
export const CountRequest = Schema.Struct({
  model: Schema.Struct({
    provider: Schema.Literal("anthropic", "openai", "google"),
    name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  }),
  /** Per-request backend; default the process setting (`CTXD_TOKEN_BACKEND`, default `auto`). */
  backend: Schema.optional(BackendChoice),
  /** A whole provider request body (Anthropic Messages, OpenAI Chat Completions or Responses, or Gemini `generateContent` parameters, by `model.provider`). */
  body: Schema.optional(Loose),
  /** Texts to count one by one (each as plain text, no message framing). */
  segments: Schema.optional(Schema.Array(Schema.String).pipe(Schema.maxItems(10_000))),
})
  .pipe(Schema.filter((r) => (r.body === undefined) !== (r.segments === undefined) || "give exactly one of body or segments"))
  .annotations({ identifier: "TokenCountRequest", description: "ctx.v1.tokens.count request" })
export type CountRequest = typeof CountRequest.Type

/** `<root>.v1.tokens.count` success reply. */
export const CountReply = Schema.Struct({
  ok: Schema.Literal(true),
  /** Tokens of the body, or the sum of the segments. */
  tokens: Schema.Number,
  /** Tokens per segment, in request order (segment requests only). */
  segments: Schema.optional(Schema.Array(Schema.Number)),
  /** Who answered, in the first release's names: `anthropic_api` here is any provider's own count (`countedBy` says whose). */
  backend: Backend,
  /**
   * Who answered: `anthropic_api`, `openai_api`, `google_api`, `tiktoken` or `heuristic`
   * (a string: later providers' counts are added here, never to `backend`).
   * Absent from workers older than this field.
   */
  countedBy: Schema.optional(Schema.String),
  /** Local tokenizer vocabulary, `heuristic`, or the provider's name (`anthropic`, `openai`, `google`) for its own count. */
  encoding: Schema.String,
  /** True only for a provider count while the circuit breaker has never opened in this process. */
  exact: Schema.Boolean,
  /** The correction factor applied to a local count (1 when none). */
  calibration: Schema.Number,
  /** Why a local backend answered when the provider's count was asked for (`circuit_open`, `timeout`, ...). */
  fallback: Schema.optional(Schema.String),
}).annotations({ identifier: "TokenCountReply", description: "ctx.v1.tokens.count success reply" })
export type CountReply = typeof CountReply.Type
