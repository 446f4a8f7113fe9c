/**
 * The provider endpoints once faults are past: validate, count, simulate the
 * cache, take a scripted reply (or the default), and describe the response.
 */
import { AnthropicProvider, CostModel, OpenAIChatProvider, OpenAIResponsesProvider, type ProviderApi, Providers } from "@ctxd/context"
import * as Anthropic from "./anthropic.ts"
import * as Binding from "./binding.ts"
import * as Cache from "./cache.ts"
import * as Compaction from "./compaction.ts"
import * as Diagnostics from "./diagnostics.ts"
import * as Gemini from "./gemini.ts"
import * as GeminiStream from "./geminiStream.ts"
import { isRecord, type Json } from "./json.ts"
import * as OpenAI from "./openai.ts"
import * as Responses from "./responses.ts"
import * as ResponsesStream from "./responsesStream.ts"
import type { ScriptedError, ScriptedReply } from "./settings.ts"
import * as State from "./state.ts"
import * as Structured from "./structured.ts"
import * as Tokens from "./tokens.ts"

/** A response to write: JSON, or server-sent events (already framed). */
export type Reply =
  | { readonly kind: "json"; readonly status: number; readonly body: unknown; readonly headers?: Readonly<Record<string, string>> }
  | { readonly kind: "sse"; readonly frames: ReadonlyArray<string> }

/** The provider whose API a request is for (its adapter's `Api` words the errors). */
export type Provider = "anthropic" | "openai" | "google"

/**
 * The names of the tools a request offers, in any of the four formats
 * (Messages and Responses `tools[].name`, Chat `tools[].function.name`,
 * Gemini `tools[].functionDeclarations[].name`): what `whenTool` matches.
 */
const toolNames = (body: Json): Array<string> => {
  const tools = Array.isArray(body["tools"]) ? body["tools"].filter(isRecord) : []
  return tools.flatMap((t): Array<string> => {
    if (typeof t["name"] === "string") return [t["name"]]
    if (isRecord(t["function"]) && typeof t["function"]["name"] === "string") return [t["function"]["name"]]
    const declared = Array.isArray(t["functionDeclarations"]) ? t["functionDeclarations"].filter(isRecord) : []
    return declared.flatMap((d) => (typeof d["name"] === "string" ? [d["name"]] : []))
  })
}

/** The reply, or for a request giving an answer schema and nothing scripted to say, JSON matching it. */
const structured = (
  api: "anthropic" | "openai" | "openai-responses" | "google",
  body: Json,
  reply: ScriptedReply | undefined,
): ScriptedReply | undefined => {
  if (reply?.text !== undefined || (reply?.toolCalls?.length ?? 0) > 0 || reply?.error !== undefined) return reply
  const text = Structured.defaultText(api, body)
  return text === undefined ? reply : { ...reply, text }
}

const json = (status: number, body: unknown, headers?: Record<string, string>): Reply => ({ kind: "json", status, body, headers })

/** The API of `provider`: its error envelope, paths and messages. */
export const apiOf = (provider: Provider): ProviderApi.Api => Providers.ofProvider(provider).api

/** A provider-shaped error response. */
export const error = (provider: Provider, status: number, message: string, requestId: string, extra?: Partial<ScriptedError>): Reply =>
  json(status, apiOf(provider).errorBody(status, message, requestId, extra))

/** The error a fault injects (5xx or 429), in the provider's words. */
export const faultError = (provider: Provider, status: number, requestId: string, retryAfterMs?: number): Reply => {
  const words = apiOf(provider).messages
  const message = status === 429 ? `${words.rateLimited} (fake provider).` : status === 529 ? "Overloaded" : words.server
  const reply = error(provider, status, message, requestId)
  if (retryAfterMs === undefined || reply.kind !== "json") return reply
  return { ...reply, headers: { "retry-after": String(Math.ceil(retryAfterMs / 1_000)), "retry-after-ms": String(retryAfterMs) } }
}

