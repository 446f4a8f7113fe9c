/**
 * The worker's cache of the agents' histories of session lengths: one read
 * per tenant and agent per refresh period, stale values served while a
 * background read refreshes them, a bounded wait only when nothing is known,
 * failures logged by code and retried later, a bounded number of entries.
 */
import { SessionLengths } from "@ctxd/context"
import { Database, SessionLengthStore } from "@ctxd/db"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, HashMap, Layer, Logger, TestClock } from "effect"
import * as LengthHistory from "../src/LengthHistory.ts"

/** A store whose reads are counted and answered by `answer` (default: 25 sessions of 40 turns). */
const fakeStore = () => {
  const reads: Array<string> = []
  let answer: Effect.Effect<
    ReadonlyArray<SessionLengthStore.LengthCount>,
    Database.DatabaseError | Database.DatabaseUnavailable
  > = Effect.succeed([{ turns: 40, sessions: 25 }])
  const store: SessionLengthStore.SessionLengthStoreService = {
    counts: (tenant, agent) => Effect.suspend(() => (reads.push(`${tenant}/${agent}`), answer)),
    record: () => Effect.void,
  }
  return {
    reads,
    answerWith: (next: typeof answer) => void (answer = next),
    layer: Layer.succeed(SessionLengthStore.SessionLengthStore, store),
  }
}

const forty = SessionLengths.fromCounts([{ turns: 40, sessions: 25 }])

/** Log lines as `message {annotations}`. */
const capture = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ message, annotations }) => {
    const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
    lines.push(`${text} ${JSON.stringify(Object.fromEntries(HashMap.toEntries(annotations)))}`)
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

const history = (store: ReturnType<typeof fakeStore>, config: Partial<LengthHistory.Config> = {}) =>
  LengthHistory.make(config).pipe(Effect.provide(store.layer))

describe("LengthHistory", () => {
  it.scoped("reads once per refresh period; serves the stale histogram while one background read refreshes it", () =>
    Effect.gen(function* () {
      const store = fakeStore()
      const cache = yield* history(store)
      // nothing known yet: the first turns wait (briefly) for the one read
      const first = yield* Effect.all(
        Array.from({ length: 8 }, () => cache.get("acme", "coder")),
        { concurrency: "unbounded" },
      )
      expect(first).toEqual(Array.from({ length: 8 }, () => forty))
      yield* TestClock.adjust("299 seconds")
      expect(yield* cache.get("acme", "coder")).toEqual(forty)
      expect(store.reads).toEqual(["acme/coder"])
      // stale: served at once, one read for the turns that come meanwhile
      store.answerWith(Effect.succeed([{ turns: 7, sessions: 30 }]).pipe(Effect.delay("1 second")))
      yield* TestClock.adjust("1 second")
      expect(yield* Effect.all([cache.get("acme", "coder"), cache.get("acme", "coder")])).toEqual([forty, forty])
      yield* TestClock.adjust("1 second")
      expect(yield* cache.get("acme", "coder")).toEqual(SessionLengths.fromCounts([{ turns: 7, sessions: 30 }]))
      expect(store.reads).toHaveLength(2)
      // another agent of the tenant is its own entry
      store.answerWith(Effect.succeed([]))
      expect(yield* cache.get("acme", "reviewer")).toEqual(SessionLengths.empty)
      expect(store.reads).toEqual(["acme/coder", "acme/coder", "acme/reviewer"])
    }),
  )

  it.scoped("turns wait at most waitMs in all for a slow first read, which then lands for later turns", () =>
    Effect.gen(function* () {
      const store = fakeStore()
      store.answerWith(Effect.succeed([{ turns: 40, sessions: 25 }]).pipe(Effect.delay("2 seconds")))
      const cache = yield* history(store)
      const first = yield* Effect.fork(cache.get("acme", "coder"))
      yield* TestClock.adjust(100)
      const second = yield* Effect.fork(cache.get("acme", "coder"))
      // both give up when the read has taken waitMs (250 ms), the second after 150 ms of its own
      yield* TestClock.adjust(LengthHistory.defaults.waitMs - 100)
      expect(yield* Fiber.join(first)).toBeUndefined()
      expect(yield* Fiber.join(second)).toBeUndefined()
      // a turn that comes later does not wait for a read known to be slow
      expect(yield* cache.get("acme", "coder")).toBeUndefined()
      yield* TestClock.adjust("2 seconds")
      expect(yield* cache.get("acme", "coder")).toEqual(forty)
      expect(store.reads).toHaveLength(1)
    }),
  )

  it.scoped("a failed or hung read is logged by its code, keeps the last histogram, and is retried after retryMs", () =>
    Effect.gen(function* () {
      const logs = capture()
      const store = fakeStore()
      const cache = yield* history(store).pipe(Effect.provide(logs.layer))
      const get = cache.get("acme", "coder").pipe(Effect.provide(logs.layer))
      store.answerWith(Effect.fail(new Database.DatabaseError({ message: "boom near 'secret prompt text'", code: "57014" })))
      expect(yield* get).toBeUndefined()
      expect(logs.lines).toHaveLength(1)
      expect(logs.lines[0]).toContain('"code":"DatabaseError:57014"')
      expect(logs.lines[0]).toContain('"agent":"coder"')
      expect(logs.lines[0]).not.toContain("secret")
      // not read again before retryMs
      yield* TestClock.adjust("29 seconds")
      expect(yield* get).toBeUndefined()
      expect(store.reads).toHaveLength(1)
      store.answerWith(Effect.succeed([{ turns: 40, sessions: 25 }]))
      yield* TestClock.adjust("1 second")
      expect(yield* get).toEqual(forty)
      // once known, a failure keeps it; a read that hangs is cut at readTimeoutMs
      yield* TestClock.adjust("300 seconds")
      store.answerWith(Effect.never)
      expect(yield* get).toEqual(forty)
      yield* TestClock.adjust(LengthHistory.defaults.readTimeoutMs)
      expect(logs.lines[1]).toContain('"code":"TimeoutException"')
      expect(yield* get).toEqual(forty)
      expect(store.reads).toHaveLength(3)
    }),
  )

  it.scoped("keeps at most maxEntries tenant/agent pairs", () =>
    Effect.gen(function* () {
      const store = fakeStore()
      const cache = yield* history(store, { maxEntries: 2 })
      for (const agent of ["a", "b", "a", "c", "a", "b"]) yield* cache.get("acme", agent)
      // c drops b (a was used since); b again drops c (a was used after it)
      expect(store.reads).toEqual(["acme/a", "acme/b", "acme/c", "acme/b"])
    }),
  )

  it.effect("layerNone knows nothing: the rule of thumb", () =>
    Effect.gen(function* () {
      const none = yield* LengthHistory.LengthHistory
      expect(yield* none.get("acme", "coder")).toBeUndefined()
    }).pipe(Effect.provide(LengthHistory.layerNone)),
  )
})
