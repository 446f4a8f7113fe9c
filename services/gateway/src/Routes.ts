/**
 * Which provider and which route a client request is, and the path it goes
 * to upstream. Clients call with and without the version prefix (an OpenAI
 * SDK whose base URL is the gateway's root sends `/chat/completions`), so
 * each turn route is matched both ways and always sent upstream with it.
 *
 * Paths (https://docs.claude.com/en/api/messages,
 * https://platform.openai.com/docs/api-reference/chat/create,
 * https://platform.openai.com/docs/api-reference/responses/create,
 * https://ai.google.dev/api/generate-content): Anthropic `POST
 * /v1/messages`, `/v1/messages/count_tokens`; OpenAI `POST
 * /v1/chat/completions`, `/v1/responses`, `/v1/responses/input_tokens`;
 * Gemini `POST /v1beta/models/{model}:generateContent`,
 * `:streamGenerateContent` (`?alt=sse` for server-sent events) and
 * `:countTokens`, also under `/v1/` and `/v1alpha/`.
 *
 * Any other path is passed through to the provider it belongs to. `/v1/models`
 * is both Anthropic's and OpenAI's, so the provider of a path that does not
 * name one is read from the headers each SDK sends: `x-goog-api-key` or
 * `?key=` (Google), `anthropic-version` or `x-api-key` (Anthropic), else
 * OpenAI's `authorization: Bearer`.
 */
import type { IncomingHttpHeaders } from "node:http"
import type { Provider } from "./Options.ts"
import type { Api } from "./Port.ts"

/** The label a route has in metrics and logs. */
export type Label =
  Api | "anthropic-count-tokens" | "openai-input-tokens" | "gemini-count-tokens" | "anthropic-other" | "openai-other" | "google-other"

export type Route =
  /** A model call ctxd builds the prompt of. */
  | {
      readonly kind: "turn"
      readonly api: Api
      readonly provider: Provider
      readonly label: Label
      readonly upstreamPath: string
      /** The model named by the path (Gemini); the body names it otherwise. */
      readonly pathModel: string | undefined
      /** Streamed by the path (Gemini `streamGenerateContent`); the body's `stream` says otherwise. */
      readonly pathStream: boolean
    }
  /** Anything else of a provider's API: passed through untouched. */
  | { readonly kind: "pass"; readonly provider: Provider; readonly label: Label; readonly upstreamPath: string }

const GEMINI = /^(?:\/(v1|v1beta|v1alpha))?\/models\/([^/:]+):(generateContent|streamGenerateContent|countTokens)$/

const TURNS: ReadonlyArray<{ readonly path: string; readonly api: Api; readonly provider: Provider }> = [
  { path: "/messages", api: "anthropic-messages", provider: "anthropic" },
  { path: "/chat/completions", api: "openai-chat", provider: "openai" },
  { path: "/responses", api: "openai-responses", provider: "openai" },
]

const COUNTS: ReadonlyArray<{ readonly path: string; readonly provider: Provider; readonly label: Label }> = [
  { path: "/messages/count_tokens", provider: "anthropic", label: "anthropic-count-tokens" },
  { path: "/responses/input_tokens", provider: "openai", label: "openai-input-tokens" },
]

const first = (value: string | ReadonlyArray<string> | undefined): string | undefined => (typeof value === "string" ? value : value?.[0])

/** The provider of a path that does not name one, from the headers its SDK sends (see the module). */
export const providerOfHeaders = (headers: IncomingHttpHeaders, query: URLSearchParams): Provider => {
  if (first(headers["x-goog-api-key"]) !== undefined || query.has("key")) return "google"
  if (first(headers["anthropic-version"]) !== undefined || first(headers["x-api-key"]) !== undefined) return "anthropic"
  return "openai"
}

/** A path segment decoded; as it is when its escapes are malformed (the provider will say what it thinks of it). */
const decoded = (segment: string): string => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}

const versionOf = (path: string): { readonly version: string | undefined; readonly rest: string } => {
  const match = /^\/(v1|v1beta|v1alpha)(\/.*)?$/.exec(path)
  return match === null ? { version: undefined, rest: path } : { version: match[1], rest: match[2] ?? "/" }
}

/**
 * The route of `method` `path` (no query string). Turn routes need `POST`;
 * the same path with another method passes through (the provider answers it).
 */
export const route = (method: string, path: string, headers: IncomingHttpHeaders, query: URLSearchParams): Route => {
  const gemini = GEMINI.exec(path)
  if (gemini !== null) {
    const version = gemini[1] ?? "v1beta"
    const model = decoded(gemini[2]!)
    const verb = gemini[3]!
    const upstreamPath = `/${version}/models/${gemini[2]!}:${verb}`
    if (verb === "countTokens" || method !== "POST") {
      return { kind: "pass", provider: "google", label: verb === "countTokens" ? "gemini-count-tokens" : "google-other", upstreamPath }
    }
    return {
      kind: "turn",
      api: "gemini",
      provider: "google",
      label: "gemini",
      upstreamPath,
      pathModel: model,
      pathStream: verb === "streamGenerateContent",
    }
  }
  const { version, rest } = versionOf(path)
  if (version === "v1beta" || version === "v1alpha") return { kind: "pass", provider: "google", label: "google-other", upstreamPath: path }
  if (version === undefined || version === "v1") {
    const turn = TURNS.find((t) => t.path === rest)
    if (turn !== undefined && method === "POST") {
      return {
        kind: "turn",
        api: turn.api,
        provider: turn.provider,
        label: turn.api,
        upstreamPath: `/v1${rest}`,
        pathModel: undefined,
        pathStream: false,
      }
    }
    const count = COUNTS.find((c) => c.path === rest)
    if (count !== undefined) return { kind: "pass", provider: count.provider, label: count.label, upstreamPath: `/v1${rest}` }
    if (turn !== undefined)
      return { kind: "pass", provider: turn.provider, label: `${turn.provider}-other` as Label, upstreamPath: `/v1${rest}` }
  }
  const provider = providerOfHeaders(headers, query)
  const prefix = provider === "google" ? "/v1beta" : "/v1"
  // the root (Claude Code's `HEAD /` probe) is the provider's root, not its version's
  const upstreamPath = version !== undefined || path === "/" ? path : `${prefix}${path}`
  return { kind: "pass", provider, label: `${provider}-other` as Label, upstreamPath }
}

/** The upstream URL of `upstreamPath` (+ the client's query string) under a configured base URL. */
export const upstreamUrl = (base: string, upstreamPath: string, search: string): URL => {
  const url = new URL(base)
  const prefix = url.pathname.replace(/\/+$/, "").replace(/\/(v1|v1beta|v1alpha)$/, "")
  url.pathname = `${prefix}${upstreamPath}`
  url.search = search
  return url
}
