/** Error envelopes and reply encoding shared by the endpoint. */
import type { Errors } from "@ctxd/contracts"
import { Either, ParseResult, Schema } from "effect"
import * as Json from "../Json.ts"
import type { PayloadStoreError } from "../PayloadStore.ts"
import { headers as headersOf } from "../Request.ts"
import type { MsgHdrs } from "@nats-io/transport-node"

/**
 * Decodes a UTF-8 JSON request against `schema`: the value, or the
 * `BadRequest` envelope naming what is wrong (with `hint`, when given).
 */
export const decodeRequest = <A, I>(schema: Schema.Schema<A, I>, data: Uint8Array, hint?: string): Either.Either<A, Errors.ErrorReply> => {
  const json = Json.decode(data)
  if (Either.isLeft(json)) return Either.left(errorReply("BadRequest", json.left.message, { hint }))
  const decoded = Schema.decodeUnknownEither(schema, { errors: "all" })(json.right)
  return Either.mapLeft(decoded, (error) => errorReply("BadRequest", ParseResult.TreeFormatter.formatErrorSync(error), { hint }))
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
    case "Foreign":
      return errorReply("BadRequest", error.message, { hint: "put the body into this deployment's bucket (ctxd-payloads-<root>)" })
    case "TooLarge":
    case "Unavailable":
      return errorReply(
        "TooLarge",
        `the ${direction} exceeds the NATS max_payload and cannot go through the object store: ${error.message}`,
        {
          hint: "enable JetStream on the NATS server (the object store carries bodies above max_payload), or raise max_payload",
        },
      )
    case "Failed":
      return errorReply("Unavailable", error.message, { hint: "retry" })
  }
}

const ReplyTypeId: unique symbol = Symbol.for("@ctxd/nats/Endpoint/Reply")

/** A reply with more than a JSON value: ready bytes and/or NATS headers. Make one with {@link reply}. */
export interface Reply {
  readonly [ReplyTypeId]: typeof ReplyTypeId
  /**
   * The JSON value to encode, when `bytes` is absent; with `bytes`, the value
   * they encode (its `ok` and `turnId` go into the reference reply of a reply
   * sent by object store).
   */
  readonly value?: unknown
  /** The payload as is (e.g. another service's reply being relayed). */
  readonly bytes?: Uint8Array | undefined
  readonly headers?: MsgHdrs | undefined
}

/**
 * A reply carrying `bytes` as they are (not re-encoded: a relayed reply, or
 * `value` encoded already) or the JSON `value`, with `headers` (a `MsgHdrs`,
 * or a record of header names to values).
 */
export const reply = (options: {
  readonly value?: unknown
  readonly bytes?: Uint8Array | undefined
  readonly headers?: MsgHdrs | Readonly<Record<string, string>> | undefined
}): Reply => {
  const given = options.headers
  const headers =
    given === undefined || typeof (given as MsgHdrs).append === "function"
      ? (given as MsgHdrs | undefined)
      : headersOf(given as Readonly<Record<string, string>>)
  return { [ReplyTypeId]: ReplyTypeId, value: options.value, bytes: options.bytes, headers }
}

/** True for a {@link Reply}. */
export const isReply = (value: unknown): value is Reply => typeof value === "object" && value !== null && ReplyTypeId in value
