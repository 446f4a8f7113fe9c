/**
 * The wire side of bodies larger than the NATS `max_payload` (the store is
 * {@link PayloadStore}). A message whose body is in the object store carries
 * the header `ctxd-payload: objectstore` and a small JSON body:
 *
 * - request: `{"payload": {"objectStore": {"bucket", "name", "size", "sha256"}}}`
 * - reply: `{"ok": true, "turnId": "...", "payload": {"objectStore": {...}}}`
 *   (`ok` and `turnId` copied from the real reply when it has them)
 *
 * The limit is measured on the encoded bytes plus the encoded headers against
 * the connection's server `max_payload` (what nats.js itself checks before
 * it refuses to publish).
 */
import { headers as natsHeaders, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node"
import { Effect, Either, Option, ParseResult, Schema } from "effect"
import * as Json from "./Json.ts"
import { NatsClient } from "./NatsClient.ts"
import { type ObjectRef, PAYLOAD_HEADER, PAYLOAD_OBJECT_STORE, PayloadRef, PayloadStore, PayloadStoreError } from "./PayloadStore.ts"

const encoder = new TextEncoder()

/** Encoded size of `headers` on the wire (`NATS/1.0\r\n`, `k: v\r\n` each, `\r\n`). */
export const headerBytes = (headers: MsgHdrs | undefined): number => {
  if (headers === undefined) return 0
  const encode = (headers as { encode?: () => Uint8Array }).encode
  if (typeof encode === "function") return encode.call(headers).length
  let size = 12
  for (const [key, values] of headers) for (const value of values) size += encoder.encode(`${key}: ${value}\r\n`).length
  return size
}

/** The server's `max_payload` for this connection (`Infinity` before the first INFO). */
export const maxPayload = (connection: NatsConnection): number => connection.info?.max_payload ?? Number.POSITIVE_INFINITY

/** True when a message of `bytes` with `headers` can be published on `connection`. */
export const fits = (connection: NatsConnection, bytes: Uint8Array, headers: MsgHdrs | undefined): boolean =>
  bytes.length + headerBytes(headers) <= maxPayload(connection)

/** True when the message says its body is in the object store. */
export const isReference = (headers: MsgHdrs | undefined): boolean => headers?.get(PAYLOAD_HEADER) === PAYLOAD_OBJECT_STORE

/** `headers` (copied) plus `ctxd-payload: objectstore`. */
export const withReferenceHeader = (headers: MsgHdrs | undefined): MsgHdrs => {
  const result = natsHeaders()
  if (headers !== undefined) for (const [key, values] of headers) for (const value of values) result.append(key, value)
  result.set(PAYLOAD_HEADER, PAYLOAD_OBJECT_STORE)
  return result
}

const decodeRef = Schema.decodeUnknownEither(Schema.Struct({ payload: PayloadRef }))

/** The reference a reference message carries, or what is wrong with it. */
export const parseReference = (data: Uint8Array): Either.Either<ObjectRef, string> => {
  const json = Json.decode(data)
  if (Either.isLeft(json)) return Either.left(json.left.message)
  return Either.match(decodeRef(json.right), {
    onLeft: (e) => Either.left(`bad object store reference: ${ParseResult.TreeFormatter.formatErrorSync(e)}`),
    onRight: (value) => Either.right(value.payload.objectStore),
  })
}

/** The small reply sent instead of a large one: `ok` and `turnId` of `value` (when present), and the reference. */
export const referenceReply = (ref: ObjectRef, value: unknown): Uint8Array => {
  const v = typeof value === "object" && value !== null ? (value as { ok?: unknown; turnId?: unknown }) : {}
  return Json.encode({
    ok: typeof v.ok === "boolean" ? v.ok : true,
    ...(typeof v.turnId === "string" ? { turnId: v.turnId } : {}),
    payload: { objectStore: ref },
  })
}

/** A request ready to publish: the payload itself, or a reference to it (`stored` names the object to delete afterwards). */
export interface Outgoing {
  readonly payload: Uint8Array
  readonly headers: MsgHdrs | undefined
  readonly stored?: ObjectRef | undefined
}

/**
 * `payload` as it can be sent on this connection: unchanged when it fits the
 * server's `max_payload`; else stored in the {@link PayloadStore} in context
 * and replaced by a reference (`Unavailable` when there is no store).
 */
export const outgoing = (payload: Uint8Array, headers: MsgHdrs | undefined): Effect.Effect<Outgoing, PayloadStoreError, NatsClient> =>
  Effect.gen(function* () {
    const { connection } = yield* NatsClient
    if (fits(connection, payload, headers)) return { payload, headers }
    const store = yield* Effect.serviceOption(PayloadStore)
    if (Option.isNone(store)) {
      return yield* new PayloadStoreError({
        reason: "Unavailable",
        message: `the request is ${payload.length} bytes, above the NATS max_payload ${maxPayload(connection)}, and no object store is configured`,
      })
    }
    if (payload.length > store.value.maxRequestBytes) {
      return yield* new PayloadStoreError({
        reason: "TooLarge",
        message: `the request is ${payload.length} bytes; the limit is ${store.value.maxRequestBytes} bytes`,
      })
    }
    const ref = yield* store.value.put(payload, "req")
    return { payload: Json.encode({ payload: { objectStore: ref } }), headers: withReferenceHeader(headers), stored: ref }
  })

/** Deletes the object behind an {@link Outgoing} reference, if any (best effort). */
export const cleanup = (sent: Outgoing): Effect.Effect<void> =>
  sent.stored === undefined
    ? Effect.void
    : Effect.flatMap(Effect.serviceOption(PayloadStore), (store) =>
        Option.isSome(store) && sent.stored !== undefined ? store.value.remove(sent.stored.name) : Effect.void,
      )

/**
 * The body of a received reply: `data` itself, or — for a reference reply —
 * the body fetched from the {@link PayloadStore} in context (verified, then
 * deleted, best effort), at most `maxBytes`.
 */
export const resolve = (data: Uint8Array, headers: MsgHdrs | undefined, maxBytes: number): Effect.Effect<Uint8Array, PayloadStoreError> =>
  Effect.gen(function* () {
    if (!isReference(headers)) return data
    const ref = parseReference(data)
    if (Either.isLeft(ref)) return yield* new PayloadStoreError({ reason: "Corrupt", message: ref.left })
    const store = yield* Effect.serviceOption(PayloadStore)
    if (Option.isNone(store)) {
      return yield* new PayloadStoreError({ reason: "Unavailable", message: "a reply in the object store, and no store is configured" })
    }
    const bytes = yield* store.value.get(ref.right, maxBytes)
    yield* store.value.remove(ref.right.name)
    return bytes
  })
