/**
 * Errors the gateway itself answers (a body too large, not JSON, ctxd
 * unavailable under `failClosed`, the upstream unreachable) in the words of
 * the API the client called, so its SDK raises its usual error class: the
 * provider adapters' own envelopes (`ProviderApi.Api.errorBody`: Anthropic
 * `{type: "error", error: {type, message}}`, OpenAI `{error: {message,
 * type, param, code}}`, Google `{error: {code, message, status}}`).
 */
import type { ServerResponse } from "node:http"
import { randomUUID } from "node:crypto"
import { Providers } from "@ctxd/context"
import type { Provider } from "./Options.ts"

/** Writes a provider-shaped JSON error (nothing when the response has begun or the client left). */
export const send = (
  res: ServerResponse,
  provider: Provider,
  status: number,
  message: string,
  headers: Readonly<Record<string, string>> = {},
): void => {
  if (res.headersSent || res.destroyed) return
  const requestId = `req_gw_${randomUUID().replace(/-/g, "")}`
  const text = JSON.stringify(Providers.ofProvider(provider).api.errorBody(status, message, requestId))
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    "request-id": requestId,
    "x-request-id": requestId,
    ...headers,
  })
  res.end(text)
}
