/**
 * A local HTTP server that speaks the Anthropic Messages, OpenAI Chat
 * Completions, OpenAI Responses and Gemini `generateContent` wire formats, for driving the real provider SDKs in tests and
 * demos (point the SDK's `baseURL` at it; no network needed).
 *
 * - `POST /v1/messages` (JSON or `stream: true` SSE), `POST /v1/messages/count_tokens`,
 *   `POST /v1/chat/completions` (JSON or SSE, `stream_options.include_usage`),
 *   `POST /v1/responses` (JSON, or with `stream: true` the Responses events ending in
 *   `response.completed`, see `internal/fakeProvider/responsesStream.ts`: a minimal
 *   `Response` with `usage.input_tokens`, `input_tokens_details.cached_tokens`, `output_tokens`) and
 *   `POST /v1/responses/input_tokens` (`{object: "response.input_tokens", input_tokens}`);
 *   Responses bodies are checked for known keys, roles, `call_id` pairing between
 *   `function_call` and `function_call_output`, and well-formed reasoning and
 *   compaction items.
 * - Provider compaction: an Anthropic `compaction` block is accepted (only with
 *   `anthropic-beta: compact-2026-01-12`, as are the `compact_20260112` edit and
 *   the `compaction` parameter) in assistant messages, which may then open the
 *   conversation; a Responses `compaction` item (and `context_management`) is
 *   accepted. Both providers read, bill and cache the prompt from the latest
 *   compaction on (what precedes it was folded).
 * - Model lists: `GET /v1/models[/{id}]` (Anthropic's or OpenAI's shape, by the
 *   request's headers) and `GET /v1beta/models[/{id}]` (Gemini's), see
 *   `internal/fakeProvider/models.ts`.
 * - Scripted replies with `whenTool` are taken only by a request offering that
 *   tool (an agent CLI's title or routing calls get the default reply); a
 *   scripted error with `retryAfterMs` carries `retry-after`. A request giving
 *   an answer JSON schema gets, by default, the smallest JSON matching it
 *   (`internal/fakeProvider/structured.ts`).
 * - `POST /v1beta/models/{model}:streamGenerateContent` (`?alt=sse`: SSE chunks;
 *   else one JSON array of them; see `internal/fakeProvider/geminiStream.ts`) and
 *   `POST /v1beta/models/{model}:generateContent` (JSON: one candidate,
 *   `usageMetadata` with `promptTokenCount`, `cachedContentTokenCount` when
 *   the implicit cache read, `candidatesTokenCount`, `totalTokenCount`) and
 *   `POST /v1beta/models/{model}:countTokens` (`{contents}` or
 *   `{generateContentRequest}`; `totalTokens` equals `promptTokenCount` of the
 *   same prompt); the API key in `x-goog-api-key` (what `@google/genai` sends)
 *   or `?key=`. Bodies are checked for known fields, roles `user`/`model`,
 *   non-empty parts with one datum, function responses right after their call
 *   turn (as many, same names), and, for `gemini-3*` models, a
 *   `thoughtSignature` on the first function call of each model step of the
 *   current turn; errors are Google's `{error: {code, message, status}}`.
 *   Scripted tool calls come back as `functionCall` parts (the first one
 *   signed for `gemini-3*`). Implicit cache: the longest common token prefix
 *   with a recent prompt (5 minutes) from 2,048 tokens (`gemini-2.5-pro`,
 *   `gemini-2.5-flash`) or 4,096 (other models), as ctxd's price table has it.
 * - Requests are validated like the real APIs where ctxd can get them wrong
 *   (role alternation, tool call/result pairing, `cache_control` limits and TTL
 *   order, `max_tokens`, empty text, unknown fields, context window) and
 *   rejected with the providers' 400 error JSON, which the SDKs surface as
 *   `BadRequestError`.
 * - Token ground truth (`count_tokens`, `usage`, both providers): the Claude
 *   BPE of `@anthropic-ai/tokenizer` (deliberately not js-tiktoken) over the
 *   request's text — system, each tool's JSON, message texts, tool inputs and
 *   results — plus fixed framing overheads ({@link overheads}: 3 per request,
 *   4 per message, 4 per tool, 1600 per image). `count_tokens` equals
 *   `input_tokens + cache_read + cache_creation` of the same prompt.
 * - Prompt cache, per API key and model (OpenAI: per `prompt_cache_key`, else
 *   API key, and model). Anthropic: the prompt is a chain of blocks (tools,
 *   system, message blocks); each breakpoint whose prefix has at least
 *   `minCacheableTokens` writes an entry (5 min or 1 h); a request reads the
 *   longest stored prefix ending at one of its breakpoints or up to
 *   `cacheLookbackBlocks - 1` blocks before one. OpenAI: the longest common
 *   token prefix with recent prompts, counted once ≥ 1024 in 128-token steps.
 *   Details in `internal/fakeProvider/cache.ts`.
 * - Faults and scripted replies are set at start or at runtime, through
 *   {@link FakeProviderServer.control} or `POST /_control` with the same JSON;
 *   the request log is {@link FakeProviderServer.requests} or `GET /_requests`.
 *
 * @example
 * const server = await FakeProvider.start({ latencyMs: 20 })
 * const anthropic = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
 * const openai = new OpenAI({ baseURL: server.openaiBaseURL, apiKey: "test" })
 * server.control({ rateLimitNext: 1, retryAfterMs: 10, replies: [{ text: "hi" }] })
 * await server.close()
 */
