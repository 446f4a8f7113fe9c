/**
 * Bodies larger than the NATS server's `max_payload` travel through a
 * JetStream Object Store bucket: the sender puts the bytes there and sends a
 * small reference instead; the receiver fetches them. Any NATS client with
 * JetStream (or the `nats` CLI: `nats object get <bucket> <name>`) can read
 * such an object, so the mechanism is not ctxd-specific.
 *
 * The bucket is `ctxd-payloads-<root>` (the subject root with every
 * character outside `[A-Za-z0-9_-]` written `_`), so deployments and tests
 * sharing one NATS never collide. Its stream has a `max_age` (the TTL of
 * every object, default 10 minutes) and a `max_bytes` bound (default 1 GiB,
 * discard new: a full bucket refuses puts instead of evicting objects a
 * reader still needs). Readers delete what they consumed (`ContextClient`
 * does); the TTL removes the rest.
 *
 * The worker creates the bucket at start (idempotent: an existing bucket is
 * used as it is); a client only opens it, when it first needs it. When
 * JetStream is not available the store is disabled (logged once, clearly):
 * every operation fails with `PayloadStoreError` reason `Unavailable`, and
 * endpoints answer over-limit replies with a `TooLarge` error instead.
 */
import { Objm, type ObjectStore } from "@nats-io/obj"
import { Config, Context, Data, Duration, Effect, Layer, Schema } from "effect"
import { createHash, randomUUID } from "node:crypto"
import { NatsClient } from "./NatsClient.ts"

/** Header (value {@link PAYLOAD_OBJECT_STORE}) on a request or reply whose body is in the object store. */
export const PAYLOAD_HEADER = "ctxd-payload"
/** The value of {@link PAYLOAD_HEADER}. */
export const PAYLOAD_OBJECT_STORE = "objectstore"

/** Where a body is: `{bucket, name, size, sha256}` (size in bytes; sha256 in lowercase hex). */
export const ObjectRef = Schema.Struct({
  bucket: Schema.String,
  name: Schema.String,
  size: Schema.Number.pipe(Schema.int(), Schema.nonNegative()),
  sha256: Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/)),
}).annotations({ identifier: "ObjectRef" })
export type ObjectRef = typeof ObjectRef.Type

/** The `payload` field of a reference message: `{"payload": {"objectStore": ObjectRef}}`. */
export const PayloadRef = Schema.Struct({ objectStore: ObjectRef }).annotations({ identifier: "PayloadRef" })
export type PayloadRef = typeof PayloadRef.Type

/** Why a store operation failed. */
export class PayloadStoreError extends Data.TaggedError("PayloadStoreError")<{
  /**
   * `Unavailable` (no JetStream / bucket), `Missing` (expired or deleted),
   * `Foreign` (a reference to another bucket), `TooLarge`, `Corrupt` (size or
   * digest differ), `Failed`.
   */
  readonly reason: "Unavailable" | "Missing" | "Foreign" | "TooLarge" | "Corrupt" | "Failed"
  readonly message: string
}> {}

/** The store. */
export interface PayloadStoreService {
  /** The bucket name. */
  readonly bucket: string
  /** Largest body accepted through the store, in bytes. */
  readonly maxRequestBytes: number
  /** Stores `bytes` under a fresh name (`<prefix>-<uuid>`). */
  readonly put: (bytes: Uint8Array, prefix: string) => Effect.Effect<ObjectRef, PayloadStoreError>
  /** Fetches and verifies (size, sha256) the body `ref` names; `TooLarge` above `maxBytes` without reading it. */
  readonly get: (ref: ObjectRef, maxBytes: number) => Effect.Effect<Uint8Array, PayloadStoreError>
  /** Deletes an object; never fails (the TTL removes whatever this misses). */
  readonly remove: (name: string) => Effect.Effect<void>
  /** True when the bucket is usable (for diagnostics; operations fail `Unavailable` otherwise). */
  readonly available: () => boolean
}

/** The payload store of this process. */
export class PayloadStore extends Context.Tag("@ctxd/nats/PayloadStore")<PayloadStore, PayloadStoreService>() {}

