/**
 * How the OpenAI API (Chat Completions and Responses alike) words an error:
 * `{error: {message, type, param, code}}` (the error codes guide,
 * https://platform.openai.com/docs/guides/error-codes: 401 invalid
 * authentication, 429 rate limit reached for requests, 500 the server had an
 * error, 503 overloaded), with `type` `invalid_request_error` for a rejected
 * request, `requests` for a rate limit (`code` `rate_limit_exceeded`) and
 * `server_error` for 5xx; and the paths it serves (`/v1/chat/completions`,
 * `/v1/responses`, `/v1/responses/input_tokens`).
 */
import type * as ApiErrors from "../ApiErrors.ts"

const typeOf = (status: number): string => (status === 429 ? "requests" : status >= 500 ? "server_error" : "invalid_request_error")

/** The OpenAI API's errors and paths. */
export const api: ApiErrors.Api = {
  serves: (path) => path.startsWith("/v1/chat") || path.startsWith("/v1/responses"),
  errorBody: (status, message, _requestId, detail) => ({
    error: {
      message,
      type: detail?.type ?? typeOf(status),
      param: detail?.param ?? null,
      code: detail?.code ?? (status === 429 ? "rate_limit_exceeded" : null),
    },
  }),
  requiredHeaders: [],
  messages: {
    rateLimited: "Rate limit reached for requests",
    server: "The server had an error while processing your request. Sorry about that!",
    noKey:
      "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
    noKeyStatus: 401,
    badJson: "We could not parse the JSON body of your request.",
  },
}
