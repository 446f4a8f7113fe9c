/**
 * Request bytes → a typed request, or a bounded `BadRequest` envelope, for
 * every endpoint: UTF-8 JSON, then {@link InputLimits.check} (depth, NUL,
 * lone surrogates; iterative) before anything recursive sees the value, then
 * the schema, with issues described by {@link Issues.describe} (echoed values
 * cut to {@link Issues.MAX_ECHO} characters). Never throws.
 */
import { Either, Schema } from "effect"
import * as Errors from "./Errors.ts"
import * as InputLimits from "./InputLimits.ts"
import * as Issues from "./Issues.ts"

// fatal: invalid UTF-8 is an error, not silently replaced with U+FFFD
const decoder = new TextDecoder("utf-8", { fatal: true })

const badRequest = (message: string, path?: string, hint?: string): Errors.ErrorReply =>
  Errors.toReply(new Errors.BadRequest({ message, ...(path === undefined ? {} : { path }), ...(hint === undefined ? {} : { hint }) }))

/** Parses UTF-8 JSON and checks {@link InputLimits}; `what` names the input in messages (e.g. `knowledge requests`). */
export const parse = (data: Uint8Array, what: string, hint?: string): Either.Either<unknown, Errors.ErrorReply> => {
  let text: string
  try {
    text = decoder.decode(data)
  } catch {
    return Either.left(badRequest("payload is not valid UTF-8", undefined, hint))
  }
  if (text.trim().length === 0) return Either.left(badRequest("payload is empty; expected JSON", undefined, hint))
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    return Either.left(
      badRequest(Errors.cap(`malformed JSON: ${error instanceof Error ? error.message : String(error)}`, 300), undefined, hint),
    )
  }
  const problem = InputLimits.check(value, what)
  return problem === undefined ? Either.right(value) : Either.left(badRequest(problem.message, problem.path, hint))
}

/** {@link parse}, then decodes against `schema` (all issues; the first few listed, `path` naming the first). */
export const decode = <A, I>(
  schema: Schema.Schema<A, I>,
  data: Uint8Array,
  options: { readonly what: string; readonly hint?: string | undefined },
): Either.Either<A, Errors.ErrorReply> =>
  Either.flatMap(parse(data, options.what, options.hint), (value) =>
    Either.mapLeft(Schema.decodeUnknownEither(schema, { errors: "all" })(value), (error) => {
      const described = Issues.describe(error)
      return badRequest(`invalid ${options.what.replace(/s$/, "")}: ${described.message}`, described.path, options.hint)
    }),
  )