/** The bucket of subject root `root`: `ctxd-payloads-<root>`, non-token characters as `_`. */
export const bucketName = (root: string): string => `ctxd-payloads-${root.replace(/[^A-Za-z0-9_-]/g, "_")}`

/** Lowercase hex SHA-256 of `bytes`. */
export const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

/** Settings. */
export interface PayloadStoreOptions {
  readonly bucket: string
  /** `create`: make the bucket if missing (a worker); `open`: use it only if it exists (a client). */
  readonly mode: "create" | "open"
  /** Object TTL (the stream's `max_age`), ms; default 600,000. Only used when creating. */
  readonly ttlMs?: number | undefined
  /** Bucket size bound (`max_bytes`), bytes; default 1 GiB. Only used when creating. */
  readonly maxBucketBytes?: number | undefined
  /** Largest body through the store; default 64 MiB. */
  readonly maxRequestBytes?: number | undefined
  /** Bound of one put or get, ms; default 30,000. */
  readonly timeoutMs?: number | undefined
}

export const DEFAULT_TTL_MS = 600_000
export const DEFAULT_MAX_BUCKET_BYTES = 1024 * 1024 * 1024
export const DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024
// chunks just below the server's max_payload (at most 1 MiB): each chunk is one
// acknowledged publish, so fewer chunks than the library's 128 KiB is much faster
const chunkBytes = (maxPayload: number | undefined) => Math.max(64 * 1024, Math.min(1024 * 1024, (maxPayload ?? 0) - 16 * 1024))

const message = (error: unknown) => (error instanceof Error ? error.message : String(error))

/**
 * The store on the `NatsClient` in context. In `create` mode the bucket is
 * created now (a failure is logged and leaves the store disabled); in `open`
 * mode it is opened on first use (and again on the next use after a failure).
 */
