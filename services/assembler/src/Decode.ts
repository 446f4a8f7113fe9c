/**
 * Turning request bytes into a typed turn request, or a `BadRequest` that
 * says where the input is wrong. Never throws.
 */
import { Errors, Turn } from "@ctxd/contracts"
import { Effect, Either, ParseResult, Schema } from "effect"

/** Renders a parse path the way a JSON user reads it: `messages[3].content`. */
export const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (acc, key) => (typeof key === "number" ? `${acc}[${key}]` : acc === "" ? String(key) : `${acc}.${String(key)}`),
    "",
  )

const utf8 = new TextDecoder("utf-8", { fatal: true })
/** A JSON `\u0000` escape (an odd number of backslashes before `u0000`). */
const ESCAPED_NUL = /(?:^|[^\\])(?:\\\\)*\\u0000/

/**
 * Parses UTF-8 JSON; a syntax error becomes `BadRequest`. NUL characters
 * (`\u0000`) are refused too: Postgres cannot store them in `jsonb`.
 */
export const parseJson = (data: Uint8Array): Effect.Effect<unknown, Errors.BadRequest> =>
  Effect.try({
    try: () => utf8.decode(data),
    catch: () => new Errors.BadRequest({ message: "the request is not valid UTF-8" }),
  }).pipe(
    Effect.filterOrFail(
      (text) => !ESCAPED_NUL.test(text),
      () => new Errors.BadRequest({ message: "NUL characters (\\u0000) are not supported in turn requests" }),
    ),
    Effect.flatMap((text) =>
      Effect.try({
        try: () => JSON.parse(text) as unknown,
        catch: (error) =>
          new Errors.BadRequest({
            message: `malformed JSON: ${error instanceof Error ? error.message : String(error)}`,
            hint: "send one UTF-8 JSON object per request",
          }),
      }),
    ),
  )

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
