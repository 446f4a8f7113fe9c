/**
 * The HTTP side of the fake provider (plain `node:http`): routing, the
 * request log, fault injection and the `/_control` and `/_requests` endpoints.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { GeminiProvider, Providers } from "@ctxd/context"
import { Either } from "effect"
import * as Handlers from "./handlers.ts"
import * as Models from "./models.ts"
import { type Endpoint, parsePatch } from "./settings.ts"
import * as State from "./state.ts"

const MAX_BODY_BYTES = 32 * 1024 * 1024

const ROUTES: Record<string, Endpoint> = {
  "/v1/messages": "messages",
  "/v1/messages/count_tokens": "count_tokens",
  "/v1/chat/completions": "chat_completions",
  "/v1/responses": "responses",
  "/v1/responses/input_tokens": "responses_input_tokens",
}

/** Gemini's streamed call (`GeminiProvider.Api.MODEL_ROUTE` knows only the unary ones ctxd makes). */
const GEMINI_STREAM = /^\/v1(?:beta|alpha)?\/models\/([^/:]+):streamGenerateContent$/

const route = (path: string): { readonly endpoint: Endpoint | undefined; readonly model?: string } => {
  const streamed = GEMINI_STREAM.exec(path)
  if (streamed !== null) return { endpoint: "gemini_stream", model: decodeURIComponent(streamed[1]!) }
  const gemini = GeminiProvider.Api.MODEL_ROUTE.exec(path)
  if (gemini === null) return { endpoint: ROUTES[path] }
  return { endpoint: gemini[2] === "generateContent" ? "gemini_generate" : "gemini_count_tokens", model: decodeURIComponent(gemini[1]!) }
}

class TooLarge extends Error {}

const readBody = (req: Http.IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const parts: Array<Buffer> = []
    let size = 0
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_BODY_BYTES) {
        reject(new TooLarge())
        req.resume()
        return
      }
      parts.push(chunk)
    })
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")))
    req.on("error", reject)
  })

const parseJson = (text: string): { readonly ok: boolean; readonly value: unknown } => {
  try {
    return { ok: true, value: JSON.parse(text) as unknown }
  } catch {
    return { ok: false, value: text }
  }
}

const headerRecord = (req: Http.IncomingMessage): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue
    out[name] =
      name === "x-api-key" || name === "x-goog-api-key" || name === "authorization"
        ? "[redacted]"
        : Array.isArray(value)
          ? value.join(", ")
          : value
  }
  return out
}

/** The last 4 characters of a key, as provider dashboards show it (whose key paid for a call; never the key). */
const keyHintOf = (key: string | undefined): string | undefined => (key === undefined || key.length < 8 ? undefined : key.slice(-4))

const apiKeyOf = (req: Http.IncomingMessage): string | undefined => {
  const key = req.headers["x-api-key"] ?? req.headers["x-goog-api-key"]
  if (typeof key === "string" && key.length > 0) return key
  const query = new URL(req.url ?? "/", "http://fake").searchParams.get("key")
  if (query !== null && query.length > 0) return query
  const auth = req.headers["authorization"]
  const match = typeof auth === "string" ? /^Bearer\s+(.+)$/i.exec(auth) : null
  return match?.[1]
}

const write = (res: Http.ServerResponse, reply: Handlers.Reply, requestId: string, entry?: State.LogEntry): void => {
  if (res.destroyed || res.writableEnded) return
  if (entry !== undefined) entry.status = reply.kind === "json" ? reply.status : 200
  if (reply.kind === "json") {
    const text = JSON.stringify(reply.body)
    res.writeHead(reply.status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(text),
      "request-id": requestId,
      "x-request-id": requestId,
      ...reply.headers,
    })
    res.end(text)
    return
  }
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "request-id": requestId,
    "x-request-id": requestId,
  })
  for (const frame of reply.frames) res.write(frame)
  res.end()
}

/** Waits `ms`, or less if the client goes away; resolves whether the client is still there. */
const pause = (res: Http.ServerResponse, ms: number): Promise<boolean> =>
  new Promise((resolve) => {
    const onClose = () => {
      clearTimeout(timer)
      resolve(false)
    }
    const timer = setTimeout(() => {
      res.off("close", onClose)
      resolve(!res.destroyed)
    }, ms)
    res.once("close", onClose)
  })

const control = async (state: State.State, req: Http.IncomingMessage, res: Http.ServerResponse, path: string): Promise<void> => {
  const send = (status: number, body: unknown) => write(res, { kind: "json", status, body }, "control")
  if (path === "/_control" && req.method === "GET") return send(200, State.snapshot(state))
  if (path === "/_control" && req.method === "POST") {
    const parsed = parseJson(await readBody(req))
    const patch = parsed.ok ? parsePatch(parsed.value) : Either.left("body is not JSON")
    if (Either.isLeft(patch)) return send(400, { error: patch.left })
    State.apply(state, patch.right)
    return send(200, State.snapshot(state))
  }
  if (path === "/_requests" && req.method === "GET") return send(200, state.log)
  if (path === "/_requests" && req.method === "DELETE") {
    state.log = []
    return send(200, { ok: true })
  }
  return send(404, { error: `no control route ${req.method ?? ""} ${path}` })
}

