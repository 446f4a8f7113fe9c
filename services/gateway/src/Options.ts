/**
 * What the gateway's HTTP server is given: where to listen, the port to the
 * fleet, the upstream providers, and the per-request policy functions (mode,
 * identity, session). Everything here is a plain value or function: the
 * config file, its hot reload and the gateway keys belong to whoever starts
 * the server (`ctxd gateway`), which passes functions reading its current
 * config.
 */
import type { IncomingHttpHeaders } from "node:http"
import type { Api, SessionKey, TurnPort } from "./Port.ts"

/** The model providers upstream, by their `Turn.Provider` names. */
export type Provider = "anthropic" | "openai" | "google"

/** What the gateway does with a request: ctxd's body goes, the client's goes and ctxd's is recorded, or plain pass-through. */
export type Mode = "active" | "shadow" | "off"

/** When the port fails or times out: forward the client's own request (counted, logged) or answer 503. */
export type Failure = "failOpen" | "failClosed"

/**
 * The upstream base URL of each provider: origin and an optional path
 * prefix, with or without the API version (`https://api.openai.com` and
 * `https://api.openai.com/v1` are the same: a trailing `/v1`, `/v1beta` or
 * `/v1alpha` is dropped, the request path brings its own).
 */
export type Upstreams = Readonly<Record<Provider, string>>

/** The providers' public endpoints (the default {@link Upstreams}). */
export const PUBLIC_UPSTREAMS: Upstreams = {
  anthropic: "https://api.anthropic.com",
  openai: "https://api.openai.com",
  google: "https://generativelanguage.googleapis.com",
}

/** A request as the policy functions see it (the body only on the routes that carry a turn). */
export interface RequestInfo {
  readonly provider: Provider
  /** The turn API of the route, `undefined` on pass-through and count routes. */
  readonly api: Api | undefined
  readonly method: string
  /** The path as the client sent it, without the query string. */
  readonly path: string
  readonly headers: IncomingHttpHeaders
}

/** What {@link ServerOptions.authenticate} decides about a request. */
export type Identity =
  | {
      readonly ok: true
      /** The tenant, when the request names one (a gateway key, `x-ctxd-tenant`); else the session function picks. */
      readonly tenant: string | undefined
      /**
       * Headers to set upstream (a gateway key swapped for the tenant's
       * provider key); `null` removes one. Names lower-case.
       */
      readonly upstreamHeaders?: Readonly<Record<string, string | null>> | undefined
    }
  | { readonly ok: false; readonly status: 401 | 403; readonly message: string }

/** The input of {@link ServerOptions.sessionOf}: a turn request, parsed. */
export interface SessionInput extends RequestInfo {
  readonly api: Api
  readonly body: Readonly<Record<string, unknown>>
  readonly model: string
  readonly tenant: string | undefined
}

/**
 * What {@link ServerOptions.sessionOf} returns: the key, or (the shape of
 * `Session.sessionOf`'s answer) the key or why the request names none — a
 * 400/403 answered in the API's error shape, nothing asked or sent.
 */
export type SessionResult =
  | SessionKey
  | { readonly ok: true; readonly key: SessionKey }
  | { readonly ok: false; readonly error: { readonly status: number; readonly message: string; readonly code?: string | undefined } }

/** A pino-compatible logger (only the methods used). Never given prompts or keys. */
export interface Logger {
  readonly info: (fields: Record<string, unknown>, message: string) => void
  readonly warn: (fields: Record<string, unknown>, message: string) => void
  readonly error: (fields: Record<string, unknown>, message: string) => void
}

