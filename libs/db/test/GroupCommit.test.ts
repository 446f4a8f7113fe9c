import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import * as GroupCommit from "../src/internal/groupCommit.ts"

/**
 * A fake statement runner: every call is recorded, and waits until the test
 * releases it (`release(i)`: the i-th statement returns). `many` answers each
 * item with `ok:<item>`, or fails for a batch holding "bad"; `one` fails for
 * "bad" alone.
 */
const harness = (options: GroupCommit.Options, answer?: (items: ReadonlyArray<string>) => ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const calls: Array<{ readonly kind: "one" | "many"; readonly items: ReadonlyArray<string>; readonly gate: Deferred.Deferred<void> }> =
      []
    const gated = (kind: "one" | "many", items: ReadonlyArray<string>) =>
      Effect.flatMap(Deferred.make<void>(), (gate) => {
        calls.push({ kind, items, gate })
        return Deferred.await(gate)
      })
    const run: GroupCommit.Run<string, string, string> = {
      one: (item) => Effect.zipRight(gated("one", [item]), item === "bad" ? Effect.fail("refused bad") : Effect.succeed(`ok:${item}`)),
      many: (items) =>
        Effect.zipRight(
          gated("many", items),
          items.includes("bad") ? Effect.fail("batch rolled back") : Effect.succeed(answer?.(items) ?? items.map((i) => `ok:${i}`)),
        ),
    }
    const runtime = yield* Effect.runtime<never>()
    // what the observer was told: the items of each statement that went through, and the splits
    const observed = { committed: [] as Array<number>, splits: 0 }
    // the items waiting (queued or in a statement), as last reported
    const waiting = { now: 0 }
    const group = GroupCommit.make(options, run, runtime, {
      committed: (items) => void observed.committed.push(items),
      split: () => void observed.splits++,
      waiting: (items) => void (waiting.now = items),
    })
    const release = (i: number) => Deferred.succeed(calls[i]!.gate, undefined)
    /** Lets the fibers forked so far run up to their next wait. */
    const settle = Effect.repeatN(Effect.yieldNow(), 20)
    return { group, calls, release, settle, observed, waiting }
  })

