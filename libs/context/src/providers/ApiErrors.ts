/**
 * A provider API's error envelope and paths: how the API words an error
 * response (its JSON shape, its type or status name per HTTP status) and
 * which request paths are its own. The fake provider answers in these words,
 * and a gateway that speaks the provider's API must answer in them too, so
 * they live in the provider's adapter folder (`<folder>/Api.ts`, reached through `ModelProvider.api`).
 */

/** Extra fields of an error a caller may pin (a scripted error's own type or code). */
export interface ErrorDetail {
  /** The API's error type or status name (default: the one the API uses for the HTTP status). */
  readonly type?: string | undefined
  /** OpenAI's `code` field (default: the one it uses for the HTTP status). */
  readonly code?: string | null | undefined
  /** OpenAI's `param` field: the request field at fault (default `null`). */
  readonly param?: string | null | undefined
}

/** A header every request must carry, and the error message of a request without it (a 400). */
export interface RequiredHeader {
  readonly name: string
  readonly message: string
}

/** The messages an API uses for the generic failures the fake provider injects. */
export interface Messages {
  /** 429: too many requests. */
  readonly rateLimited: string
  /** 5xx (but 529): an internal error. */
  readonly server: string
  /** 401/403: the request carries no API key. */
  readonly noKey: string
  /** The HTTP status of a request without an API key. */
  readonly noKeyStatus: number
  /** 400: the body is not JSON. */
  readonly badJson: string
}

/** One provider API's errors and paths. */
export interface Api {
  /** True when `path` is a request path of this API. */
  readonly serves: (path: string) => boolean
  /** The JSON body of an error response with `status` and `message`. */
  readonly errorBody: (status: number, message: string, requestId: string, detail?: ErrorDetail) => unknown
  readonly requiredHeaders: ReadonlyArray<RequiredHeader>
  readonly messages: Messages
}