export const make = (options: PayloadStoreOptions): Effect.Effect<PayloadStoreService, never, NatsClient> =>
  Effect.gen(function* () {
    const { connection } = yield* NatsClient
    const ttlMs = options.ttlMs ?? DEFAULT_TTL_MS
    const maxRequestBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES
    const timeout = Duration.millis(options.timeoutMs ?? 30_000)
    const bucket = options.bucket
    let store: Promise<ObjectStore> | undefined
    let ready = false

    const open = (): Promise<ObjectStore> => {
      if (store !== undefined) return store
      const objm = new Objm(connection)
      const opened =
        options.mode === "create"
          ? objm.create(bucket, {
              ttl: ttlMs * 1_000_000,
              max_bytes: options.maxBucketBytes ?? DEFAULT_MAX_BUCKET_BYTES,
              description: "ctxd: request and reply bodies larger than the NATS max_payload",
            })
          : objm.open(bucket)
      store = opened.then(
        (s) => ((ready = true), s),
        (error: unknown) => {
          store = undefined
          throw error
        },
      )
      return store
    }

    const withStore = <A>(what: string, f: (s: ObjectStore) => Promise<A>): Effect.Effect<A, PayloadStoreError> =>
      Effect.tryPromise({
        try: () => open(),
        catch: (error) =>
          new PayloadStoreError({ reason: "Unavailable", message: `object store bucket ${bucket} unavailable: ${message(error)}` }),
      }).pipe(
        Effect.flatMap((s) =>
          Effect.tryPromise({
            try: () => f(s),
            catch: (error) => new PayloadStoreError({ reason: "Failed", message: `${what} in bucket ${bucket}: ${message(error)}` }),
          }),
        ),
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () =>
            new PayloadStoreError({ reason: "Failed", message: `${what} in bucket ${bucket} timed out after ${Duration.format(timeout)}` }),
        }),
      )

    const put = (bytes: Uint8Array, prefix: string) =>
      Effect.suspend(() => {
        const name = `${prefix}-${randomUUID()}`
        const digest = sha256(bytes)
        return withStore(`put ${name}`, (s) =>
          s.putBlob({ name, options: { max_chunk_size: chunkBytes(connection.info?.max_payload) } }, bytes),
        ).pipe(Effect.as<ObjectRef>({ bucket, name, size: bytes.length, sha256: digest }))
      })

    const get = (ref: ObjectRef, maxBytes: number) =>
      Effect.gen(function* () {
        if (ref.bucket !== bucket) {
          // permanent: no retry makes another bucket ctxd's (nor may a caller have it read one)
          return yield* new PayloadStoreError({
            reason: "Foreign",
            message: `object ${ref.name} is in bucket ${ref.bucket}, not ${bucket}`,
          })
        }
        if (ref.size > maxBytes) {
          return yield* new PayloadStoreError({
            reason: "TooLarge",
            message: `the body of ${ref.size} bytes exceeds the limit of ${maxBytes} bytes`,
          })
        }
        const info = yield* withStore(`info ${ref.name}`, (s) => s.info(ref.name))
        if (info === null || info.deleted) {
          return yield* new PayloadStoreError({
            reason: "Missing",
            message: `object ${ref.name} not found in bucket ${bucket} (expired or deleted)`,
          })
        }
        if (info.size !== ref.size) {
          return yield* new PayloadStoreError({
            reason: "Corrupt",
            message: `object ${ref.name} is ${info.size} bytes, the reference says ${ref.size}`,
          })
        }
        const bytes = yield* withStore(`get ${ref.name}`, (s) => s.getBlob(ref.name))
        if (bytes === null) {
          return yield* new PayloadStoreError({ reason: "Missing", message: `object ${ref.name} vanished from bucket ${bucket}` })
        }
        if (bytes.length !== ref.size || sha256(bytes) !== ref.sha256) {
          return yield* new PayloadStoreError({ reason: "Corrupt", message: `object ${ref.name} does not match its size or sha256` })
        }
        return bytes
      })

    const remove = (name: string) =>
      withStore(`delete ${name}`, (s) => s.delete(name)).pipe(
        Effect.timeout(Duration.seconds(5)),
        Effect.catchAll((error) => Effect.logDebug(`could not delete ${name}: ${String(error)}`)),
        Effect.asVoid,
      )

    if (options.mode === "create") {
      yield* Effect.tryPromise({ try: () => open(), catch: (error) => new Error(message(error)) }).pipe(
        Effect.timeout(timeout),
        Effect.tap(() => Effect.logInfo(`object store bucket ${bucket} ready (TTL ${ttlMs} ms) for bodies above the NATS max_payload`)),
        Effect.catchAll((error) =>
          Effect.logError(
            `JetStream object store bucket ${bucket} is unavailable (${message(error)}): ` +
              "replies larger than the NATS max_payload will be answered TooLarge, larger requests refused " +
              "(the bucket is tried again on the next such body)",
          ),
        ),
      )
    }

    return { bucket, maxRequestBytes, put, get, remove, available: () => ready }
  })

/** {@link make} as a layer. */
export const layer = (options: PayloadStoreOptions): Layer.Layer<PayloadStore, never, NatsClient> =>
  Layer.effect(PayloadStore, make(options))

/** `CTXD_PAYLOAD_TTL_MS` (600,000), `CTXD_PAYLOAD_STORE_MAX_BYTES` (1 GiB), `CTXD_MAX_REQUEST_BYTES` (64 MiB). */
export const config = Config.all({
  ttlMs: Config.integer("CTXD_PAYLOAD_TTL_MS").pipe(
    Config.withDefault(DEFAULT_TTL_MS),
    Config.withDescription(
      "Time to live (max_age) of the bodies in the object store bucket ctxd-payloads-<root>; applies when a worker creates the bucket",
    ),
  ),
  maxBucketBytes: Config.integer("CTXD_PAYLOAD_STORE_MAX_BYTES").pipe(
    Config.withDefault(DEFAULT_MAX_BUCKET_BYTES),
    Config.withDescription(
      "Size bound (max_bytes, discard new) of that bucket; when it is full, a large reply is answered Unavailable (retryable) instead",
    ),
  ),
  maxRequestBytes: Config.integer("CTXD_MAX_REQUEST_BYTES").pipe(
    Config.withDefault(DEFAULT_MAX_REQUEST_BYTES),
    Config.withDescription(
      "Largest request accepted by object store reference; a reference to a larger body is answered TooLarge at once, without fetching it. Also the client library's limit (larger turns refused locally)",
    ),
  ),
})
