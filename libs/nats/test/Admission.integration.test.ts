// Fair share of a worker's byte budget and turn slots per tenant: a tenant
// over its share is refused, the others are still admitted, and whatever
// happens to a request (answered, failed, interrupted) its tenant's counters
// go back to zero and the tenant leaves the map.
import { randomUUID } from "node:crypto"
import { describe, expect, it, layer } from "@effect/vitest"
import fc from "fast-check"
import { Deferred, Effect, Either, Exit, Fiber, Layer, Scope } from "effect"
import { Admission, Endpoint, Json, NatsClient, Request } from "../src/index.ts"

const NATS_URL = process.env.NATS_URL ?? "nats://127.0.0.1:4222"
const uniqueRoot = () => `t_${randomUUID().replaceAll("-", "").slice(0, 16)}`

describe("Admission: per-tenant share", () => {
  it("refuses the tenant over its byte share and still admits the others", () => {
    const budget = Admission.make(1_000, { maxBytes: 500 })
    expect(budget.tenantMaxBytes).toBe(500)
    expect(budget.tryAcquireFor("a", 300)).toBeUndefined()
    expect(budget.tryAcquireFor("a", 200)).toBeUndefined()
    expect(budget.tryAcquireFor("a", 1)).toBe("bytes")
    expect(budget.held("a")).toEqual({ bytes: 500, turns: 2 })
    expect(budget.tryAcquireFor("b", 400)).toBeUndefined()
    expect(budget.tryAcquireFor("b", 101)).toBe("bytes")
    // the worker's budget is spent: refused for the worker, not for c's share
    expect(budget.tryAcquireFor("c", 101)).toBe("worker")
    // a refusal takes nothing
    expect(budget.held("c")).toEqual({ bytes: 0, turns: 0 })
    expect(budget.held("b")).toEqual({ bytes: 400, turns: 1 })
    expect(budget.tenants()).toBe(2)
    expect(budget.tryAcquireFor("c", 100)).toBeUndefined()
    expect(budget.inFlightBytes()).toBe(1_000)
    budget.releaseFor("a", 300)
    expect(budget.tryAcquireFor("a", 300)).toBeUndefined()
  })

  it("a tenant with its own share is held to it; the others to the default", () => {
    const own: Record<string, Admission.Share> = { big: { maxTurns: 3, maxBytes: 900 }, small: { maxTurns: 1 } }
    const budget = Admission.make(1_000, { maxTurns: 2, maxBytes: 500 }, (tenant) => own[tenant])
    expect(budget.shareFor("big")).toEqual({ turns: 3, bytes: 900 })
    expect(budget.shareFor("other")).toEqual({ turns: 2, bytes: 500 })
    for (let i = 0; i < 3; i++) expect(budget.tryAcquireFor("big", 10)).toBeUndefined()
    expect(budget.tryAcquireFor("big", 10)).toBe("turns")
    expect(budget.tryAcquireFor("small", 10)).toBeUndefined()
    expect(budget.tryAcquireFor("small", 10)).toBe("turns")
    expect(budget.tryAcquireFor("other", 10)).toBeUndefined()
    expect(budget.tryAcquireFor("other", 10)).toBeUndefined()
    expect(budget.tryAcquireFor("other", 10)).toBe("turns")
    // bytes: an override's byte share is still capped by the worker's budget
    expect(Admission.make(1_000, {}, () => ({ maxBytes: 5_000 })).shareFor("x").bytes).toBe(1_000)
  })

  it("one request larger than the tenant's share passes when the tenant holds nothing", () => {
    const budget = Admission.make(10_000, { maxBytes: 100 })
    expect(budget.tryAcquireFor("a", 5_000)).toBeUndefined()
    expect(budget.tryAcquireFor("a", 1)).toBe("bytes")
    expect(budget.tryAcquireFor("b", 5_000)).toBeUndefined()
    budget.releaseFor("a", 5_000)
    expect(budget.tryAcquireFor("a", 50)).toBeUndefined()
  })

  it("refuses the tenant at its share of turns in flight and still admits the others", () => {
    const budget = Admission.make(1_000, { maxTurns: 2 })
    expect(budget.tryAcquireFor("a", 1)).toBeUndefined()
    expect(budget.tryAcquireFor("a", 1)).toBeUndefined()
    expect(budget.tryAcquireFor("a", 1)).toBe("turns")
    expect(budget.tryAcquireFor("b", 1)).toBeUndefined()
    expect(budget.held("a")).toEqual({ bytes: 2, turns: 2 })
    budget.releaseFor("a", 1)
    expect(budget.tryAcquireFor("a", 1)).toBeUndefined()
    expect(budget.inFlightBytes()).toBe(3)
  })

  it("forgets a tenant once it holds nothing (bounded map)", () => {
    const budget = Admission.make(1_000, { maxBytes: 500, maxTurns: 2 })
    for (let i = 0; i < 1_000; i++) {
      const tenant = `t${i}`
      expect(budget.tryAcquireFor(tenant, 10)).toBeUndefined()
      expect(budget.tryAcquireFor(tenant, 20)).toBeUndefined()
      budget.releaseFor(tenant, 10)
      expect(budget.tenants()).toBe(1)
      budget.releaseFor(tenant, 20)
      expect(budget.tenants()).toBe(0)
    }
    // a refused request leaves nothing behind either
    expect(budget.tryAcquireFor("x", 1)).toBeUndefined()
    expect(budget.tryAcquireFor("x", 1)).toBeUndefined()
    expect(budget.tryAcquireFor("x", 1)).toBe("turns")
    budget.releaseFor("x", 1)
    budget.releaseFor("x", 1)
    expect(budget.tenants()).toBe(0)
    expect(budget.inFlightBytes()).toBe(0)
    expect(budget.held("x")).toEqual({ bytes: 0, turns: 0 })
  })

  it("no share: tenants are only bounded by the worker's budget", () => {
    const budget = Admission.make(1_000)
    expect(budget.tenantMaxBytes).toBe(1_000)
    expect(budget.tenantMaxTurns).toBe(Number.POSITIVE_INFINITY)
    expect(budget.tryAcquireFor("a", 1_000)).toBeUndefined()
    expect(budget.tryAcquireFor("b", 1)).toBe("worker")
    budget.releaseFor("a", 1_000)
    for (let i = 0; i < 100; i++) expect(budget.tryAcquireFor("a", 1)).toBeUndefined()
  })

  it("property: any interleaving keeps every tenant within its share and leaks nothing once all is released", () => {
    type Op = { readonly tenant: number; readonly bytes: number; readonly releaseOne: number }
    const op = fc.record({
      tenant: fc.integer({ min: 0, max: 4 }),
      bytes: fc.integer({ min: 1, max: 400 }),
      releaseOne: fc.integer({ min: -1, max: 30 }),
    })
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops: ReadonlyArray<Op>) => {
        const budget = Admission.make(1_000, { maxBytes: 300, maxTurns: 2 })
        const held: Array<{ tenant: string; bytes: number }> = []
        for (const o of ops) {
          const tenant = `t${o.tenant}`
          const before = budget.held(tenant)
          const refusal = budget.tryAcquireFor(tenant, o.bytes)
          if (refusal === undefined) held.push({ tenant, bytes: o.bytes })
          else expect(budget.held(tenant)).toEqual(before)
          // refused for its share only when it is over it
          if (refusal === "turns") expect(before.turns).toBe(2)
          if (refusal === "bytes") expect(before.bytes > 0 && before.bytes + o.bytes > 300).toBe(true)
          const after = budget.held(tenant)
          expect(after.turns).toBe(held.filter((h) => h.tenant === tenant).length)
          // within the share, but for one request alone (larger than the share)
          expect(after.bytes <= 300 || after.turns === 1).toBe(true)
          expect(after.turns).toBeLessThanOrEqual(2)
          expect(budget.inFlightBytes()).toBeLessThanOrEqual(1_000)
          if (o.releaseOne >= 0 && o.releaseOne < held.length) {
            const [h] = held.splice(o.releaseOne, 1)
            budget.releaseFor(h!.tenant, h!.bytes)
          }
        }
        for (const h of held) budget.releaseFor(h.tenant, h.bytes)
        expect(budget.inFlightBytes()).toBe(0)
        expect(budget.tenants()).toBe(0)
      }),
      { numRuns: 300 },
    )
  })
})