import { AnthropicProvider } from "@ctxd/context"
import { Data, Effect, Either, type Scope } from "effect"
import * as Anthropic from "./internal/fakeProvider/anthropic.ts"
import * as Gemini from "./internal/fakeProvider/gemini.ts"
import * as OpenAI from "./internal/fakeProvider/openai.ts"
import * as Responses from "./internal/fakeProvider/responses.ts"
import * as Server from "./internal/fakeProvider/server.ts"
import { type ControlPatch, parsePatch, type Settings } from "./internal/fakeProvider/settings.ts"
import * as State from "./internal/fakeProvider/state.ts"
import * as Tokens from "./internal/fakeProvider/tokens.ts"

/** The prefix check of preserved thinking, pure: `sign` a response's thinking blocks, `check` a request (see its module). */
export * as PrefixCheck from "./internal/fakeProvider/binding.ts"

export type { ControlPatch, Endpoint, ScriptedError, ScriptedReply, ScriptedToolCall, Settings } from "./internal/fakeProvider/settings.ts"
export type { LoggedRequest } from "./internal/fakeProvider/state.ts"
export { DEFAULT_SETTINGS } from "./internal/fakeProvider/settings.ts"

/**
 * Options of {@link start}: every {@link Settings} field (defaults in
 * {@link DEFAULT_SETTINGS}: no latency, no faults, `retryAfterMs` 1000,
 * `contextWindow` 200000, `minCacheableTokens` 1024, `cacheLookbackBlocks` 20),
 * an initial reply queue, and where to listen.
 */
export interface StartOptions extends Partial<Settings> {
  /** TCP port; `0` (the default) picks a free one. */
  readonly port?: number
  /** Interface to bind; only loopback makes sense. Default `127.0.0.1`. */
  readonly host?: string
  /** Seed of the PRNG behind `errorRate`. Default `1`. */
  readonly seed?: number
  /** Replies queued at start (and again after {@link FakeProviderServer.reset}). */
  readonly replies?: ControlPatch["replies"]
}

/** A running fake provider. */
export interface FakeProviderServer {
  /** `http://127.0.0.1:<port>`: the Anthropic SDK's `baseURL`. */
  readonly url: string
  /** `url + "/v1"`: the OpenAI SDK's `baseURL`. */
  readonly openaiBaseURL: string
  readonly port: number
  /**
   * Changes settings and queues replies at runtime (the body of `POST /_control`).
   * Settings fields replace the current values; `replies` are appended to the
   * queue; `reset`, `clearReplies`, `clearCache`, `clearRequests` act first.
   * Throws on a malformed patch. Returns the resulting settings and queue length.
   */
  readonly control: (patch: ControlPatch) => { readonly settings: Settings; readonly pendingReplies: number }
  /** The request log, oldest first (provider paths only, not `/_control`). */
  readonly requests: () => ReadonlyArray<State.LoggedRequest>
  /** Back to the state right after start: settings, reply queue, log, caches, id counters. */
  readonly reset: () => void
  /** Stops listening and drops open connections (hung requests included). Idempotent. */
  readonly close: () => Promise<void>
}

