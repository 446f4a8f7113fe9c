/** Error envelopes and reply encoding shared by the endpoint. */
import type { Errors } from "@ctxd/contracts"
import { Either, ParseResult, Schema } from "effect"
import * as Json from "../Json.ts"
import type { PayloadStoreError } from "../PayloadStore.ts"

/**
 * Decodes a UTF-8 JSON request against `schema`: the value, or the
 * `BadRequest` envelope naming what is wrong (with `hint`, when given).
 */
export const decodeRequest = <A, I>(
  schema: Schema.Schema<A, I>,
  data: Uint8Array,
  hint?: string,
): Either.Either<A, Errors.ErrorReply> => {
  const json = Json.decode(data)
  if (Either.isLeft(json)) return Either.left(errorReply("BadRequest", json.left.message, { hint }))
  const decoded = Schema.decodeUnknownEither(schema, { errors: "all" })(json.right)
  return Either.mapLeft(decoded, (error) =>
    errorReply("BadRequest", ParseResult.TreeFormatter.formatErrorSync(error), { hint }),
  )
}

/** An error envelope (`{"ok": false, "error": {...}}`). */
export const errorReply = (
  code: Errors.ErrorCode,
  message: string,
  extra?: { readonly path?: string | undefined; readonly hint?: string | undefined },
): Errors.ErrorReply => ({
  ok: false,
  error: {
    code,
    message,
    ...(extra?.path === undefined ? {} : { path: extra.path }),
    ...(extra?.hint === undefined ? {} : { hint: extra.hint }),
  },
})

export const INTERNAL = Json.encode(errorReply("Internal", "internal error"))

export const encodeReply = (value: unknown): { readonly bytes: Uint8Array; readonly error?: string } =>
  Either.match(Json.encodeEither(value), {
    onLeft: (e) => ({ bytes: INTERNAL, error: e.message }),
    onRight: (bytes) => ({ bytes }),
  })

/** The error reply for a body that cannot go through the object store. */
export const storeErrorReply = (error: PayloadStoreError, direction: "request" | "reply"): Errors.ErrorReply => {
  switch (error.reason) {
    case "Missing":
    case "Corrupt":
      return errorReply("BadRequest", error.message, { hint: "put the body into the object store again and resend the reference" })
    case "TooLarge":
    case "Unavailable":
      return errorReply("TooLarge", `the ${direction} exceeds the NATS max_payload and cannot go through the object store: ${error.message}`, {
        hint: "enable JetStream on the NATS server (the object store carries bodies above max_payload), or raise max_payload",
      })
    case "Failed":
      return errorReply("Unavailable", error.message, { hint: "retry" })
  }
}

