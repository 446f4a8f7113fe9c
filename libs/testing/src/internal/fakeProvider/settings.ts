/**
 * Runtime settings of the fake provider and the control patch that changes
 * them (the same JSON through `POST /_control` and the TypeScript API).
 */
import { Either, ParseResult, Schema } from "effect"

export const Endpoint = Schema.Literal(
  "messages",
  "count_tokens",
  "chat_completions",
  "responses",
  "responses_input_tokens",
  "gemini_generate",
  "gemini_count_tokens",
  "gemini_stream",
  "models",
)
export type Endpoint = typeof Endpoint.Type

export const ALL_ENDPOINTS: ReadonlyArray<Endpoint> = Endpoint.literals

const Count = Schema.Number.pipe(Schema.int(), Schema.nonNegative())

/**
 * Runtime settings (defaults in {@link DEFAULT_SETTINGS}). Faults apply only
 * to the endpoints in `faultEndpoints`, checked in this order per request:
 * - `hang` / `hangNext`: never answer (all requests / the next n); the client times out.
 * - `latencyMs`: wait before answering.
 * - `rateLimitNext`: answer the next n with 429 and `retry-after` (seconds, rounded up)
 *   plus `retry-after-ms` = `retryAfterMs`.
 * - `failNext`: answer the next n with `errorStatus` (a 5xx; 529 = Anthropic "overloaded").
 * - `errorRate`: answer this share of requests with `errorStatus` (seeded PRNG).
 *
 * Then the request is validated; prompts above `contextWindow` tokens are
 * rejected with the provider's "too long" 400. `minCacheableTokens` and
 * `cacheLookbackBlocks` tune the Anthropic cache model.
 */
export const Settings = Schema.Struct({
  latencyMs: Schema.Number.pipe(Schema.nonNegative()),
  errorRate: Schema.Number.pipe(Schema.between(0, 1)),
  errorStatus: Schema.Number.pipe(Schema.int(), Schema.between(500, 599)),
  failNext: Count,
  rateLimitNext: Count,
  retryAfterMs: Schema.Number.pipe(Schema.nonNegative()),
  hang: Schema.Boolean,
  hangNext: Count,
  faultEndpoints: Schema.Array(Endpoint),
  contextWindow: Schema.Number.pipe(Schema.int(), Schema.positive()),
  minCacheableTokens: Count,
  cacheLookbackBlocks: Schema.Number.pipe(Schema.int(), Schema.positive()),
})
export type Settings = typeof Settings.Type

export const DEFAULT_SETTINGS: Settings = {
  latencyMs: 0,
  errorRate: 0,
  errorStatus: 500,
  failNext: 0,
  rateLimitNext: 0,
  retryAfterMs: 1_000,
  hang: false,
  hangNext: 0,
  faultEndpoints: ALL_ENDPOINTS,
  contextWindow: 200_000,
  minCacheableTokens: 1_024,
  cacheLookbackBlocks: 20,
}

export const ScriptedToolCall = Schema.Struct({
  id: Schema.optional(Schema.String),
  name: Schema.String.pipe(Schema.minLength(1)),
  input: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
})
export type ScriptedToolCall = typeof ScriptedToolCall.Type

export const ScriptedError = Schema.Struct({
  status: Schema.Number.pipe(Schema.int(), Schema.between(400, 599)),
  type: Schema.optional(Schema.String),
  message: Schema.optional(Schema.String),
  code: Schema.optional(Schema.String),
  /** Sent as `retry-after` (seconds, rounded up) and `retry-after-ms`, as on a fault's 429. */
  retryAfterMs: Schema.optional(Schema.Number.pipe(Schema.nonNegative())),
})
export type ScriptedError = typeof ScriptedError.Type

export const ScriptedReply = Schema.Struct({
  provider: Schema.optional(Schema.Literal("anthropic", "openai", "google")),
  text: Schema.optional(Schema.String),
  toolCalls: Schema.optional(Schema.Array(ScriptedToolCall)),
  /**
   * Anthropic, with a tool search tool in the request: the model searches
   * for this query first (a `server_tool_use` and its
   * `tool_search_tool_result` open the reply, naming the deferred tools that
   * match), then answers with `text` / `toolCalls`.
   */
  toolSearch: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  stopReason: Schema.optional(Schema.String),
  error: Schema.optional(ScriptedError),
  /**
   * Taken only by a request that offers a tool of this name (requests
   * without it — an agent CLI's title or routing call — pass it by and get
   * the default reply): scripts a CLI's main loop whatever side calls it makes.
   */
  whenTool: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
})
export type ScriptedReply = typeof ScriptedReply.Type

export const ControlPatch = Schema.extend(
  Schema.partial(Settings),
  Schema.Struct({
    replies: Schema.optional(Schema.Array(ScriptedReply)),
    clearReplies: Schema.optional(Schema.Boolean),
    clearCache: Schema.optional(Schema.Boolean),
    clearRequests: Schema.optional(Schema.Boolean),
    reset: Schema.optional(Schema.Boolean),
  }),
).annotations({ identifier: "ControlPatch" })
export type ControlPatch = typeof ControlPatch.Type

const decodePatch = Schema.decodeUnknownEither(ControlPatch, { onExcessProperty: "error" })

/** Decodes a control patch; `Left(message)` on a malformed one. */
export const parsePatch = (input: unknown): Either.Either<ControlPatch, string> =>
  Either.mapLeft(decodePatch(input), (e) => ParseResult.TreeFormatter.formatErrorSync(e))

/** The settings fields of a patch applied over `base`. */
export const applySettings = (base: Settings, patch: ControlPatch): Settings => {
  const next: Record<string, unknown> = { ...base }
  for (const key of Object.keys(DEFAULT_SETTINGS)) {
    const value = (patch as Record<string, unknown>)[key]
    if (value !== undefined) next[key] = value
  }
  return next as Settings
}
