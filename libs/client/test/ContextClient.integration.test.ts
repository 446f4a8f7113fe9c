import { randomUUID } from "node:crypto"
import { type Errors, type Health, Subjects, type Turn } from "@ctxd/contracts"
import { Endpoint, Json, NatsClient } from "@ctxd/nats"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Fiber, Layer } from "effect"
import { ClientError, ContextClient } from "../src/index.ts"

const NATS_URL = process.env.NATS_URL ?? "nats://127.0.0.1:4222"
const uniqueRoot = () => `t_${randomUUID().replaceAll("-", "").slice(0, 16)}`

const request: ContextClient.TurnInput = {
  format: "openai",
  model: { provider: "openai", name: "gpt-4o" },
  messages: [{ role: "user", content: "hello" }],
}

const okReply = (turnId: string): Turn.TurnReply => ({
  ok: true,
  turnId,
  request: { model: "gpt-4o", messages: [{ role: "user", content: "hello" }] },
  report: {
    format: "openai",
    model: { provider: "openai", name: "gpt-4o", contextWindow: 128_000, maxOutputTokens: 16_384, effectiveWindow: 111_616 },
    tokens: { system: 0, tools: 0, memory: 0, history: 8, fullHistory: 8, total: 8, budget: 111_616 },
    utilization: 8 / 111_616,
    messages: {
      stored: 1,
      window: 1,
      sent: 1,
      droppedByWindow: 0,
      droppedByBudget: 0,
      anchorSeq: 0,
      firstSentSeq: 0,
      lastSentSeq: 0,
    },
    orphans: { calls: 0, results: 0 },
    overBudget: false,
    counter: { backend: "local", encoding: "o200k_base", exact: false, calibration: 1 },
    cache: { breakpoints: 0, promptCacheKey: null },
  },
})

const errorReply = (code: Errors.ErrorCode, message: string): Errors.ErrorReply => ({
  ok: false,
  error: { code, message, path: "messages[0]", hint: "fix it" },
})

/** A fake worker: answers turns with `script(turnId, attempt)`, records the turnIds it saw. */
const fakeWorker = (root: string, script: (turnId: string, attempt: number) => unknown) =>
  Effect.gen(function* () {
    const seen: Array<string> = []
    yield* Endpoint.serve({
      subject: `${root}.v1.turn.>`,
      handler: ({ data }) =>
        Effect.sync(() => {
          const body = Either.getOrThrow(Json.decode(data)) as { turnId: string }
          seen.push(body.turnId)
          return script(body.turnId, seen.length)
        }),
    })
    return seen
  })

const client = ContextClient.make

