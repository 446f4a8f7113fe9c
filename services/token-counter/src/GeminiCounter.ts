/**
 * The exact backend for Gemini: `models/{model}:countTokens` of the Gemini
 * Developer API, behind its own breaker, bulkhead, timeout, single flight and
 * cache ({@link ExactCounter.makeCalls}).
 *
 * Segment-wise, like {@link AnthropicCounter}: a turn counts only its new
 * messages (older ones carry stored counts); see `GeminiProvider.CountBody`.
 *
 * - Contents (the envelopes, the batch of new messages, texts) go through
 *   `@google/genai`: `ai.models.countTokens({model, contents})`, with
 *   `new GoogleGenAI({ apiKey, httpOptions: { baseUrl, timeout, retryOptions: { attempts: 1 } } })`.
 * - The prefix (system instruction and tools) cannot: in Gemini Developer API
 *   mode the SDK refuses `config.systemInstruction` and `config.tools` for
 *   `countTokens` ("only supported in Gemini Enterprise Agent Platform mode")
 *   and sends contents alone. The REST endpoint takes a whole
 *   `generateContentRequest`, so the prefix is counted with one `POST
 *   {baseUrl}/v1beta/models/{model}:countTokens` of
 *   `{generateContentRequest: {model, contents, systemInstruction, tools}}`
 *   (header `x-goog-api-key`), against a baseline of the same kind. It is
 *   stable, so it is counted once per session (cached) like Anthropic's.
 *
 * A whole body (`countBody`, SDK or REST shape) goes the same way: contents
 * alone through the SDK, with a system instruction or tools through REST.
 */
import { ApiError, GoogleGenAI } from "@google/genai"
import { Effect, type Scope } from "effect"
import * as ExactCounter from "./ExactCounter.ts"
import { GeminiProvider } from "@ctxd/context"
import { ProviderErrors } from "@ctxd/observe"

/** The exact backend for Gemini (the common port). */
export type GeminiCounter = ExactCounter.ExactCounter

/** The public Gemini API, when no base URL is given. */
export const DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"

type Json = Readonly<Record<string, unknown>>

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** An SDK or REST failure as a `CountFailed` whose message never holds the error body (a provider may echo the counted request). */
const classify = (error: unknown): ExactCounter.CountFailed => {
  const message = ProviderErrors.safeMessage(error)
  if (error instanceof RestFailed || (error instanceof ApiError && typeof error.status === "number")) {
    const status = (error as { readonly status: number }).status
    return new ExactCounter.CountFailed({ reason: ExactCounter.reasonOfStatus(status), message, status })
  }
  if (error instanceof Error && (error.name === "AbortError" || error.name === "TimeoutError"))
    return new ExactCounter.CountFailed({ reason: "timeout", message })
  // fetch's network failures (`TypeError: fetch failed`), in the SDK or ours
  if (error instanceof TypeError) return new ExactCounter.CountFailed({ reason: "connection", message })
  return new ExactCounter.CountFailed({ reason: "unknown", message })
}

/** A REST count call answered with an error status. */
class RestFailed extends Error {
  readonly status: number
  constructor(status: number, message: string) {
    super(message)
    this.status = status
  }
}

/** A REST error answer as `countTokens <status> <error.status> (<n>-char body withheld)`: the body may echo the request. */
const restError = (status: number, text: string): string => {
  let type: unknown
  try {
    const parsed = JSON.parse(text) as { readonly error?: { readonly status?: unknown } }
    type = parsed.error?.status
  } catch {
    type = undefined
  }
  const named = typeof type === "string" && /^[A-Z_]{1,64}$/.test(type) ? ` ${type}` : ""
  return `countTokens ${status}${named} (${text.length}-char body withheld)`
}

/**
 * A whole Gemini body (`@google/genai` parameters `{model, contents, config}`
 * or the REST `{contents, systemInstruction, tools}`) as a count request:
 * contents alone, or a `generateContentRequest` when it has a system
 * instruction or tools.
 */
export const countBodyOf = (body: Json): GeminiProvider.CountBody.CountBody => {
  const config = isRecord(body["config"]) ? body["config"] : body
  const contents = Array.isArray(body["contents"]) ? body["contents"] : []
  const system = config["systemInstruction"]
  const tools = config["tools"]
  const toolConfig = config["toolConfig"]
  if (system === undefined && tools === undefined) return { contents }
  return {
    generateContentRequest: {
      contents,
      ...(system === undefined ? {} : { systemInstruction: typeof system === "string" ? { parts: [{ text: system }] } : system }),
      ...(tools === undefined ? {} : { tools }),
      ...(toolConfig === undefined ? {} : { toolConfig }),
    },
  }
}

