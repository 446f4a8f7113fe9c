/**
 * How the Gemini API words an error: Google's `{error: {code, message,
 * status}}`, the status name by HTTP code as the troubleshooting page lists
 * it (https://ai.google.dev/gemini-api/docs/troubleshooting: 400
 * `INVALID_ARGUMENT` or `FAILED_PRECONDITION`, 403 `PERMISSION_DENIED`, 404
 * `NOT_FOUND`, 429 `RESOURCE_EXHAUSTED`, 500 `INTERNAL`, 503
 * `UNAVAILABLE`, 504 `DEADLINE_EXCEEDED`; 401 `UNAUTHENTICATED` is Google's
 * API-wide name); and the paths it serves
 * (`/v1beta/models/{model}:generateContent` and `:countTokens`, also under
 * `/v1/` and `/v1alpha/`). A request without a key is refused with 403.
 */
import type * as ApiErrors from "../ApiErrors.ts"

const STATUSES: ReadonlyMap<number, string> = new Map([
  [400, "INVALID_ARGUMENT"],
  [401, "UNAUTHENTICATED"],
  [403, "PERMISSION_DENIED"],
  [404, "NOT_FOUND"],
  [429, "RESOURCE_EXHAUSTED"],
  [503, "UNAVAILABLE"],
  [504, "DEADLINE_EXCEEDED"],
])

/** Google's status name of an HTTP status (`INTERNAL` for other 5xx, `FAILED_PRECONDITION` for other 4xx). */
export const statusOf = (code: number): string => STATUSES.get(code) ?? (code >= 500 ? "INTERNAL" : "FAILED_PRECONDITION")

/** A model method path: `/v1beta/models/{model}:generateContent` or `:countTokens` (also under `/v1/`, `/v1alpha/`). */
export const MODEL_ROUTE = /^\/v1(?:beta|alpha)?\/models\/([^/:]+):(generateContent|countTokens)$/

/** The Gemini API's errors and paths. */
export const api: ApiErrors.Api = {
  serves: (path) => MODEL_ROUTE.test(path) || path.startsWith("/v1beta/"),
  errorBody: (status, message, _requestId, detail) => ({ error: { code: status, message, status: detail?.type ?? statusOf(status) } }),
  requiredHeaders: [],
  messages: {
    rateLimited: "Rate limit reached for requests",
    server: "The server had an error while processing your request. Sorry about that!",
    noKey:
      "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
    noKeyStatus: 403,
    badJson: "Invalid JSON payload received. Unexpected token.",
  },
}
