import { randomUUID } from "node:crypto"
import { describe, expect, it, layer } from "@effect/vitest"
import { Deferred, Effect, Either, Exit, Fiber, FiberRef, HashMap, Scope } from "effect"
import { Endpoint, Json, NatsClient, Request } from "../src/index.ts"

const NATS_URL = process.env.NATS_URL ?? "nats://127.0.0.1:4222"
const uniqueRoot = () => `t_${randomUUID().replaceAll("-", "").slice(0, 16)}`

const call = (subject: string, value: unknown, timeoutMs = 5_000) =>
  Request.request(subject, Json.encode(value), { timeoutMs }).pipe(Effect.map((msg) => Either.getOrThrow(Json.decode(msg.data))))

const echo = (request: Endpoint.Request) =>
  Effect.succeed(
    Either.match(Json.decode(request.data), {
      onLeft: (e) => Endpoint.errorReply("BadRequest", e.message),
      onRight: (value) => ({ ok: true, subject: request.subject, echo: value }),
    }),
  )

describe("Endpoint", () => {
  layer(NatsClient.layer({ servers: [NATS_URL], name: "ctxd-nats-test" }), { excludeTestServices: true })((it) => {
    it.scoped("echo roundtrip", () =>
      Effect.gen(function* () {
        const subject = `${uniqueRoot()}.echo`
        yield* Endpoint.serve({ subject, handler: echo })
        const reply = yield* call(subject, { hello: "wörld", n: [1, 2, 3] })
        expect(reply).toEqual({ ok: true, subject, echo: { hello: "wörld", n: [1, 2, 3] } })
      }),
    )

    it.scoped("a Reply sends ready bytes as they are, or a value, with headers", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        const relayed = new TextEncoder().encode('{"ok":true,"relayed":1}')
        yield* Endpoint.serve({
          subject: `${root}.raw`,
          handler: () => Effect.succeed(Endpoint.reply({ bytes: relayed, headers: { "x-by": "raw" } })),
        })
        yield* Endpoint.serve({
          subject: `${root}.value`,
          handler: ({ headers }) =>
            Effect.succeed(
              Endpoint.reply({ value: { ok: true, asked: headers?.get("x-ask") }, headers: Request.headers({ "x-by": "value" }) }),
            ),
        })
        const raw = yield* Request.request(`${root}.raw`, Json.encode({}), { timeoutMs: 5_000 })
        expect(new TextDecoder().decode(raw.data)).toBe('{"ok":true,"relayed":1}')
        expect(raw.headers?.get("x-by")).toBe("raw")
        const value = yield* Request.request(`${root}.value`, Json.encode({}), {
          timeoutMs: 5_000,
          headers: Request.headers({ "x-ask": "yes" }),
        })
        expect(Either.getOrThrow(Json.decode(value.data))).toEqual({ ok: true, asked: "yes" })
        expect(value.headers?.get("x-by")).toBe("value")
      }),
    )

    it.scoped("logAnnotations: a handler's log lines carry the endpoint and its request's annotations, not another request's", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        const subject = `${root}.a.>`
        yield* Endpoint.serve({
          subject,
          logAnnotations: (s) => (s.endsWith(".none") ? undefined : { tenant: s.split(".").at(-1) }),
          handler: () =>
            Effect.map(FiberRef.get(FiberRef.currentLogAnnotations), (annotations) => ({
              ok: true,
              annotations: Object.fromEntries(HashMap.toEntries(annotations)),
            })),
        })
        const [acme, beta, none] = yield* Effect.all([call(`${root}.a.acme`, {}), call(`${root}.a.beta`, {}), call(`${root}.a.none`, {})], {
          concurrency: "unbounded",
        })
        expect(acme).toEqual({ ok: true, annotations: { endpoint: subject, tenant: "acme" } })
        expect(beta).toEqual({ ok: true, annotations: { endpoint: subject, tenant: "beta" } })
        expect(none).toEqual({ ok: true, annotations: { endpoint: subject } })
      }),
    )

    it.scoped("a queue group shares the load between two endpoints", () =>
      Effect.gen(function* () {
        const subject = `${uniqueRoot()}.work`
        const served = { a: 0, b: 0 }
        const member = (id: "a" | "b") =>
          Endpoint.serve({
            subject,
            queue: "workers",
            handler: () => Effect.sync(() => ++served[id]).pipe(Effect.as({ ok: true, by: id })),
          })
        yield* member("a")
        yield* member("b")
        const replies = yield* Effect.forEach(Array.from({ length: 60 }), (_, i) => call(subject, { i }), {
          concurrency: 10,
        })
        expect(replies).toHaveLength(60)
        expect(served.a + served.b).toBe(60)
        expect(served.a).toBeGreaterThan(0)
        expect(served.b).toBeGreaterThan(0)
      }),
    )

    it.scoped("malformed input, unencodable replies and defects become error envelopes", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        yield* Endpoint.serve({ subject: `${root}.echo`, handler: echo })
        yield* Endpoint.serve({ subject: `${root}.die`, handler: () => Effect.die(new Error("boom")) })
        yield* Endpoint.serve({ subject: `${root}.bigint`, handler: () => Effect.succeed({ n: 1n }) })
        yield* Endpoint.serve({ subject: `${root}.interrupt`, handler: () => Effect.interrupt })
        const { connection } = yield* NatsClient.NatsClient
        const raw = yield* Effect.promise(() => connection.request(`${root}.echo`, "{not json", { timeout: 5_000 }))
        expect(Either.getOrThrow(Json.decode(raw.data))).toMatchObject({ ok: false, error: { code: "BadRequest" } })
        const bytes = yield* Effect.promise(() => connection.request(`${root}.echo`, new Uint8Array([0xff, 0xfe]), { timeout: 5_000 }))
        expect(Either.getOrThrow(Json.decode(bytes.data))).toMatchObject({ ok: false, error: { code: "BadRequest" } })
        for (const name of ["die", "bigint", "interrupt"]) {
          expect(yield* call(`${root}.${name}`, {})).toEqual({ ok: false, error: { code: "Internal", message: "internal error" } })
        }
        // the endpoint survived all of it
        expect(yield* call(`${root}.echo`, 1)).toMatchObject({ ok: true, echo: 1 })
      }),
    )

    it.scoped("messages without a reply subject are ignored", () =>
      Effect.gen(function* () {
        const subject = `${uniqueRoot()}.echo`
        let calls = 0
        yield* Endpoint.serve({ subject, handler: (r) => Effect.sync(() => calls++).pipe(Effect.zipRight(echo(r))) })
        const { connection } = yield* NatsClient.NatsClient
        connection.publish(subject, Json.encode({ fire: "and forget" }))
        expect(yield* call(subject, 2)).toMatchObject({ ok: true, echo: 2 })
        expect(calls).toBe(1)
      }),
    )

    it.scoped("maxConcurrent bounds the handlers running at once", () =>
      Effect.gen(function* () {
        const subject = `${uniqueRoot()}.slow`
        const state = { now: 0, max: 0 }
        const endpoint = yield* Endpoint.serve({
          subject,
          maxConcurrent: 3,
          handler: () =>
            Effect.gen(function* () {
              state.now++
              state.max = Math.max(state.max, state.now)
              yield* Effect.sleep("60 millis")
              state.now--
              return { ok: true }
            }),
        })
        const replies = yield* Effect.forEach(Array.from({ length: 12 }), () => call(subject, {}), {
          concurrency: "unbounded",
        })
        expect(replies.every((r) => (r as { ok: boolean }).ok)).toBe(true)
        expect(state.max).toBe(3)
        expect(endpoint.inFlight()).toBe(0)
      }),
    )

    it.scoped("requests beyond maxConcurrent + maxPending are answered Busy", () =>
      Effect.gen(function* () {
        const subject = `${uniqueRoot()}.busy`
        const gate = yield* Deferred.make<void>()
        const endpoint = yield* Endpoint.serve({
          subject,
          maxConcurrent: 1,
          maxPending: 1,
          handler: () => Deferred.await(gate).pipe(Effect.as({ ok: true })),
        })
        const first = yield* Effect.fork(call(subject, 1))
        const second = yield* Effect.fork(call(subject, 2))
        yield* Effect.sleep("20 millis").pipe(Effect.repeat({ until: () => endpoint.inFlight() === 2 }))
        expect(endpoint.running()).toBe(1)
        expect(endpoint.waiting()).toBe(1)
        expect(yield* call(subject, 3)).toMatchObject({ ok: false, error: { code: "Busy" } })
        yield* Deferred.succeed(gate, undefined)
        expect(yield* Fiber.join(first)).toEqual({ ok: true })
        expect(yield* Fiber.join(second)).toEqual({ ok: true })
      }),
    )

    it.scoped("an oversize payload gets TooLarge without calling the handler", () =>
      Effect.gen(function* () {
        const subject = `${uniqueRoot()}.small`
        let calls = 0
        yield* Endpoint.serve({ subject, maxPayload: 100, handler: () => Effect.sync(() => ++calls) })
        const reply = yield* call(subject, { text: "x".repeat(200) })
        expect(reply).toMatchObject({ ok: false, error: { code: "TooLarge" } })
        expect((reply as { error: { hint?: string } }).error.hint).toContain("max_payload")
        expect(calls).toBe(0)
        expect(yield* call(subject, { text: "x" })).toBe(1)
      }),
    )

    it.scoped("closing the scope waits for a request in flight and delivers its reply", () =>
      Effect.gen(function* () {
        const subject = `${uniqueRoot()}.graceful`
        const started = yield* Deferred.make<void>()
        const scope = yield* Scope.make()
        const endpoint = yield* Endpoint.serve({
          subject,
          handler: () =>
            Deferred.succeed(started, undefined).pipe(Effect.zipRight(Effect.sleep("400 millis")), Effect.as({ ok: true, finished: true })),
        }).pipe(Scope.extend(scope))
        const inFlight = yield* Effect.fork(call(subject, {}))
        yield* Deferred.await(started)
        const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
        yield* Effect.sleep("50 millis")
        expect(endpoint.draining()).toBe(true)
        expect(yield* Fiber.join(inFlight)).toEqual({ ok: true, finished: true })
        yield* Fiber.join(closing)
        expect(endpoint.inFlight()).toBe(0)
        // nobody listens any more
        const after = yield* Effect.flip(call(subject, {}))
        expect(after._tag).toBe("NoResponders")
      }),
    )

    it.scoped("handlers still running after drainTimeoutMs are interrupted and answered Unavailable", () =>
      Effect.gen(function* () {
        const subject = `${uniqueRoot()}.stuck`
        const started = yield* Deferred.make<void>()
        const scope = yield* Scope.make()
        yield* Endpoint.serve({
          subject,
          drainTimeoutMs: 200,
          handler: () => Deferred.succeed(started, undefined).pipe(Effect.zipRight(Effect.never)),
        }).pipe(Scope.extend(scope))
        const inFlight = yield* Effect.fork(call(subject, {}))
        yield* Deferred.await(started)
        yield* Scope.close(scope, Exit.void)
        expect(yield* Fiber.join(inFlight)).toMatchObject({ ok: false, error: { code: "Unavailable" } })
      }),
    )
  })
})

describe("yieldIfBusy", () => {
  const macrotask = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
  const spin = (ms: number) =>
    Effect.sync(() => {
      const until = performance.now() + ms
      while (performance.now() < until) {
        // CPU work that never lets the event loop poll
      }
    })

  it.effect("resumes at once while the event loop polled lately; after CPU work longer than the slice, after the loop's next turn", () =>
    Effect.gen(function* () {
      // arm it, and let the loop turn: it has seen a poll now
      yield* Endpoint.yieldIfBusy(60_000)
      yield* macrotask
      let early = false
      setImmediate(() => (early = true))
      yield* Endpoint.yieldIfBusy(60_000)
      // resumed before the loop turned
      expect(early).toBe(false)
      yield* macrotask
      expect(early).toBe(true)

      yield* spin(30)
      let late = false
      setImmediate(() => (late = true))
      yield* Endpoint.yieldIfBusy(10)
      // 30 ms of CPU since the last poll: the loop turned (its sockets polled, its immediates ran) first
      expect(late).toBe(true)
    }),
  )
})
