// The byte budget of the endpoint's admission control, and bodies larger than
// the server's max_payload (1 MiB by default) through the JetStream object
// store, on the real NATS server.
import { randomBytes, randomUUID } from "node:crypto"
import { describe, expect, layer } from "@effect/vitest"
import { jetstreamManager } from "@nats-io/jetstream"
import { Deferred, Effect, Either, Fiber, Layer } from "effect"
import { Admission, Endpoint, Json, LargePayload, NatsClient, PayloadStore, Request } from "../src/index.ts"

const NATS_URL = process.env.NATS_URL ?? "nats://127.0.0.1:4222"
const root = `t_${randomUUID().replaceAll("-", "").slice(0, 16)}`
const bucket = PayloadStore.bucketName(root)

const nats = NatsClient.layer({ servers: [NATS_URL], name: "ctxd-large-test" })
/** The store, and the bucket's stream deleted when the layer is released. */
const store = Layer.scoped(
  PayloadStore.PayloadStore,
  Effect.gen(function* () {
    const { connection } = yield* NatsClient.NatsClient
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        const jsm = await jetstreamManager(connection)
        await jsm.streams.delete(`OBJ_${bucket}`).catch(() => false)
      }),
    )
    return yield* PayloadStore.make({ bucket, mode: "create", ttlMs: 60_000 })
  }),
)

const decode = (data: Uint8Array) => Either.getOrThrow(Json.decode(data))

describe("admission by bytes in flight", () => {
  layer(nats, { excludeTestServices: true })((it) => {
    it.scoped("a request whose bytes do not fit is answered Busy at once, without calling the handler", () =>
      Effect.gen(function* () {
        const subject = `${root}.bytes`
        const gate = yield* Deferred.make<void>()
        let calls = 0
        const endpoint = yield* Endpoint.serve({
          subject,
          maxConcurrent: 8,
          maxInflightBytes: 100_000,
          handler: () => Effect.sync(() => ++calls).pipe(Effect.zipRight(Deferred.await(gate)), Effect.as({ ok: true })),
        })
        const body = Json.encode({ text: "x".repeat(60_000) })
        const first = yield* Effect.fork(Request.request(subject, body, { timeoutMs: 5_000 }))
        yield* Effect.sleep("10 millis").pipe(Effect.repeat({ until: () => endpoint.running() === 1 }))
        expect(endpoint.inFlightBytes()).toBe(body.length)
        const started = Date.now()
        const second = yield* Request.request(subject, body, { timeoutMs: 5_000 })
        expect(Date.now() - started).toBeLessThan(1_000)
        expect(decode(second.data)).toMatchObject({ ok: false, error: { code: "Busy" } })
        expect((decode(second.data) as { error: { message: string } }).error.message).toMatch(/bytes in flight/)
        expect(calls).toBe(1)
        // small requests still fit beside the first
        const small = yield* Effect.fork(Request.request(subject, Json.encode({ n: 1 }), { timeoutMs: 5_000 }))
        yield* Deferred.succeed(gate, undefined)
        expect(decode((yield* Fiber.join(first)).data)).toEqual({ ok: true })
        expect(decode((yield* Fiber.join(small)).data)).toEqual({ ok: true })
        expect(calls).toBe(2)
        expect(endpoint.inFlightBytes()).toBe(0)
      }),
    )

    it("a shared budget spans endpoints; one request larger than the budget passes when nothing else is in flight", () => {
      const budget = Admission.make(1_000)
      expect(budget.tryAcquire(5_000)).toBe(true)
      expect(budget.tryAcquire(1)).toBe(false)
      budget.release(5_000)
      expect(budget.tryAcquire(600)).toBe(true)
      expect(budget.tryAcquire(400)).toBe(true)
      expect(budget.tryAcquire(1)).toBe(false)
      expect(budget.inFlightBytes()).toBe(1_000)
    })
  })
})

