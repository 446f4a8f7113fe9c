/**
 * The database's two failures, and the mapping of a driver or server error
 * to them: unreachable (network codes, shutdown and overload SQLSTATEs, the
 * driver's own connection messages) or an error Postgres answered.
 */
import { Data } from "effect"

/** Postgres cannot be reached right now (refused, reset, shut down, timed out); retrying later may work. */
export class DatabaseUnavailable extends Data.TaggedError("DatabaseUnavailable")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** Postgres answered with an error (bad SQL, a constraint, invalid data), or the driver failed. */
export class DatabaseError extends Data.TaggedError("DatabaseError")<{
  readonly message: string
  /** The SQLSTATE, when Postgres sent one (e.g. `23505`, `22P05` for a NUL character in jsonb). */
  readonly code?: string
  readonly cause?: unknown
}> {}

const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
])
// 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now,
// 57P05 idle session timeout, 57014 statement timeout (overload), 53300 too many connections.
const UNAVAILABLE_STATES = new Set(["57P01", "57P02", "57P03", "57P05", "57014", "53300"])
const DRIVER_MESSAGES = new RegExp(
  [
    "Connection terminated",
    "timeout exceeded when trying to connect",
    "timeout expired",
    "Query read timeout",
    "not queryable",
    "Cannot use a pool after calling end",
  ].join("|"),
)

const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined

const isUnavailable = (error: unknown, depth = 0): boolean => {
  if (depth > 3 || typeof error !== "object" || error === null) return false
  const code = codeOf(error)
  if (code !== undefined && (NETWORK_CODES.has(code) || UNAVAILABLE_STATES.has(code) || code.startsWith("08"))) {
    return true
  }
  if (error instanceof Error && DRIVER_MESSAGES.test(error.message)) return true
  if (error instanceof AggregateError && error.errors.some((e) => isUnavailable(e, depth + 1))) return true
  return "cause" in error && isUnavailable(error.cause, depth + 1)
}

/** Maps a driver or server error to {@link DatabaseUnavailable} or {@link DatabaseError}. */
export const classify = (error: unknown): DatabaseUnavailable | DatabaseError => {
  const message = error instanceof Error ? error.message || error.constructor.name : String(error)
  if (isUnavailable(error)) return new DatabaseUnavailable({ message, cause: error })
  const code = codeOf(error)
  return new DatabaseError({ message, cause: error, ...(code === undefined ? {} : { code }) })
}
