/**
 * What may be said about a model provider's API error in a log line, a
 * metric or a reply: its HTTP status, the provider's error type and code,
 * the request id and the size of the error body, never the body's text. A
 * provider may echo the request in its error (the prompt, tool results) or
 * the key it was sent; the SDKs put that body in the error's `message` (and
 * so in its `stack`).
 *
 * Errors are recognized by shape, not by class, so this module needs no SDK:
 * the Stainless-generated SDKs' `APIError` (`@anthropic-ai/sdk`, `openai`:
 * an `Error` with `headers` and a parsed `error` body) and `@google/genai`'s
 * `ApiError` (name `ApiError`, a numeric `status`, the body as JSON in its
 * message).
 */

/** The parts of a provider error that hold no request text. */
export interface Description {
  readonly status?: number | undefined
  /** The provider's error type (`invalid_request_error`, `INVALID_ARGUMENT`). */
  readonly type?: string | undefined
  /** The provider's error code (`invalid_api_key`, `context_length_exceeded`). */
  readonly code?: string | undefined
  readonly requestId?: string | undefined
  /** Characters of the error body as received (0: none). */
  readonly bodyChars: number
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A provider's identifier-like field, or undefined (free text is never kept). */
const token = (value: unknown): string | undefined =>
  typeof value === "string" && /^[A-Za-z0-9_.:-]{1,80}$/.test(value) ? value : typeof value === "number" ? String(value) : undefined

const stainless = (error: Error & Record<string, unknown>): Description | undefined => {
  if (!("headers" in error) || !("error" in error)) return undefined
  const body = error["error"]
  // a connection error or an abort: no status, no body, a message of the SDK's own
  if (typeof error["status"] !== "number" && (body === undefined || body === null)) return undefined
  const inner = isRecord(body) && isRecord(body["error"]) ? body["error"] : body
  const fields = isRecord(inner) ? inner : {}
  return {
    status: typeof error["status"] === "number" ? error["status"] : undefined,
    type: token(error["type"]) ?? token(fields["type"]),
    code: token(error["errorCode"]) ?? token(error["code"]) ?? token(fields["code"]),
    requestId: token(error["requestID"]),
    bodyChars: body === undefined || body === null ? 0 : JSON.stringify(body).length,
  }
}

const google = (error: Error & Record<string, unknown>): Description | undefined => {
  if (error.name !== "ApiError" || typeof error["status"] !== "number") return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(error.message)
  } catch {
    parsed = undefined
  }
  const inner = isRecord(parsed) && isRecord(parsed["error"]) ? parsed["error"] : {}
  return {
    status: error["status"],
    type: token(inner["status"]),
    code: undefined,
    requestId: undefined,
    bodyChars: error.message.length,
  }
}

/** The description of `error` when it is a provider API error (see the module doc), else undefined. */
export const describe = (error: unknown): Description | undefined => {
  if (!(error instanceof Error)) return undefined
  const fields = error as Error & Record<string, unknown>
  return stainless(fields) ?? google(fields)
}

/** True when `error` is a provider API error whose message may hold the provider's body. */
export const isProviderError = (error: unknown): boolean => describe(error) !== undefined

/**
 * One line for `description`, e.g. `400 invalid_request_error (code
 * invalid_value, request req_1, 812-char body withheld)`.
 */
export const format = (description: Description): string => {
  const head = [description.status === undefined ? "no status" : String(description.status), description.type]
    .filter((s) => s !== undefined)
    .join(" ")
  const details = [
    description.code === undefined ? undefined : `code ${description.code}`,
    description.requestId === undefined ? undefined : `request ${description.requestId}`,
    description.bodyChars === 0 ? "no body" : `${description.bodyChars}-char body withheld`,
  ].filter((s) => s !== undefined)
  return `${head} (${details.join(", ")})`
}

/**
 * The message of `error` safe to log: a provider API error's {@link format};
 * any other error's message (its name when it has none), cut to
 * `maxChars` (default 300).
 */
export const safeMessage = (error: unknown, maxChars = 300): string => {
  const description = describe(error)
  if (description !== undefined) return format(description)
  // a parser's message quotes the text it could not read: an answer's body
  if (error instanceof SyntaxError) return "SyntaxError: an answer was not valid JSON"
  const text = error instanceof Error ? error.message || error.name : String(error)
  return text.length > maxChars ? `${text.slice(0, maxChars)}…` : text
}

/**
 * `error` with every provider API error in it (itself, or along its `cause`
 * chain) replaced by a plain `Error` of the same name whose message is its
 * {@link format} and whose stack keeps only the frames; other errors are
 * returned as they are.
 */
export const redact = (error: unknown, depth = 0): unknown => {
  if (!(error instanceof Error) || depth > 8) return error
  const description = describe(error)
  if (description !== undefined) {
    const safe = new Error(format(description))
    safe.name = error.name
    const frames = (error.stack ?? "").split("\n").filter((line) => /^\s+at /.test(line))
    safe.stack = [`${safe.name}: ${safe.message}`, ...frames].join("\n")
    return safe
  }
  if (error.cause === undefined) return error
  const cause = redact(error.cause, depth + 1)
  if (cause === error.cause) return error
  const copy = new Error(error.message, { cause })
  copy.name = error.name
  copy.stack = error.stack ?? `${error.name}: ${error.message}`
  return copy
}
