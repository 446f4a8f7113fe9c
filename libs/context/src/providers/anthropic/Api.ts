/**
 * How the Anthropic API words an error: `{type: "error", error: {type,
 * message}, request_id}`, the error type by HTTP status as the errors page
 * lists it (https://docs.claude.com/en/api/errors: 400
 * `invalid_request_error`, 401 `authentication_error`, 403
 * `permission_error`, 404 `not_found_error`, 413 `request_too_large`, 429
 * `rate_limit_error`, 500 `api_error`, 529 `overloaded_error`), and the
 * paths it serves (`/v1/messages`, `/v1/messages/count_tokens`). Every
 * request needs an `anthropic-version` header.
 */
import type * as ApiErrors from "../ApiErrors.ts"

const TYPES: ReadonlyMap<number, string> = new Map([
  [400, "invalid_request_error"],
  [401, "authentication_error"],
  [403, "permission_error"],
  [404, "not_found_error"],
  [413, "request_too_large"],
  [429, "rate_limit_error"],
  [529, "overloaded_error"],
])

/** The error type Anthropic uses for an HTTP status (`api_error` for any other). */
export const errorType = (status: number): string => TYPES.get(status) ?? "api_error"

/** The Anthropic API's errors and paths. */
export const api: ApiErrors.Api = {
  serves: (path) => path === "/v1/messages" || path.startsWith("/v1/messages/"),
  errorBody: (status, message, requestId, detail) => ({
    type: "error",
    error: { type: detail?.type ?? errorType(status), message },
    request_id: requestId,
  }),
  requiredHeaders: [{ name: "anthropic-version", message: "anthropic-version: header is required" }],
  messages: {
    rateLimited: "Number of requests has exceeded your rate limit",
    server: "Internal server error",
    noKey: "x-api-key header is required",
    noKeyStatus: 401,
    badJson: "There was an issue with your request body: invalid JSON",
  },
}