describe("GroupCommit", () => {
  it("runs its options whole and each at least 1", () => {
    expect(GroupCommit.normalize({ maxBatch: 16, statements: 2 })).toEqual({ maxBatch: 16, statements: 2 })
    expect(GroupCommit.normalize({ maxBatch: 0, statements: -3 })).toEqual({ maxBatch: 1, statements: 1 })
    expect(GroupCommit.normalize({ maxBatch: 8.7, statements: 3 })).toEqual({ maxBatch: 8, statements: 3 })
  })

  it.effect("what arrives while a statement is in flight goes out together when it returns; alone, an item goes at once", () =>
    Effect.gen(function* () {
      const { group, calls, release, settle, observed, waiting } = yield* harness({ maxBatch: 16, statements: 1 })
      const a = yield* Effect.fork(group.submit("a"))
      yield* settle
      expect(calls.map((c) => [c.kind, c.items])).toEqual([["one", ["a"]]])
      expect(waiting.now).toBe(1)
      const rest = yield* Effect.fork(Effect.all(["b", "c", "d"].map(group.submit), { concurrency: "unbounded" }))
      yield* settle
      // b, c, d wait: one statement in flight
      expect(calls).toHaveLength(1)
      expect(waiting.now).toBe(4)
      yield* release(0)
      expect(yield* Fiber.join(a)).toBe("ok:a")
      yield* settle
      expect(calls.map((c) => [c.kind, c.items])).toEqual([
        ["one", ["a"]],
        ["many", ["b", "c", "d"]],
      ])
      expect(waiting.now).toBe(3)
      yield* release(1)
      expect(yield* Fiber.join(rest)).toEqual(["ok:b", "ok:c", "ok:d"])
      expect(observed).toEqual({ committed: [1, 3], splits: 0 })
      expect(waiting.now).toBe(0)
    }),
  )

  it.effect("a batch holds at most maxBatch items; `statements` of them run at once", () =>
    Effect.gen(function* () {
      const { group, calls, release, settle } = yield* harness({ maxBatch: 2, statements: 2 })
      const all = yield* Effect.fork(Effect.all(["a", "b", "c", "d", "e"].map(group.submit), { concurrency: "unbounded" }))
      yield* settle
      // two statements at once: a and b each alone (each found a free statement), the rest wait
      expect(calls.map((c) => c.items)).toEqual([["a"], ["b"]])
      yield* release(0)
      yield* settle
      expect(calls.map((c) => c.items)).toEqual([["a"], ["b"], ["c", "d"]])
      yield* release(1)
      yield* settle
      expect(calls.map((c) => c.items)).toEqual([["a"], ["b"], ["c", "d"], ["e"]])
      yield* release(2)
      yield* release(3)
      expect(yield* Fiber.join(all)).toEqual(["ok:a", "ok:b", "ok:c", "ok:d", "ok:e"])
    }),
  )

  it.effect("a batch that fails as a whole runs again item by item: each item gets its own outcome", () =>
    Effect.gen(function* () {
      const { group, calls, release, settle, observed } = yield* harness({ maxBatch: 16, statements: 1 })
      const first = yield* Effect.fork(group.submit("a"))
      yield* settle
      const fibers = yield* Effect.forEach(["b", "bad", "c"], (item) => Effect.fork(Effect.exit(group.submit(item))))
      yield* settle
      yield* release(0)
      yield* Fiber.join(first)
      yield* settle
      yield* release(1)
      yield* settle
      expect(calls.map((c) => [c.kind, c.items])).toEqual([
        ["one", ["a"]],
        ["many", ["b", "bad", "c"]],
        ["one", ["b"]],
        ["one", ["bad"]],
        ["one", ["c"]],
      ])
      // nothing else goes out until the three retries are back
      const late = yield* Effect.fork(group.submit("e"))
      yield* settle
      expect(calls).toHaveLength(5)
      yield* Effect.forEach([2, 3, 4], release)
      const exits = yield* Effect.forEach(fibers, Fiber.join)
      expect(exits).toEqual([Exit.succeed("ok:b"), Exit.fail("refused bad"), Exit.succeed("ok:c")])
      yield* settle
      expect(calls.at(-1)!.items).toEqual(["e"])
      yield* release(5)
      expect(yield* Fiber.join(late)).toBe("ok:e")
      // a, then b and c alone after the split, then e; bad and the batch never went through
      expect(observed).toEqual({ committed: [1, 1, 1, 1], splits: 1 })
    }),
  )

  it.effect("a batch answered with a row missing runs again item by item (no item gets another's outcome)", () =>
    Effect.gen(function* () {
      const { group, calls, release, settle } = yield* harness({ maxBatch: 16, statements: 1 }, (items) =>
        items.slice(1).map((i) => `ok:${i}`),
      )
      const first = yield* Effect.fork(group.submit("a"))
      yield* settle
      const rest = yield* Effect.fork(Effect.all(["b", "c"].map(group.submit), { concurrency: "unbounded" }))
      yield* settle
      yield* release(0)
      yield* Fiber.join(first)
      yield* settle
      yield* release(1)
      yield* settle
      yield* release(2)
      yield* release(3)
      expect(yield* Fiber.join(rest)).toEqual(["ok:b", "ok:c"])
      expect(calls.map((c) => [c.kind, c.items])).toEqual([
        ["one", ["a"]],
        ["many", ["b", "c"]],
        ["one", ["b"]],
        ["one", ["c"]],
      ])
    }),
  )

  it.effect("an item whose caller is interrupted while it waits is never sent", () =>
    Effect.gen(function* () {
      const { group, calls, release, settle, waiting } = yield* harness({ maxBatch: 16, statements: 1 })
      const first = yield* Effect.fork(group.submit("a"))
      yield* settle
      const gone = yield* Effect.fork(group.submit("gone"))
      const kept = yield* Effect.fork(group.submit("kept"))
      yield* settle
      expect(waiting.now).toBe(3)
      yield* Fiber.interrupt(gone)
      expect(waiting.now).toBe(2)
      yield* release(0)
      yield* Fiber.join(first)
      yield* settle
      expect(calls.map((c) => c.items)).toEqual([["a"], ["kept"]])
      yield* release(1)
      expect(yield* Fiber.join(kept)).toBe("ok:kept")
      expect(waiting.now).toBe(0)
    }),
  )

  it.effect("maxBatch 1 sends every item alone", () =>
    Effect.gen(function* () {
      const { group, calls, release, settle } = yield* harness({ maxBatch: 1, statements: 1 })
      const all = yield* Effect.fork(Effect.all(["a", "b", "c"].map(group.submit), { concurrency: "unbounded" }))
      for (let i = 0; i < 3; i++) {
        yield* settle
        yield* release(i)
      }
      expect(yield* Fiber.join(all)).toEqual(["ok:a", "ok:b", "ok:c"])
      expect(calls.map((c) => [c.kind, c.items])).toEqual([
        ["one", ["a"]],
        ["one", ["b"]],
        ["one", ["c"]],
      ])
    }),
  )
})
