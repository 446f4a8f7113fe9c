/**
 * JSON over NATS: UTF-8 bytes in and out. Decoding never throws: malformed
 * input (bad UTF-8 or bad JSON) is a {@link MalformedJson} value the caller
 * turns into a `BadRequest` envelope.
 */
import { Data, Either } from "effect"

/** The bytes are not valid UTF-8 JSON. */
export class MalformedJson extends Data.TaggedError("MalformedJson")<{ readonly message: string }> {}

/** The value cannot be written as JSON (a `BigInt`, a cycle, `undefined` at top level...). */
export class UnencodableJson extends Data.TaggedError("UnencodableJson")<{ readonly message: string }> {}

// fatal: invalid UTF-8 is an error, not silently replaced with U+FFFD
const decoder = new TextDecoder("utf-8", { fatal: true })

/**
 * The UTF-8 bytes of `text`. JSON text is mostly ASCII, whose bytes are its
 * characters: then they are copied as they are (about 3× faster than
 * encoding them, which a 20 KB reply shows), else encoded. Its length in
 * UTF-8 equals its length in characters exactly when it is all ASCII.
 */
export const utf8 = (text: string): Buffer =>
  Buffer.byteLength(text, "utf8") === text.length ? Buffer.from(text, "latin1") : Buffer.from(text, "utf8")

/** `value` as UTF-8 JSON, or why it cannot be encoded. */
export const encodeEither = (value: unknown): Either.Either<Uint8Array, UnencodableJson> => {
  try {
    const text = JSON.stringify(value) as string | undefined
    if (text === undefined) return Either.left(new UnencodableJson({ message: `cannot encode ${typeof value} as JSON` }))
    return Either.right(utf8(text))
  } catch (error) {
    return Either.left(new UnencodableJson({ message: error instanceof Error ? error.message : String(error) }))
  }
}

/**
 * `value` as UTF-8 JSON. Throws {@link UnencodableJson} for values JSON
 * cannot represent; use {@link encodeEither} where that is possible.
 */
export const encode = (value: unknown): Uint8Array => Either.getOrThrowWith(encodeEither(value), (error) => error)

/** The text of UTF-8 bytes; `Left(MalformedJson)` for bad UTF-8. */
export const text = (data: Uint8Array): Either.Either<string, MalformedJson> => {
  try {
    return Either.right(decoder.decode(data))
  } catch {
    return Either.left(new MalformedJson({ message: "payload is not valid UTF-8" }))
  }
}

/** Parses JSON text; `Left(MalformedJson)` for empty input or a syntax error. */
export const parse = (text: string): Either.Either<unknown, MalformedJson> => {
  if (text.trim().length === 0) return Either.left(new MalformedJson({ message: "payload is empty; expected JSON" }))
  try {
    return Either.right(JSON.parse(text) as unknown)
  } catch (error) {
    return Either.left(new MalformedJson({ message: `malformed JSON: ${error instanceof Error ? error.message : String(error)}` }))
  }
}

/** Parses UTF-8 JSON; `Left(MalformedJson)` for bad UTF-8, empty input or a syntax error. */
export const decode = (data: Uint8Array): Either.Either<unknown, MalformedJson> => Either.flatMap(text(data), parse)
