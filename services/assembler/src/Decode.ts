/**
 * Turning request bytes into a typed turn request, or a `BadRequest` that
 * says where the input is wrong. Never throws.
 */
import { Errors, InputLimits, Issues, Turn } from "@ctxd/contracts"
import { Json } from "@ctxd/nats"
import { Effect, Either, type ParseResult, Schema } from "effect"

/** Renders a parse path the way a JSON user reads it: `messages[3].content`. */
export const formatPath = Issues.formatPath

/**
 * Parses UTF-8 JSON; bad UTF-8 or a syntax error becomes `BadRequest`. Then,
 * before anything walks the value recursively, {@link InputLimits.check}
 * (iterative): nesting deeper than {@link InputLimits.MAX_DEPTH} levels, NUL
 * characters (Postgres cannot store them in `jsonb`) and lone UTF-16
 * surrogates are refused with a `BadRequest` naming the path.
 */
export const parseJson = (data: Uint8Array): Effect.Effect<unknown, Errors.BadRequest> => {
  const json = Json.decode(data)
  if (Either.isLeft(json)) {
    return Effect.fail(
      new Errors.BadRequest({ message: Errors.cap(json.left.message, 300), hint: "send one UTF-8 JSON object per request" }),
    )
  }
  const problem = InputLimits.check(json.right, "turn requests")
  if (problem !== undefined) {
    return Effect.fail(new Errors.BadRequest({ message: problem.message, path: problem.path }))
  }
  return Effect.succeed(json.right)
}

/**
 * Validates a parsed value against the turn request schema. The first few
 * issues are listed in the message (echoed values cut to
 * {@link Issues.MAX_ECHO} characters); `path` names the first one.
 */
export const turnRequest = (value: unknown): Effect.Effect<Turn.TurnRequest, Errors.BadRequest> => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return Effect.fail(new Errors.BadRequest({ message: "the request must be a JSON object" }))
  }
  const format = (value as { format?: unknown }).format
  if (format !== "anthropic" && format !== "openai" && format !== "openai-responses" && format !== "gemini") {
    return Effect.fail(
      new Errors.BadRequest({
        message: `unknown format ${Issues.preview(format ?? null)}: expected "anthropic", "openai", "openai-responses" or "gemini"`,
        path: "format",
      }),
    )
  }
  // Decode against the member the format names, so the errors speak of that format only.
  const options = { errors: "all", onExcessProperty: "ignore" } as const
  const result: Either.Either<Turn.TurnRequest, ParseResult.ParseError> =
    format === "anthropic"
      ? Schema.decodeUnknownEither(Turn.AnthropicTurnRequest, options)(value)
      : format === "openai"
        ? Schema.decodeUnknownEither(Turn.OpenAITurnRequest, options)(value)
        : format === "openai-responses"
          ? Schema.decodeUnknownEither(Turn.OpenAIResponsesTurnRequest, options)(value)
          : Schema.decodeUnknownEither(Turn.GeminiTurnRequest, options)(value)
  if (Either.isRight(result)) return Effect.succeed(result.right)
  // echoed values are previews (≤ 200 characters): a 600 KB value must not make a reply over the bus's limit
  const described = Issues.describe(result.left)
  return Effect.fail(
    new Errors.BadRequest({
      message: `invalid turn request: ${described.message}`,
      ...(described.path === undefined ? {} : { path: described.path }),
    }),
  )
}