/** Builds the exact backend; its calls run in the current scope. */
export const make = (options: ExactCounter.Options = {}): Effect.Effect<GeminiCounter, never, Scope.Scope> =>
  Effect.gen(function* () {
    const timeoutMs = options.timeoutMs ?? 2_000
    const apiKey = ExactCounter.keyOf(options.apiKey, "GEMINI_API_KEY", "GOOGLE_API_KEY")
    const baseUrl = (options.baseURL ?? process.env["GOOGLE_GEMINI_BASE_URL"] ?? DEFAULT_BASE_URL).replace(/\/+$/, "")
    const ai = new GoogleGenAI({
      // the SDK throws at construction without a key; a base URL alone (a gateway, the fake provider) needs none
      apiKey: apiKey ?? "unset",
      httpOptions: { baseUrl, timeout: timeoutMs, retryOptions: { attempts: 1 } },
    })

    const rest = async (model: string, request: Json, signal: AbortSignal): Promise<number> => {
      const url = `${baseUrl}/v1beta/models/${encodeURIComponent(model)}:countTokens`
      const response = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", ...(apiKey === undefined ? {} : { "x-goog-api-key": apiKey }) },
        body: JSON.stringify({ generateContentRequest: { model: `models/${model}`, ...request } }),
        signal,
      })
      const text = await response.text()
      if (!response.ok) throw new RestFailed(response.status, restError(response.status, text))
      let parsed: { readonly totalTokens?: unknown }
      try {
        parsed = JSON.parse(text) as { readonly totalTokens?: unknown }
      } catch {
        // the parser's message quotes the text
        throw new Error(`countTokens answered with a body that is not JSON (${text.length} chars)`)
      }
      if (typeof parsed.totalTokens !== "number") throw new Error(`countTokens answered without totalTokens (${text.length}-char body)`)
      return parsed.totalTokens
    }

    const calls = yield* ExactCounter.makeCalls(
      {
        name: "gemini countTokens",
        span: "gemini.count_tokens",
        system: "gemini",
        request: (model, body, signal) =>
          isRecord(body["generateContentRequest"])
            ? rest(model, body["generateContentRequest"], signal)
            : ai.models
                .countTokens({
                  model,
                  contents: body["contents"] as Parameters<typeof ai.models.countTokens>[0]["contents"],
                  config: { abortSignal: signal },
                })
                .then((r) => {
                  if (typeof r.totalTokens !== "number") throw new Error("countTokens answered without totalTokens")
                  return r.totalTokens
                }),
        classify,
        secret: apiKey,
      },
      options,
    )
    const json = (body: GeminiProvider.CountBody.CountBody): Json => body as unknown as Json
    const envelope = (e: GeminiProvider.CountBody.Envelope) => json(GeminiProvider.CountBody.envelopeBody(e))

    /** `count(body) − baseline(envelope)`. */
    const segment = (model: string, e: GeminiProvider.CountBody.Envelope, body: GeminiProvider.CountBody.CountBody) =>
      calls.segment(model, e, envelope(e), json(body))

    const countTurn = (input: ExactCounter.TurnInput) => {
      const prefix = GeminiProvider.CountBody.prefixBody(input.model, input.system, input.tools)
      const tools = input.tools.length > 0 ? GeminiProvider.CountBody.toolsBody(input.model, input.tools) : undefined
      const batch = input.messages.length === 0 ? undefined : GeminiProvider.CountBody.batch(input.model, input.messages)
      return ExactCounter.prefixedTurn({
        framing: ExactCounter.framing(calls, input.model, envelope("plain"), envelope("twoDots")),
        prefix: prefix === undefined ? undefined : segment(input.model, "plainRequest", prefix),
        tools: tools === undefined ? undefined : segment(input.model, "plainRequest", tools),
        batch: batch === undefined ? undefined : { tokens: segment(input.model, "plain", batch.body), approximate: batch.approximate },
        weights: input.weights,
      })
    }

    const countBody = (model: string, body: Json) => calls.cached(model, json(countBodyOf(body)))

    const countText = (model: string, text: string) =>
      text.trim() === "" ? Effect.succeed(0) : segment(model, "plain", GeminiProvider.CountBody.textBody(text))

    return { provider: "google", backend: "google_api", countTurn, countBody, countText, breaker: calls.breaker, stats: calls.stats }
  })