const call = (subject: string, value: unknown, timeoutMs = 5_000) =>
  Request.request(subject, Json.encode(value), { timeoutMs }).pipe(Effect.map((msg) => Either.getOrThrow(Json.decode(msg.data))))

describe("Endpoint with tenantOf: bytes held against the tenant's share", () => {
  const budget = Admission.make(100_000, { maxBytes: 1_000 })
  const layers = Layer.merge(
    NatsClient.layer({ servers: [NATS_URL], name: "ctxd-admission-test" }),
    Layer.succeed(Admission.Admission, budget),
  )
  layer(layers, { excludeTestServices: true })((it) => {
    const tenantOf = (subject: string) => subject.split(".").at(-1)

    it.scoped("a tenant over its share gets Busy, another is served; success, defect and interruption release the bytes", () =>
      Effect.gen(function* () {
        const root = uniqueRoot()
        const gate = yield* Deferred.make<void>()
        const started = yield* Deferred.make<void>()
        const scope = yield* Scope.make()
        // handlers by payload: "wait" holds until the gate opens, "die" dies, "stuck" never ends
        yield* Endpoint.serve({
          subject: `${root}.>`,
          tenantOf,
          drainTimeoutMs: 100,
          handler: ({ data }) => {
            const what = (Either.getOrThrow(Json.decode(data)) as { what: string }).what
            if (what === "wait") return Deferred.await(gate).pipe(Effect.as({ ok: true }))
            if (what === "die") return Effect.die("boom")
            if (what === "stuck") return Deferred.succeed(started, undefined).pipe(Effect.zipRight(Effect.never))
            return Effect.succeed({ ok: true })
          },
        }).pipe(Scope.extend(scope))
        const big = { what: "wait", pad: "x".repeat(700) }
        const first = yield* Effect.fork(call(`${root}.a`, big))
        yield* Effect.sleep("10 millis").pipe(Effect.repeat({ until: () => budget.held("a").bytes > 0 }))
        const refused = yield* call(`${root}.a`, big)
        expect(refused).toMatchObject({ ok: false, error: { code: "Busy", hint: "retry with backoff" } })
        expect((refused as { error: { message: string } }).error.message).toContain("tenant a")
        // b is not affected by a's share
        expect(yield* call(`${root}.b`, { what: "now", pad: "x".repeat(700) })).toEqual({ ok: true })
        yield* Deferred.succeed(gate, undefined)
        expect(yield* Fiber.join(first)).toEqual({ ok: true })
        // a defect is answered Internal and releases too
        expect(yield* call(`${root}.a`, { what: "die" })).toMatchObject({ ok: false, error: { code: "Internal" } })
        expect(budget.held("a")).toEqual({ bytes: 0, turns: 0 })
        // interrupted at shutdown: answered Unavailable, released
        const stuck = yield* Effect.fork(call(`${root}.a`, { what: "stuck" }))
        yield* Deferred.await(started)
        expect(budget.held("a").bytes).toBeGreaterThan(0)
        yield* Scope.close(scope, Exit.void)
        expect(yield* Fiber.join(stuck)).toMatchObject({ ok: false, error: { code: "Unavailable" } })
        expect(budget.inFlightBytes()).toBe(0)
        expect(budget.tenants()).toBe(0)
      }),
    )
  })
})