/** Takes one unit of a counting fault (`failNext`, `hangNext`, ...) if any is left. */
const consume = (state: State.State, key: "failNext" | "rateLimitNext" | "hangNext"): boolean => {
  if (state.settings[key] <= 0) return false
  state.settings = { ...state.settings, [key]: state.settings[key] - 1 }
  return true
}

const provider = async (state: State.State, req: Http.IncomingMessage, res: Http.ServerResponse, path: string): Promise<void> => {
  const routed = route(path)
  const listing = req.method === "GET" ? Models.route(path, req.headers) : undefined
  const endpoint = listing !== undefined ? "models" : req.method === "POST" ? routed.endpoint : undefined
  // the API whose paths these are (each adapter's `Api` names its own); a path of none answers in Anthropic's words
  const which: Handlers.Provider =
    listing?.provider ?? (endpoint === "gemini_stream" ? "google" : undefined) ?? Providers.byApiPath(path) ?? "anthropic"
  const api = Handlers.apiOf(which)
  const requestId = State.nextRequestId(state)
  let raw: string
  try {
    raw = await readBody(req)
  } catch (e) {
    if (!(e instanceof TooLarge)) throw e
    return write(res, Handlers.error(which, 413, "Request exceeds the maximum allowed number of bytes.", requestId), requestId)
  }
  const parsed = raw.length === 0 ? { ok: true, value: undefined } : parseJson(raw)
  const entry: State.LogEntry = {
    seq: state.log.length + 1,
    method: req.method ?? "GET",
    path,
    search: new URL(req.url ?? "/", "http://fake").search,
    endpoint,
    headers: headerRecord(req),
    keyHint: keyHintOf(apiKeyOf(req)),
    body: parsed.value,
    timestamp: Date.now(),
    status: null,
  }
  state.log.push(entry)
  const answer = (reply: Handlers.Reply) => write(res, reply, requestId, entry)
  if (endpoint === undefined) return answer(Handlers.error(which, 404, `Not found: ${req.method ?? ""} ${path}`, requestId))

  if (state.settings.faultEndpoints.includes(endpoint)) {
    const s = state.settings
    if (s.hang || consume(state, "hangNext")) return // never answered: the client gives up
    if (s.latencyMs > 0 && !(await pause(res, s.latencyMs))) return
    if (consume(state, "rateLimitNext")) return answer(Handlers.faultError(which, 429, requestId, state.settings.retryAfterMs))
    if (consume(state, "failNext")) return answer(Handlers.faultError(which, s.errorStatus, requestId))
    if (s.errorRate > 0 && state.random() < s.errorRate) return answer(Handlers.faultError(which, s.errorStatus, requestId))
  }

  const apiKey = apiKeyOf(req)
  if (apiKey === undefined) return answer(Handlers.error(which, api.messages.noKeyStatus, api.messages.noKey, requestId))
  const missing = api.requiredHeaders.find((h) => req.headers[h.name] === undefined)
  if (missing !== undefined) return answer(Handlers.error(which, 400, missing.message, requestId))
  if (endpoint === "models") {
    const found = listing === undefined ? undefined : Models.answer(listing.provider, listing.id)
    if (found !== undefined) return answer({ kind: "json", status: 200, body: found })
    return answer(Handlers.error(which, 404, `model: ${listing?.id ?? ""} not found`, requestId))
  }
  if (!parsed.ok) return answer(Handlers.error(which, 400, api.messages.badJson, requestId))
  if (endpoint === "gemini_generate" || endpoint === "gemini_count_tokens" || endpoint === "gemini_stream") {
    const sse = new URL(req.url ?? "/", "http://fake").searchParams.get("alt") === "sse"
    return answer(Handlers.gemini(state, endpoint, routed.model ?? "", parsed.value, apiKey, requestId, sse))
  }
  if (endpoint === "chat_completions") return answer(Handlers.openai(state, parsed.value, apiKey, requestId))
  if (endpoint === "responses" || endpoint === "responses_input_tokens") {
    return answer(Handlers.responses(state, endpoint, parsed.value, apiKey, requestId))
  }
  const beta = req.headers["anthropic-beta"]
  const betas = (Array.isArray(beta) ? beta.join(",") : (beta ?? ""))
    .split(",")
    .map((b) => b.trim())
    .filter((b) => b !== "")
  return answer(Handlers.anthropic(state, endpoint, parsed.value, apiKey, requestId, betas))
}

/** A listening server over `state`. */
export interface Listening {
  readonly port: number
  readonly host: string
  readonly close: () => Promise<void>
}

export const listen = (state: State.State, port: number, host: string): Promise<Listening> =>
  new Promise((resolve, reject) => {
    const server = Http.createServer((req, res) => {
      const path = new URL(req.url ?? "/", "http://fake").pathname
      const handled = path.startsWith("/_") ? control(state, req, res, path) : provider(state, req, res, path)
      handled.catch((e: unknown) => {
        if (!res.headersSent && !res.destroyed) write(res, { kind: "json", status: 500, body: { error: String(e) } }, "internal")
        else res.destroy()
      })
    })
    server.keepAliveTimeout = 5_000
    server.once("error", reject)
    server.listen(port, host, () => {
      server.off("error", reject)
      const address = server.address() as AddressInfo
      let closing: Promise<void> | undefined
      const close = () => {
        closing ??= new Promise<void>((done) => {
          server.close(() => done())
          server.closeAllConnections()
        })
        return closing
      }
      resolve({ port: address.port, host, close })
    })
  })