const scriptedError = (provider: Provider, e: ScriptedError, requestId: string): Reply => {
  const { retryAfterMs, ...detail } = e
  const reply = error(provider, e.status, e.message ?? `Scripted error ${e.status}`, requestId, detail)
  if (retryAfterMs === undefined || reply.kind !== "json") return reply
  return { ...reply, headers: { "retry-after": String(Math.ceil(retryAfterMs / 1_000)), "retry-after-ms": String(retryAfterMs) } }
}

/** `POST /v1/messages` and `POST /v1/messages/count_tokens`. */
export const anthropic = (
  state: State.State,
  endpoint: "messages" | "count_tokens",
  body: unknown,
  apiKey: string,
  requestId: string,
  betas: ReadonlyArray<string> = [],
): Reply => {
  const refused = Compaction.check(body, betas)
  if (refused !== undefined) {
    const envelope = apiOf("anthropic").errorBody(refused.status, refused.message, requestId) as Json
    const inner = envelope["error"] as Json
    return json(refused.status, { ...envelope, error: { ...inner, details: { error_code: refused.code } } })
  }
  // the model's own rules first (tool search, mid-conversation system messages), then the rest without its system messages
  const byModel = AnthropicProvider.ValidateModel.check(body, CostModel.lookup(String(isRecord(body) ? body["model"] : "")).capabilities)
  const problem = byModel.problem ?? AnthropicProvider.Validate.validate(byModel.body, endpoint, betas)
  if (problem !== undefined || !isRecord(body)) return error("anthropic", 400, problem ?? "invalid request", requestId)
  const bound = endpoint === "messages" ? Binding.check(body, betas) : { ok: true as const, body, dropped: [] }
  if (!bound.ok) return error("anthropic", 400, bound.message, requestId)
  const blocks = Anthropic.promptBlocks(bound.body)
  const total = blocks.reduce((n, b) => n + b.tokens, 0)
  if (total > state.settings.contextWindow) {
    return error("anthropic", 400, `prompt is too long: ${total} tokens > ${state.settings.contextWindow} maximum`, requestId)
  }
  if (endpoint === "count_tokens") return json(200, { input_tokens: total })

  const reply = structured("anthropic", body, State.takeReply(state, "anthropic", toolNames(body)))
  if (reply?.error !== undefined) return scriptedError("anthropic", reply.error, requestId)
  const split = Cache.anthropicSplit(state.caches, `${apiKey}|${String(body["model"])}`, blocks, {
    minCacheableTokens: state.settings.minCacheableTokens,
    lookbackBlocks: state.settings.cacheLookbackBlocks,
    now: Date.now(),
  })
  const model = String(body["model"])
  if (Compaction.asksForSummary(body)) {
    const id = `msg_${State.nextId(state)}`
    const messages = Array.isArray(body["messages"]) ? body["messages"] : []
    const summary = reply?.text ?? Anthropic.defaultText(messages.length, total, "")
    const content = [Compaction.block(body, summary)]
    const outputTokens = Math.max(1, Tokens.count(summary))
    return json(
      200,
      Anthropic.message(id, model, { content, stopReason: "compaction", outputTokens }, Compaction.usage(split, outputTokens)),
    )
  }
  const answer = Anthropic.withThinking(
    body,
    Anthropic.answer(body, reply, total, () => State.nextId(state)),
    Binding.binds(model),
  )
  const signed = { ...answer, content: Binding.sign(body, model, answer.content) }
  const usage = Anthropic.usage(split, signed.outputTokens)
  const id = `msg_${State.nextId(state)}`
  const diagnostics = Diagnostics.anthropic(state.caches, bound.body, blocks, id)
  // listed only under the beta, as `[]` when nothing was dropped (SDK `BetaMessage.input_transformations`)
  const extra = { ...(betas.includes(AnthropicProvider.Binding.BETA) ? { input_transformations: bound.dropped } : {}), diagnostics }
  if (body["stream"] !== true) return json(200, { ...Anthropic.message(id, model, signed, usage), ...extra })
  const frames = Anthropic.streamEvents(id, model, signed, usage, extra).map(
    ([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`,
  )
  return { kind: "sse", frames }
}

/** An OpenAI `invalid_request_error` reply for a validation problem (a body that is not an object: a generic one). */
const invalidRequest = (
  problem: { readonly message: string; readonly param: string | null; readonly code: string | null } | undefined,
): Reply => {
  const p = problem ?? { message: "invalid request", param: null, code: null }
  // OpenAI error bodies carry no request id (it travels in the `x-request-id` header)
  return json(400, apiOf("openai").errorBody(400, p.message, "", { type: "invalid_request_error", param: p.param, code: p.code }))
}

/**
 * The cached and (GPT-5.6+, billed) written prompt tokens of an OpenAI request:
 * breakpoint caching on models that take explicit breakpoints, else automatic.
 */
const openaiCache = (state: State.State, body: Json, tokens: ReadonlyArray<number>, marks: ReadonlyArray<number>, apiKey: string) => {
  const key = typeof body["prompt_cache_key"] === "string" ? `key:${body["prompt_cache_key"]}` : `api:${apiKey}`
  const namespace = `${key}|${String(body["model"])}`
  const now = Date.now()
  if (!OpenAIChatProvider.ExplicitCache.takesBreakpoints(String(body["model"]))) {
    return {
      cached: Cache.openaiCached(state.caches, namespace, tokens, { extendedRetention: body["prompt_cache_retention"] === "24h", now }),
      written: undefined,
    }
  }
  const options = isRecord(body["prompt_cache_options"]) ? body["prompt_cache_options"] : {}
  const ttlMs = Cache.OPENAI_TTL_MS[String(options["ttl"] ?? "30m")] ?? Cache.OPENAI_TTL_MS["30m"]!
  return Cache.openaiBreakpoints(state.caches, namespace, tokens, { marks, explicit: options["mode"] === "explicit", ttlMs, now })
}

/** `POST /v1/chat/completions`. */
export const openai = (state: State.State, body: unknown, apiKey: string, requestId: string): Reply => {
  const problem = OpenAI.validate(body)
  if (problem !== undefined || !isRecord(body)) {
    return invalidRequest(problem)
  }
  const marks: Array<number> = []
  const tokens = OpenAI.promptTokens(body, marks)
  const window = state.settings.contextWindow
  if (tokens.length > window) {
    const message = `This model's maximum context length is ${window} tokens. However, your messages resulted in ${tokens.length} tokens. Please reduce the length of the messages.`
    return json(
      400,
      apiOf("openai").errorBody(400, message, requestId, {
        type: "invalid_request_error",
        param: "messages",
        code: "context_length_exceeded",
      }),
    )
  }
  const reply = structured("openai", body, State.takeReply(state, "openai", toolNames(body)))
  if (reply?.error !== undefined) return scriptedError("openai", reply.error, requestId)
  const { cached, written } = openaiCache(state, body, tokens, marks, apiKey)
  const answer = OpenAI.answer(body, reply, tokens.length, () => State.nextId(state))
  const usage = OpenAI.usage(tokens.length, cached, answer.completionTokens, written)
  const id = `chatcmpl-${State.nextId(state)}`
  const created = Math.floor(Date.now() / 1_000)
  const model = String(body["model"])
  if (body["stream"] !== true) return json(200, OpenAI.completion(id, model, created, answer, usage))
  const options = body["stream_options"]
  const includeUsage = isRecord(options) && options["include_usage"] === true
  const frames = OpenAI.chunks(id, model, created, answer, usage, includeUsage).map((c: Json) => `data: ${JSON.stringify(c)}\n\n`)
  return { kind: "sse", frames: [...frames, "data: [DONE]\n\n"] }
}

/** `POST /v1/responses` and `POST /v1/responses/input_tokens`. */
export const responses = (
  state: State.State,
  endpoint: "responses" | "responses_input_tokens",
  body: unknown,
  apiKey: string,
  requestId: string,
): Reply => {
  const problem = OpenAIResponsesProvider.ValidateModel.check(body) ?? Responses.validate(body, endpoint)
  if (problem !== undefined || !isRecord(body)) {
    return invalidRequest(problem)
  }
  const unstored = endpoint === "responses" ? Responses.unstored(body) : undefined
  if (unstored !== undefined)
    return json(404, apiOf("openai").errorBody(404, unstored, requestId, { type: "invalid_request_error", param: "input", code: null }))
  const marks: Array<number> = []
  const tokens = Responses.promptTokens(body, marks)
  const window = state.settings.contextWindow
  if (tokens.length > window) {
    const message = `Your input exceeds the context window of this model (${tokens.length} tokens > ${window}). Please adjust your input and try again.`
    return json(
      400,
      apiOf("openai").errorBody(400, message, requestId, {
        type: "invalid_request_error",
        param: "input",
        code: "context_length_exceeded",
      }),
    )
  }
  if (endpoint === "responses_input_tokens") return json(200, { object: "response.input_tokens", input_tokens: tokens.length })
  const reply = structured("openai-responses", body, State.takeReply(state, "openai", toolNames(body)))
  if (reply?.error !== undefined) return scriptedError("openai", reply.error, requestId)
  const { cached, written } = openaiCache(state, body, tokens, marks, apiKey)
  const response = Responses.response(body, reply, { input: tokens.length, cached, written }, () => State.nextId(state))
  const diagnostics = Diagnostics.responses(state.caches, body, tokens, String(response["id"]))
  const full = diagnostics === undefined ? response : { ...response, prompt_cache_diagnostics: diagnostics }
  return body["stream"] === true ? { kind: "sse", frames: ResponsesStream.events(full) } : json(200, full)
}

/**
 * `POST /v1beta/models/{model}:generateContent` and `:countTokens`. The
 * implicit prefix cache is keyed by API key and model; it reads the longest
 * common token prefix with a recent prompt from the model's minimum
 * ({@link Gemini.minCachedTokens}) on, for 5 minutes.
 */
export const gemini = (
  state: State.State,
  endpoint: "gemini_generate" | "gemini_count_tokens" | "gemini_stream",
  model: string,
  body: unknown,
  apiKey: string,
  requestId: string,
  sse = false,
): Reply => {
  let prompt: Json
  if (endpoint === "gemini_count_tokens") {
    const counted = Gemini.countBody(body, model)
    if ("problem" in counted)
      return json(
        counted.problem.code,
        apiOf("google").errorBody(counted.problem.code, counted.problem.message, requestId, { type: counted.problem.status }),
      )
    prompt = counted.body
  } else {
    const problem = Gemini.validateGenerate(body, model)
    if (problem !== undefined || !isRecord(body)) {
      const p = problem ?? { code: 400, status: "INVALID_ARGUMENT", message: "Invalid JSON payload received." }
      return json(p.code, apiOf("google").errorBody(p.code, p.message, requestId, { type: p.status }))
    }
    prompt = body
  }
  const tokens = Gemini.promptTokens(prompt)
  const window = state.settings.contextWindow
  if (tokens.length > window) {
    const message = `The input token count (${tokens.length}) exceeds the maximum number of tokens allowed (${window}).`
    return json(400, apiOf("google").errorBody(400, message, requestId, { type: "INVALID_ARGUMENT" }))
  }
  if (endpoint === "gemini_count_tokens") {
    return json(200, { totalTokens: tokens.length, promptTokensDetails: [{ modality: "TEXT", tokenCount: tokens.length }] })
  }
  const reply = structured("google", prompt, State.takeReply(state, "google", toolNames(prompt)))
  if (reply?.error !== undefined) return scriptedError("google", reply.error, requestId)
  const cached = Cache.geminiCached(state.caches, `api:${apiKey}|${model}`, tokens, { min: Gemini.minCachedTokens(model), now: Date.now() })
  const response = Gemini.response(model, reply, { prompt: tokens.length, cached }, () => State.nextId(state))
  if (endpoint === "gemini_generate") return json(200, response)
  return sse ? { kind: "sse", frames: GeminiStream.sseFrames(response) } : json(200, GeminiStream.chunks(response))
}
