// The turn routing's fair share: a turn handled here counts against its
// tenant's turns in flight from its arrival to its reply; a tenant at its
// share is answered Busy while the others run, and the count goes back to
// zero whether the turn succeeded, failed or was interrupted.
import { Errors } from "@ctxd/contracts"
import { Admission, type Endpoint, NatsClient } from "@ctxd/nats"
import { ShardLeases } from "@ctxd/sharding"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option } from "effect"
import { Assembler } from "../src/Assembler.ts"
import * as Routing from "../src/Routing.ts"

/** A worker owning every shard; turns behave by their payload: "wait" (until `gate`), "fail", "hang" (forever), else ok. */
const setup = (admission: Admission.AdmissionService, gate: Deferred.Deferred<void>) => {
  const decoder = new TextDecoder()
  const turn = (_tenant: string, _session: string, data: Uint8Array) => {
    const what = decoder.decode(data)
    if (what === "wait") return Deferred.await(gate).pipe(Effect.as({ ok: true }))
    if (what === "fail") return Effect.fail(new Errors.BadRequest({ message: "bad" }))
    if (what === "hang") return Effect.never
    return Effect.succeed({ ok: true })
  }
  const leases = {
    self: { id: "w1", address: "t.v1.worker.w1" },
    shards: 1,
    shardOf: () => 0,
    isOwner: () => Effect.succeed(true),
    owner: () => Effect.succeed(Option.none()),
    refreshSoon: Effect.void,
    unreachable: () => Effect.succeed(false),
  } as unknown as ShardLeases.ShardLeasesService
  return Layer.mergeAll(
    Layer.succeed(Assembler, { turn, invalidateKnowledge: () => Effect.void, mailboxDepth: () => 0 } as unknown as Assembler),
    Layer.succeed(ShardLeases.ShardLeases, leases),
    Layer.succeed(Admission.Admission, admission),
    Layer.succeed(NatsClient.NatsClient, {} as never),
  )
}

const encode = (text: string) => new TextEncoder().encode(text)
const valueOf = (reply: Endpoint.Reply) => reply.value as { ok: boolean; error?: { code: string; message: string } }

describe("Routing: turns in flight per tenant", () => {
  it.scoped("a tenant at its share gets Busy, another tenant runs; success, failure and interruption release", () =>
    Effect.gen(function* () {
      const admission = Admission.make(1_000_000, { maxTurns: 2 })
      const gate = yield* Deferred.make<void>()
      const test = Effect.gen(function* () {
        const routing = yield* Routing.make({ forwardTimeoutMs: 1_000, maxTurns: 4 })
        const send = (tenant: string, what: string) => routing.shared({ tenant, session: "s" }, encode(what), false)
        const a1 = yield* Effect.fork(send("a", "wait"))
        const a2 = yield* Effect.fork(send("a", "wait"))
        yield* Effect.sleep("5 millis").pipe(Effect.repeat({ until: () => admission.held("a").turns === 2 }))
        const refused = valueOf(yield* send("a", "now"))
        expect(refused).toMatchObject({ ok: false, error: { code: "Busy" } })
        expect(refused.error!.message).toContain("tenant a")
        expect(valueOf(yield* send("b", "now"))).toEqual({ ok: true })
        yield* Deferred.succeed(gate, undefined)
        expect(valueOf(yield* Fiber.join(a1))).toEqual({ ok: true })
        expect(valueOf(yield* Fiber.join(a2))).toEqual({ ok: true })
        expect(admission.tenants()).toBe(0)
        // a failed turn releases
        expect(valueOf(yield* send("a", "fail"))).toMatchObject({ ok: false, error: { code: "BadRequest" } })
        expect(admission.held("a")).toEqual({ bytes: 0, turns: 0 })
        // an interrupted one (a request timing out at shutdown) too
        const hung = yield* Effect.fork(send("a", "hang"))
        yield* Effect.sleep("5 millis").pipe(Effect.repeat({ until: () => admission.held("a").turns === 1 }))
        yield* Fiber.interrupt(hung)
        expect(admission.tenants()).toBe(0)
        // and the tenant has its whole share again
        expect(valueOf(yield* send("a", "now"))).toEqual({ ok: true })
        expect(routing.handled()).toBe(7)
      })
      yield* test.pipe(Effect.provide(setup(admission, gate)))
    }),
  )

  it.scoped("without a share (no Admission in context or 100 %), a tenant is not limited", () =>
    Effect.gen(function* () {
      const admission = Admission.make(1_000_000)
      const gate = yield* Deferred.make<void>()
      const test = Effect.gen(function* () {
        const routing = yield* Routing.make({ forwardTimeoutMs: 1_000, maxTurns: 4 })
        const fibers = yield* Effect.forEach(Array.from({ length: 6 }), () =>
          Effect.fork(routing.shared({ tenant: "a", session: "s" }, encode("wait"), false)),
        )
        yield* Effect.sleep("5 millis").pipe(Effect.repeat({ until: () => admission.held("a").turns === 6 }))
        yield* Deferred.succeed(gate, undefined)
        for (const fiber of fibers) expect(valueOf(yield* Fiber.join(fiber))).toEqual({ ok: true })
        expect(admission.tenants()).toBe(0)
      })
      yield* test.pipe(Effect.provide(setup(admission, gate)))
    }),
  )
})