describe("bodies above max_payload go by object store", () => {
  layer(Layer.provideMerge(store, nats), { excludeTestServices: true })((it) => {
    it.scoped("a 3 MB reply arrives as a reference; resolving it yields the exact bytes and deletes the object", () =>
      Effect.gen(function* () {
        const { connection } = yield* NatsClient.NatsClient
        expect(LargePayload.maxPayload(connection)).toBeLessThan(3_000_000)
        const subject = `${root}.big-reply`
        const text = randomBytes(1_500_000).toString("hex")
        yield* Endpoint.serve({
          subject,
          handler: () => Effect.succeed(Endpoint.reply({ value: { ok: true, turnId: "t-1", text }, headers: { "x-by": "big" } })),
        })
        const msg = yield* Request.request(subject, Json.encode({}), { timeoutMs: 10_000 })
        expect(LargePayload.isReference(msg.headers)).toBe(true)
        expect(msg.headers?.get("x-by")).toBe("big")
        const small = decode(msg.data) as { ok: boolean; turnId: string; payload: { objectStore: PayloadStore.ObjectRef } }
        expect(small.ok).toBe(true)
        expect(small.turnId).toBe("t-1")
        expect(small.payload.objectStore.bucket).toBe(bucket)
        const body = yield* LargePayload.resolve(msg.data, msg.headers, 64 * 1024 * 1024)
        expect(decode(body)).toEqual({ ok: true, turnId: "t-1", text })
        const payloads = yield* PayloadStore.PayloadStore
        const again = yield* Effect.either(payloads.get(small.payload.objectStore, 64 * 1024 * 1024))
        expect(Either.isLeft(again) && again.left.reason).toBe("Missing")
      }),
    )

    it.scoped("a 2 MB request is sent by reference and the handler sees its bytes; small ones travel inline", () =>
      Effect.gen(function* () {
        const subject = `${root}.big-request`
        const seen: Array<{ size: number; reference: boolean }> = []
        yield* Endpoint.serve({
          subject,
          maxPayload: 1024 * 1024,
          handler: ({ data, headers }) =>
            Effect.sync(() => {
              seen.push({ size: data.length, reference: LargePayload.isReference(headers) })
              return { ok: true, text: (decode(data) as { text: string }).text.length }
            }),
        })
        const big = Json.encode({ text: "y".repeat(2_000_000) })
        const reply = yield* Request.request(subject, big, { timeoutMs: 10_000 })
        expect(decode(reply.data)).toEqual({ ok: true, text: 2_000_000 })
        const inline = yield* Request.request(subject, Json.encode({ text: "z" }), { timeoutMs: 5_000 })
        expect(decode(inline.data)).toEqual({ ok: true, text: 1 })
        expect(seen).toEqual([
          { size: big.length, reference: true },
          { size: 12, reference: false },
        ])
      }),
    )

    it.scoped("a reference above the request limit, to a missing object or to another bucket, is refused without calling the handler", () =>
      Effect.gen(function* () {
        const subject = `${root}.refused`
        let calls = 0
        yield* Endpoint.serve({ subject, handler: () => Effect.sync(() => ++calls) })
        const headers = LargePayload.withReferenceHeader(undefined)
        const ref = (size: number) => Json.encode({ payload: { objectStore: { bucket, name: "req-nope", size, sha256: "0".repeat(64) } } })
        const huge = yield* Request.request(subject, ref(65 * 1024 * 1024), { timeoutMs: 5_000, headers })
        expect(decode(huge.data)).toMatchObject({ ok: false, error: { code: "TooLarge" } })
        const missing = yield* Request.request(subject, ref(10), { timeoutMs: 5_000, headers })
        expect(decode(missing.data)).toMatchObject({ ok: false, error: { code: "BadRequest" } })
        const bad = yield* Request.request(subject, Json.encode({ payload: 1 }), { timeoutMs: 5_000, headers })
        expect(decode(bad.data)).toMatchObject({ ok: false, error: { code: "BadRequest" } })
        // a bucket that is not ctxd's is a permanent refusal, not a retryable one
        const foreign = Json.encode({ payload: { objectStore: { bucket: "KV_secrets", name: "x", size: 10, sha256: "0".repeat(64) } } })
        const elsewhere = yield* Request.request(subject, foreign, { timeoutMs: 5_000, headers })
        expect(decode(elsewhere.data)).toMatchObject({ ok: false, error: { code: "BadRequest" } })
        expect(calls).toBe(0)
      }),
    )
  })

  layer(nats, { excludeTestServices: true })((it) => {
    it.scoped("without an object store an over-limit reply is a TooLarge error, not a timeout", () =>
      Effect.gen(function* () {
        const subject = `${root}.no-store`
        yield* Endpoint.serve({ subject, handler: () => Effect.succeed({ ok: true, text: "w".repeat(2_000_000) }) })
        const msg = yield* Request.request(subject, Json.encode({}), { timeoutMs: 5_000 })
        expect(decode(msg.data)).toMatchObject({ ok: false, error: { code: "TooLarge" } })
      }),
    )
  })
})
