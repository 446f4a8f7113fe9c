import { randomUUID } from "node:crypto"
import { describe, expect, it, layer } from "@effect/vitest"
import { Spans } from "@ctxd/observe"
import { Effect, Either, Exit, Layer, Option, Scope } from "effect"
import { Endpoint, Json, NatsClient, Request } from "../src/index.ts"

const NATS_URL = process.env.NATS_URL ?? "nats://127.0.0.1:4222"
const uniqueRoot = () => `t_${randomUUID().replaceAll("-", "").slice(0, 16)}`

describe("Request", () => {
  it.scoped("a connection with an inbox prefix takes its replies under it (per-tenant NATS permissions)", () =>
    Effect.gen(function* () {
      const client = yield* NatsClient.make({ servers: [NATS_URL], inboxPrefix: "_INBOX_acme" })
      const subject = `${uniqueRoot()}.inbox`
      const replyTo: string[] = []
      const sub = client.connection.subscribe(subject, {
        callback: (_, msg) => {
          replyTo.push(msg.reply ?? "")
          msg.respond(Json.encode({ ok: true }))
        },
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => sub.unsubscribe()))
      yield* Effect.promise(() => client.connection.flush())
      const reply = yield* Request.request(subject, Json.encode({}), { timeoutMs: 5_000 }).pipe(
        Effect.provideService(NatsClient.NatsClient, client),
      )
      expect(Json.decode(reply.data)).toEqual(Either.right({ ok: true }))
      expect(replyTo).toHaveLength(1)
      expect(replyTo[0]).toMatch(/^_INBOX_acme\./)
    }),
  )

  layer(NatsClient.layer({ servers: [NATS_URL] }), { excludeTestServices: true })((it) => {
    it.effect("no responders maps to NoResponders", () =>
      Effect.gen(function* () {
        const subject = `${uniqueRoot()}.nobody`
        const error = yield* Effect.flip(Request.request(subject, Json.encode({}), { timeoutMs: 2_000 }))
        expect(error._tag).toBe("NoResponders")
        expect(error.subject).toBe(subject)
      }),
    )

    it.scoped("a subscriber that never answers maps to RequestTimedOut", () =>
      Effect.gen(function* () {
        const subject = `${uniqueRoot()}.silent`
        const { connection } = yield* NatsClient.NatsClient
        yield* Effect.acquireRelease(
          Effect.sync(() => connection.subscribe(subject, { callback: () => undefined })),
          (sub) => Effect.sync(() => sub.unsubscribe()),
        )
        yield* Effect.promise(() => connection.flush())
        const error = yield* Effect.flip(Request.request(subject, Json.encode({}), { timeoutMs: 200 }))
        expect(error._tag).toBe("RequestTimedOut")
      }),
    )

    it.scoped("inside a trace, a request carries traceparent and the endpoint's handler continues the trace", () =>
      Effect.gen(function* () {
        const subject = `${uniqueRoot()}.traced`
        yield* Endpoint.serve({
          subject,
          handler: ({ headers }) =>
            Effect.map(Effect.option(Effect.currentParentSpan), (parent) => ({
              traceparent: headers?.get("traceparent") ?? "",
              parent: Option.getOrUndefined(Option.map(parent, (p) => ({ traceId: p.traceId, spanId: p.spanId }))),
            })),
        })
        const [span, reply] = yield* Effect.zip(
          Effect.currentSpan,
          Request.request(subject, Json.encode({}), { timeoutMs: 2_000 }).pipe(
            Effect.map((msg) => msg.json<{ traceparent: string; parent?: { traceId: string; spanId: string } }>()),
          ),
        ).pipe(Spans.span("caller"))
        // the request is a client span of its own, child of the caller's
        expect(reply.traceparent).toMatch(new RegExp(`^00-${span.traceId}-[0-9a-f]{16}-01$`))
        expect(reply.parent?.traceId).toBe(span.traceId)
        expect(reply.parent?.spanId).toBe(reply.traceparent.split("-")[2])
        expect(reply.parent?.spanId).not.toBe(span.spanId)
        // outside a trace: no header, no parent
        const plain = yield* Request.request(subject, Json.encode({}), { timeoutMs: 2_000 }).pipe(
          Effect.map((msg) => msg.json<{ traceparent: string; parent?: unknown }>()),
        )
        expect(plain).toEqual({ traceparent: "" })
      }).pipe(Effect.withTracer(Spans.nativeRecorder)),
    )
  })

  it.live("a closed connection maps to ConnectionClosed", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(NatsClient.layer({ servers: [NATS_URL] }), scope)
      yield* Scope.close(scope, Exit.void)
      const error = yield* Effect.flip(
        Request.request(`${uniqueRoot()}.x`, Json.encode({}), { timeoutMs: 500 }).pipe(Effect.provide(context)),
      )
      expect(error._tag).toBe("ConnectionClosed")
    }),
  )

  it.live("an unreachable server fails the layer with NatsUnavailable", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(
        Layer.build(NatsClient.layer({ servers: ["nats://127.0.0.1:1"], connectTimeoutMs: 1_000 })).pipe(Effect.scoped),
      )
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain("NatsUnavailable")
    }),
  )

  it("Json.decode never throws", () => {
    expect(Either.isLeft(Json.decode(new TextEncoder().encode("{")))).toBe(true)
    expect(Either.isLeft(Json.decode(new Uint8Array()))).toBe(true)
    expect(Either.isLeft(Json.decode(new Uint8Array([0xc3])))).toBe(true)
    expect(Json.decode(Json.encode({ a: "é" }))).toEqual(Either.right({ a: "é" }))
    expect(Either.isLeft(Json.encodeEither(1n))).toBe(true)
    expect(Either.isLeft(Json.encodeEither(undefined))).toBe(true)
  })
})