/** The fixed framing overheads added to the text tokens, and the flat cost of an image. */
export const overheads = {
  perRequest: Tokens.REQUEST_OVERHEAD,
  perMessage: Tokens.MESSAGE_OVERHEAD,
  perTool: Tokens.TOOL_OVERHEAD,
  image: Tokens.IMAGE_TOKENS,
} as const

/** The ground-truth token count of a text (Claude BPE, NFKC-normalized). */
export const countTextTokens = (text: string): number => Tokens.count(text)

/**
 * The ground-truth input tokens of a request body, as `count_tokens` and the
 * usage of a response report them (uncached + cache read + cache write). A
 * Gemini body in `@google/genai`'s shape (ctxd's body) or the REST shape.
 */
export const countRequestTokens = (format: "anthropic" | "openai" | "openai-responses" | "gemini", body: Record<string, unknown>): number =>
  promptTokensOf[format](body)

/** Each API's ground-truth prompt tokens, by format. */
const promptTokensOf: Readonly<Record<"anthropic" | "openai" | "openai-responses" | "gemini", (body: Record<string, unknown>) => number>> =
  {
    anthropic: (body) => Anthropic.promptBlocks(body).reduce((n, b) => n + b.tokens, 0),
    openai: (body) => OpenAI.promptTokens(body).length,
    "openai-responses": (body) => Responses.promptTokens(body).length,
    gemini: (body) => Gemini.promptTokens(Gemini.restShape(body)).length,
  }

/**
 * The first problem the fake provider finds in a request body (its 400
 * error's message), or `undefined` when it accepts it; `betas`: the
 * `anthropic-beta` header's values (Anthropic only).
 */
export const validateRequest = (
  format: "anthropic" | "openai" | "openai-responses",
  body: unknown,
  betas: ReadonlyArray<string> = [],
): string | undefined => validatorOf[format](body, betas)

/** Each API's request validator, by format. */
const validatorOf: Readonly<
  Record<"anthropic" | "openai" | "openai-responses", (body: unknown, betas: ReadonlyArray<string>) => string | undefined>
> = {
  anthropic: (body, betas) => AnthropicProvider.Validate.validate(body, "messages", betas),
  openai: (body) => OpenAI.validate(body)?.message,
  "openai-responses": (body) => Responses.validate(body, "responses")?.message,
}

const settingsPatch = (options: StartOptions): ControlPatch => {
  const { port: _port, host: _host, seed: _seed, ...rest } = options
  const decoded = parsePatch(rest)
  if (Either.isLeft(decoded)) throw new Error(`FakeProvider: invalid options: ${decoded.left}`)
  return decoded.right
}

/** Starts a fake provider on `127.0.0.1` (port `0` = a free one). */
export const start = async (options: StartOptions = {}): Promise<FakeProviderServer> => {
  const state = State.make(settingsPatch(options), options.seed ?? 1)
  const host = options.host ?? "127.0.0.1"
  const listening = await Server.listen(state, options.port ?? 0, host)
  const url = `http://${host}:${listening.port}`
  return {
    url,
    openaiBaseURL: `${url}/v1`,
    port: listening.port,
    control: (patch) => {
      const decoded = parsePatch(patch)
      if (Either.isLeft(decoded)) throw new Error(`FakeProvider: invalid control patch: ${decoded.left}`)
      State.apply(state, decoded.right)
      return State.snapshot(state)
    },
    requests: () => [...state.log],
    reset: () => State.reset(state),
    close: listening.close,
  }
}

/** Starting the server failed (bad options, port in use). */
export class FakeProviderStartError extends Data.TaggedError("FakeProviderStartError")<{ readonly cause: unknown }> {}

/** {@link start} as a scoped resource: closed when the scope closes (for `it.scoped` / `Layer.scoped`). */
export const scoped = (options: StartOptions = {}): Effect.Effect<FakeProviderServer, FakeProviderStartError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({ try: () => start(options), catch: (cause) => new FakeProviderStartError({ cause }) }),
    (server) => Effect.promise(() => server.close()),
  )
