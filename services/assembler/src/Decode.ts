/**
 * Turning request bytes into a typed turn request, or a `BadRequest` that
 * says where the input is wrong. Never throws.
 */
import { Errors, Turn } from "@ctxd/contracts"
import { Json } from "@ctxd/nats"
import { Effect, Either, ParseResult, Schema } from "effect"

/** Renders a parse path the way a JSON user reads it: `messages[3].content`. */
export const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (acc, key) => (typeof key === "number" ? `${acc}[${key}]` : acc === "" ? String(key) : `${acc}.${String(key)}`),
    "",
  )

/** A JSON `\u0000` escape (an odd number of backslashes before `u0000`). */
const ESCAPED_NUL = /(?:^|[^\\])(?:\\\\)*\\u0000/
const NUL_ESCAPE = Buffer.from("\\u0000")

const hasEscapedNul = (data: Uint8Array): boolean =>
  Buffer.from(data.buffer, data.byteOffset, data.byteLength).includes(NUL_ESCAPE) &&
  ESCAPED_NUL.test(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("utf8"))

/**
 * Parses UTF-8 JSON; bad UTF-8 or a syntax error becomes `BadRequest`. NUL
 * characters (`\u0000`) are refused too: Postgres cannot store them in `jsonb`.
 */
export const parseJson = (data: Uint8Array): Effect.Effect<unknown, Errors.BadRequest> => {
  const json = Json.decode(data)
  if (Either.isLeft(json)) {
    return Effect.fail(new Errors.BadRequest({ message: json.left.message, hint: "send one UTF-8 JSON object per request" }))
  }
  if (hasEscapedNul(data)) {
    return Effect.fail(new Errors.BadRequest({ message: "NUL characters (\\u0000) are not supported in turn requests" }))
  }
  return Effect.succeed(json.right)
}

/**
 * Validates a parsed value against the turn request schema. The first few
 * issues are listed in the message; `path` names the first one.
 */
export const turnRequest = (value: unknown): Effect.Effect<Turn.TurnRequest, Errors.BadRequest> => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return Effect.fail(new Errors.BadRequest({ message: "the request must be a JSON object" }))
  }
  const format = (value as { format?: unknown }).format
  if (format !== "anthropic" && format !== "openai") {
    return Effect.fail(
      new Errors.BadRequest({
        message: `unknown format ${JSON.stringify(format ?? null)}: expected "anthropic" or "openai"`,
        path: "format",
      }),
    )
  }
  // Decode against the member the format names, so the errors speak of that format only.
  const options = { errors: "all", onExcessProperty: "ignore" } as const
  const result: Either.Either<Turn.TurnRequest, ParseResult.ParseError> =
    format === "anthropic"
      ? Schema.decodeUnknownEither(Turn.AnthropicTurnRequest, options)(value)
      : Schema.decodeUnknownEither(Turn.OpenAITurnRequest, options)(value)
  if (Either.isRight(result)) return Effect.succeed(result.right)
  const issues = ParseResult.ArrayFormatter.formatErrorSync(result.left)
  const shown = issues.slice(0, 5).map((issue) => `${formatPath(issue.path) || "(root)"}: ${issue.message}`)
  const more = issues.length > shown.length ? ` (+${issues.length - shown.length} more)` : ""
  return Effect.fail(
    new Errors.BadRequest({
      message: `invalid turn request: ${shown.join("; ")}${more}`,
      ...(issues[0] === undefined ? {} : { path: formatPath(issues[0].path) }),
    }),
  )
}