/** Options of `startServer` (defaults in {@link defaults}). */
export interface ServerOptions {
  /** The fleet (over NATS) or the engine in this process. */
  readonly turns: TurnPort
  /** Interface to bind. Default `127.0.0.1`. */
  readonly host?: string | undefined
  /** TCP port; `0` (the default) picks a free one. */
  readonly port?: number | undefined
  /** Upstream base URL per provider. Default {@link PUBLIC_UPSTREAMS}. */
  readonly upstreams?: Partial<Upstreams> | undefined
  /** The mode of a request by tenant and agent. Default: `active` for all. */
  readonly mode?: ((tenant: string, agent: string) => Mode) | undefined
  /** Default `failOpen`. A function is asked per request (hot-reloaded config). */
  readonly failure?: Failure | ((tenant: string, agent: string) => Failure) | undefined
  /**
   * How long the port may take to answer a prompt before the failure policy
   * applies. Default 10 000 ms. A function is asked per request (hot-reloaded
   * config); a value it gives that is not a positive number means the default.
   */
  readonly promptTimeoutMs?: number | (() => number) | undefined
  /** Largest request body read on a turn route (413 past it). Default 32 MiB. */
  readonly maxBodyBytes?: number | undefined
  /** Largest decoded response copy kept to read a non-streamed usage (past it the usage is not read). Default 16 MiB. */
  readonly maxUsageBytes?: number | undefined
  /** Who is calling. Default: tenant from `x-ctxd-tenant`, headers unchanged. */
  readonly authenticate?: ((request: RequestInfo) => Identity) | undefined
  /** The session of a turn request. Default `DefaultSession.sessionOf` (`x-ctxd-session`, else derived). */
  readonly sessionOf?: ((input: SessionInput) => SessionResult) | undefined
  /** The agent of a request (the mode resolver's second key). Default: `x-ctxd-agent`, else `default`. */
  readonly agentOf?: ((headers: IncomingHttpHeaders) => string) | undefined
  /** Default: silent. */
  readonly logger?: Logger | undefined
  /** The `/metrics` body (Prometheus text). Default: this package's own exposition of Effect's metric registry. */
  readonly scrape?: (() => Promise<string>) | undefined
}

/** The defaults of {@link ServerOptions}. */
export const defaults = {
  host: "127.0.0.1",
  port: 0,
  failure: "failOpen" as Failure,
  promptTimeoutMs: 10_000,
  maxBodyBytes: 32 * 1024 * 1024,
  maxUsageBytes: 16 * 1024 * 1024,
} as const

/** The options with every default filled in. */
export interface Resolved {
  readonly turns: TurnPort
  readonly host: string
  readonly port: number
  readonly upstreams: Upstreams
  readonly mode: (tenant: string, agent: string) => Mode
  readonly failure: (tenant: string, agent: string) => Failure
  readonly promptTimeoutMs: () => number
  readonly maxBodyBytes: number
  readonly maxUsageBytes: number
  readonly authenticate: (request: RequestInfo) => Identity
  readonly sessionOf: ((input: SessionInput) => SessionResult) | undefined
  readonly agentOf: (headers: IncomingHttpHeaders) => string
  readonly logger: Logger
  readonly scrape: (() => Promise<string>) | undefined
}

const timeoutOf = (
  value: number | (() => number) | undefined,
  positive: (name: string, value: number | undefined, fallback: number) => number,
): (() => number) => {
  if (typeof value !== "function") {
    const fixed = positive("promptTimeoutMs", value, defaults.promptTimeoutMs)
    return () => fixed
  }
  return () => {
    const n = value()
    return Number.isFinite(n) && n > 0 ? n : defaults.promptTimeoutMs
  }
}

const silent: Logger = { info: () => {}, warn: () => {}, error: () => {} }

const headerValue = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name]
  const first = Array.isArray(value) ? value[0] : value
  return first === undefined || first.trim() === "" ? undefined : first.trim()
}

/** Fills the defaults in; throws on a value that cannot work (a negative timeout, a base URL that is not http(s)). */
export const resolve = (options: ServerOptions): Resolved => {
  const upstreams = { ...PUBLIC_UPSTREAMS, ...options.upstreams }
  for (const [provider, base] of Object.entries(upstreams)) {
    const url = URL.canParse(base) ? new URL(base) : undefined
    if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
      throw new Error(`gateway: upstream base URL of ${provider} is not an http(s) URL`)
    }
  }
  const positive = (name: string, value: number | undefined, fallback: number): number => {
    const n = value ?? fallback
    if (!Number.isFinite(n) || n <= 0) throw new Error(`gateway: ${name} must be a positive number`)
    return n
  }
  const failure = options.failure ?? defaults.failure
  return {
    turns: options.turns,
    host: options.host ?? defaults.host,
    port: options.port ?? defaults.port,
    upstreams,
    mode: options.mode ?? (() => "active"),
    failure: typeof failure === "function" ? failure : () => failure,
    promptTimeoutMs: timeoutOf(options.promptTimeoutMs, positive),
    maxBodyBytes: positive("maxBodyBytes", options.maxBodyBytes, defaults.maxBodyBytes),
    maxUsageBytes: positive("maxUsageBytes", options.maxUsageBytes, defaults.maxUsageBytes),
    authenticate: options.authenticate ?? ((request) => ({ ok: true, tenant: headerValue(request.headers, "x-ctxd-tenant") })),
    sessionOf: options.sessionOf,
    agentOf: options.agentOf ?? ((headers) => headerValue(headers, "x-ctxd-agent") ?? "default"),
    logger: options.logger ?? silent,
    scrape: options.scrape,
  }
}
