import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Queue, Stream } from "effect"
import * as SessionActor from "../src/SessionActor.ts"
import * as SessionState from "../src/SessionState.ts"

const limits = { maxSessions: 100, maxMessages: 10_000 }

/** A state with `n` messages. */
const stateWith = (n: number): SessionState.SessionState =>
  SessionState.advance(SessionState.empty("o200k_base"), {
    _tag: "Loaded",
    rows: Array.from({ length: n }, (_, i) => ({
      seq: i + 1,
      message: { role: "user" as const, parts: [{ type: "text" as const, text: `m${i}` }] },
      tokens: 1,
    })),
  })

describe("SessionActor", () => {
  it.scoped("runs a session's turns one at a time, in arrival order, even when they all wait", () =>
    Effect.gen(function* () {
      const cache = yield* SessionActor.make(limits)
      const key = SessionActor.key("acme", "s1")
      const gate = yield* Deferred.make<void>()
      const order: Array<number> = []
      let running = 0
      let most = 0
      const turn = (i: number) =>
        cache.withSession(key, (state) =>
          Effect.gen(function* () {
            running++
            most = Math.max(most, running)
            if (i === 0) yield* Deferred.await(gate)
            yield* Effect.yieldNow()
            order.push(i)
            running--
            return [i, state] as const
          }),
        )
      const fibers: Array<Fiber.RuntimeFiber<number, unknown>> = []
      for (let i = 0; i < 50; i++) {
        fibers.push(yield* Effect.fork(turn(i)))
        yield* Effect.yieldNow()
      }
      yield* Deferred.succeed(gate, undefined)
      yield* Effect.forEach(fibers, Fiber.join)
      expect(order).toEqual(Array.from({ length: 50 }, (_, i) => i))
      expect(most).toBe(1)
    }),
  )

  it.scoped("a full mailbox answers Busy at once; other sessions are not affected", () =>
    Effect.gen(function* () {
      const cache = yield* SessionActor.make({ ...limits, mailbox: 2 })
      const gate = yield* Deferred.make<void>()
      const hold = cache.withSession(SessionActor.key("acme", "s1"), (state) => Effect.as(Deferred.await(gate), ["held", state] as const))
      const quick = (session: string) =>
        cache.withSession(SessionActor.key("acme", session), (state) => Effect.succeed(["ok", state] as const))
      const first = yield* Effect.fork(hold)
      yield* Effect.yieldNow()
      const waiting = [yield* Effect.fork(quick("s1")), yield* Effect.fork(quick("s1"))]
      yield* Effect.yieldNow()
      const refused = yield* quick("s1").pipe(Effect.flip)
      expect(refused._tag).toBe("Busy")
      expect(cache.waiting()).toBe(2)
      expect(yield* quick("s2")).toBe("ok")
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(first)).toBe("held")
      for (const fiber of waiting) expect(yield* Fiber.join(fiber)).toBe("ok")
      expect(cache.waiting()).toBe(0)
    }),
  )

  it.scoped("an interrupted waiter leaves the queue without blocking the turns behind it", () =>
    Effect.gen(function* () {
      const cache = yield* SessionActor.make(limits)
      const key = SessionActor.key("acme", "s1")
      const gate = yield* Deferred.make<void>()
      const first = yield* Effect.fork(cache.withSession(key, (s) => Effect.as(Deferred.await(gate), [1, s] as const)))
      yield* Effect.yieldNow()
      const second = yield* Effect.fork(cache.withSession(key, (s) => Effect.succeed([2, s] as const)))
      const third = yield* Effect.fork(cache.withSession(key, (s) => Effect.succeed([3, s] as const)))
      yield* Effect.yieldNow()
      expect(cache.waiting()).toBe(2)
      yield* Fiber.interrupt(second)
      expect(cache.waiting()).toBe(1)
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(first)).toBe(1)
      expect(yield* Fiber.join(third)).toBe(3)
      expect(cache.waiting()).toBe(0)
      // and the session is free again
      expect(yield* cache.withSession(key, (s) => Effect.succeed([4, s] as const))).toBe(4)
    }),
  )

  it.scoped("keeps the state a turn returns, drops it when a turn fails, and counts messages", () =>
    Effect.gen(function* () {
      const cache = yield* SessionActor.make(limits)
      const key = SessionActor.key("acme", "s1")
      yield* cache.withSession(key, () => Effect.succeed([undefined, stateWith(3)] as const))
      expect(cache.size()).toEqual({ sessions: 1, messages: 3 })
      // a turn appends to the state in place and returns it
      yield* cache.withSession(key, (state) => {
        SessionState.advance(state!, { _tag: "Loaded", rows: [{ seq: 4, message: { role: "user", parts: [] }, tokens: 1 }] })
        return Effect.succeed([undefined, state] as const)
      })
      expect(cache.size()).toEqual({ sessions: 1, messages: 4 })
      yield* cache.withSession(key, () => Effect.fail("boom")).pipe(Effect.flip)
      expect(cache.size()).toEqual({ sessions: 1, messages: 0 })
      expect(yield* cache.withSession(key, (state) => Effect.succeed([state, state] as const))).toBeUndefined()
    }),
  )

  it.scoped("drops the sessions of a lost shard, also under a running turn", () =>
    Effect.gen(function* () {
      type Change = { readonly _tag: "Acquired" | "Lost"; readonly shard: number }
      // the changes the test sends, and a signal each time the cache asks for the next one: it has
      // handled every change before it (a queue keeps what is sent before the cache listens)
      const sent = yield* Queue.unbounded<Change>()
      const asked = yield* Queue.unbounded<void>()
      const changes = Stream.repeatEffect(Effect.zipRight(Queue.offer(asked, undefined), Queue.take(sent)))
      const shardOf = (_tenant: string, session: string) => Number(session.slice(1)) % 2
      const cache = yield* SessionActor.make(limits, { shardOf, changes })
      for (const s of ["s0", "s1", "s2", "s3"]) {
        yield* cache.withSession(SessionActor.key("acme", s), () => Effect.succeed([undefined, stateWith(2)] as const))
      }
      expect(cache.size()).toEqual({ sessions: 4, messages: 8 })
      const gate = yield* Deferred.make<void>()
      const started = yield* Deferred.make<void>()
      const running = yield* Effect.fork(
        cache.withSession(SessionActor.key("acme", "s4"), () =>
          Effect.zipRight(Deferred.succeed(started, undefined), Effect.as(Deferred.await(gate), [undefined, stateWith(5)] as const)),
        ),
      )
      yield* Deferred.await(started)
      yield* Queue.take(asked) // the cache waits for its first change
      yield* Queue.offer(sent, { _tag: "Lost", shard: 0 } satisfies Change)
      yield* Queue.take(asked) // ...and has handled it
      // s0 and s2 are gone; s4's turn finishes but does not store its state
      expect(cache.size()).toEqual({ sessions: 3, messages: 4 })
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(running)
      expect(cache.size()).toEqual({ sessions: 3, messages: 4 })
      const state = yield* cache.withSession(SessionActor.key("acme", "s4"), (s) => Effect.succeed([s, s] as const))
      expect(state).toBeUndefined()
    }),
  )
})