describe("ContextClient", () => {
  layer(NatsClient.layer({ servers: [NATS_URL], name: "ctxd-client-test" }), { excludeTestServices: true })((it) => {
    it.scoped("decodes a success reply", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        const seen = yield* fakeWorker(root, (turnId) => okReply(turnId))
        const c = yield* client({ root })
        const reply = yield* c.turn("acme", "s-1", { ...request, turnId: "turn-1" })
        expect(reply.turnId).toBe("turn-1")
        expect(reply.report.tokens.total).toBe(8)
        expect(seen).toEqual(["turn-1"])
      }),
    )

    it.scoped("an error reply becomes a ClientError with the wire code, not retried", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        const seen = yield* fakeWorker(root, () => errorReply("BadRequest", "messages[0] is wrong"))
        const c = yield* client({ root })
        const error = yield* Effect.flip(c.turn("acme", "s-1", request))
        expect(error).toBeInstanceOf(ClientError.ClientError)
        expect(error).toMatchObject({ code: "BadRequest", message: "messages[0] is wrong", path: "messages[0]", hint: "fix it" })
        expect(error.retryable).toBe(false)
        expect(seen).toHaveLength(1)
      }),
    )

    it.scoped("retries on no responders until a worker appears", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        const c = yield* client({ root, retryForMs: 5_000 })
        const pending = yield* Effect.fork(c.turn("acme", "s-1", request))
        yield* Effect.sleep("300 millis")
        const seen = yield* fakeWorker(root, (turnId) => okReply(turnId))
        const reply = yield* Fiber.join(pending)
        expect(seen).toEqual([reply.turnId])
      }),
    )

    it.scoped("gives up after retryForMs", () =>
      Effect.gen(function* () {
        const c = yield* client({ root: uniqueRoot(), retryForMs: 500 })
        const started = Date.now()
        const error = yield* Effect.flip(c.turn("acme", "s-1", request))
        const elapsed = Date.now() - started
        expect(error.code).toBe("Unavailable")
        expect(error.retryable).toBe(true)
        expect(elapsed).toBeGreaterThanOrEqual(450)
        expect(elapsed).toBeLessThan(2_000)
      }),
    )

    it.scoped("generates a turnId when absent and reuses it across retries", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        const seen = yield* fakeWorker(root, (turnId, attempt) =>
          attempt === 1 ? errorReply("Busy", "busy") : attempt === 2 ? errorReply("NotOwner", "moved") : okReply(turnId),
        )
        const c = yield* client({ root })
        const reply = yield* c.turn("acme", "s-1", request)
        expect(seen).toHaveLength(3)
        expect(new Set(seen).size).toBe(1)
        expect(reply.turnId).toBe(seen[0])
        expect(reply.turnId).toMatch(/^[0-9a-f-]{36}$/)
      }),
    )

    it.scoped("sends a session's next turns to the worker that answered, and back to the shared subject when it moved", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        const direct = `${root}.v1.worker.w1`
        const shared: Array<string> = []
        const owner: Array<string> = []
        let moved = false
        const turnIdOf = (data: Uint8Array) => (Either.getOrThrow(Json.decode(data)) as { turnId: string }).turnId
        yield* Endpoint.serve({
          subject: `${root}.v1.turn.>`,
          handler: ({ data }) =>
            Effect.sync(() => {
              shared.push(turnIdOf(data))
              return Endpoint.reply({ value: okReply(turnIdOf(data)), headers: { [Subjects.DIRECT_HEADER]: direct } })
            }),
        })
        yield* Endpoint.serve({
          subject: `${direct}.turn.>`,
          handler: ({ subject, data }) =>
            Effect.sync(() => {
              owner.push(`${subject.slice(direct.length)} ${turnIdOf(data)}`)
              return moved ? errorReply("NotOwner", "moved") : okReply(turnIdOf(data))
            }),
        })
        const c = yield* client({ root })
        yield* c.turn("acme", "s-1", { ...request, turnId: "t1" })
        yield* c.turn("acme", "s-1", { ...request, turnId: "t2" })
        yield* c.turn("acme", "s-2", { ...request, turnId: "u1" })
        expect(shared).toEqual(["t1", "u1"])
        expect(owner).toEqual([".turn.acme.s-1 t2"])
        moved = true
        yield* c.turn("acme", "s-1", { ...request, turnId: "t3" })
        expect(owner).toEqual([".turn.acme.s-1 t2", ".turn.acme.s-1 t3"])
        expect(shared).toEqual(["t1", "u1", "t3"])
        // direct routing off: always the shared subject
        const plain = yield* client({ root, direct: false })
        moved = false
        yield* plain.turn("acme", "s-1", { ...request, turnId: "t4" })
        yield* plain.turn("acme", "s-1", { ...request, turnId: "t5" })
        expect(shared).toEqual(["t1", "u1", "t3", "t4", "t5"])
      }),
    )

    it.scoped("refuses an oversize request before sending it", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        const seen = yield* fakeWorker(root, (turnId) => okReply(turnId))
        const c = yield* client({ root, maxPayload: 1_000 })
        const big: ContextClient.TurnInput = { ...request, messages: [{ role: "user", content: "x".repeat(2_000) }] }
        const error = yield* Effect.flip(c.turn("acme", "s-1", big))
        expect(error.code).toBe("TooLarge")
        expect(error.hint).toContain("max_payload")
        expect(seen).toHaveLength(0)
        // the server's own max_payload (1 MiB here) applies without a configured limit
        const unlimited = yield* client({ root })
        const huge: ContextClient.TurnInput = { ...request, messages: [{ role: "user", content: "x".repeat(2 << 20) }] }
        expect((yield* Effect.flip(unlimited.turn("acme", "s-1", huge))).code).toBe("TooLarge")
        expect(seen).toHaveLength(0)
      }),
    )

    it.scoped("bad tenant or session tokens are refused locally", () =>
      Effect.gen(function* () {
        const c = yield* client({ root: uniqueRoot(), retryForMs: 0 })
        expect((yield* Effect.flip(c.turn("ac.me", "s-1", request))).code).toBe("BadRequest")
        expect((yield* Effect.flip(c.turn("acme", "", request))).code).toBe("BadRequest")
      }),
    )

    it.scoped("a malformed reply is an Internal error", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        yield* fakeWorker(root, () => ({ ok: true, turnId: "nope" }))
        const c = yield* client({ root })
        const error = yield* Effect.flip(c.turn("acme", "s-1", request))
        expect(error.code).toBe("Internal")
        expect(error.message).toContain("malformed reply")
      }),
    )

    it.scoped("health asks the health subject", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        const health: Health.HealthReply = {
          ok: true,
          worker: "w1",
          version: "0.1.0",
          uptimeMs: 5,
          inFlight: 0,
          postgres: true,
          draining: false,
        }
        yield* Endpoint.serve({ subject: `${root}.v1.health`, handler: () => Effect.succeed(health) })
        const c = yield* client({ root })
        expect(yield* c.health()).toEqual(health)
      }),
    )

    it.scoped("the layer provides the service", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        yield* fakeWorker(root, (turnId) => okReply(turnId))
        const nats = yield* NatsClient.NatsClient
        const reply = yield* Effect.flatMap(ContextClient.ContextClient, (c) => c.turn("acme", "s-2", request)).pipe(
          Effect.provide(ContextClient.layer({ root }).pipe(Layer.provide(Layer.succeed(NatsClient.NatsClient, nats)))),
        )
        expect(reply.ok).toBe(true)
      }),
    )

    it.scoped("the Promise facade", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        yield* fakeWorker(root, (turnId, attempt) => (attempt === 1 ? okReply(turnId) : errorReply("Conflict", "no")))
        const facade = yield* Effect.promise(() => ContextClient.connect({ servers: NATS_URL, root }))
        const reply = yield* Effect.promise(() => facade.turn("acme", "s-1", request))
        expect(reply.ok).toBe(true)
        const error = yield* Effect.promise(() =>
          facade.turn("acme", "s-1", request).then(
            () => undefined,
            (e: unknown) => e,
          ),
        )
        expect(error).toBeInstanceOf(ClientError.ClientError)
        expect((error as ClientError.ClientError).code).toBe("Conflict")
        yield* Effect.promise(() => facade.close())
      }),
    )

    it.effect("the Promise facade rejects with NatsUnavailable when NATS is unreachable", () =>
      Effect.gen(function* () {
        const error = yield* Effect.promise(() =>
          ContextClient.connect({ servers: "nats://127.0.0.1:1" }).then(
            () => undefined,
            (e: unknown) => e,
          ),
        )
        expect(error).toBeInstanceOf(NatsClient.NatsUnavailable)
      }),
    )
  })
})
