/**
 * The worker's session actors: for each recently used session, its
 * `SessionState` and a mailbox, so one session's turns run one at a time on
 * this worker, in arrival order (strict FIFO: the lock is handed from one
 * turn to the next, nobody can overtake a waiting turn).
 *
 * Bounded: at most `mailbox` turns of one session wait behind the running
 * one (more are refused with `Busy` at once); at most `maxSessions` sessions
 * and `maxMessages` messages are kept in all, the least recently used idle
 * sessions are evicted first. A cache entry is only a speed-up: Postgres is
 * the truth, and a stale entry is detected at commit (the expected last
 * sequence number no longer matches) and reloaded. A session's cached state
 * is dropped when one of its turns fails and when this worker loses the
 * session's shard, so a session is rehydrated from Postgres on its first
 * turn after it comes back.
 */
import { Errors } from "@ctxd/contracts"
import { FlowControl } from "@ctxd/nats"
import { Deferred, Effect, Exit, FiberId, type Scope, Stream } from "effect"
import type { SessionState } from "./SessionState.ts"

/** The cache key of a session (tenant and session ids cannot contain NUL). */
export const key = (tenant: string, session: string): string => `${tenant}\u0000${session}`

/** The tenant and session of a {@link key}. */
export const parseKey = (cacheKey: string): { readonly tenant: string; readonly session: string } => {
  const at = cacheKey.indexOf("\u0000")
  return { tenant: cacheKey.slice(0, at), session: cacheKey.slice(at + 1) }
}

/** Limits of the {@link SessionActors}. */
export interface Limits {
  /** Sessions kept in memory. */
  readonly maxSessions: number
  /** Messages kept in memory over all sessions. */
  readonly maxMessages: number
  /** Turns of one session that may wait behind the running one (as `FlowControl.derive` normalizes it); default 64. */
  readonly mailbox?: number | undefined
}

/** What the cache needs to know of shard ownership (a `ShardLeases` fits). */
export interface Shards {
  readonly shardOf: (tenant: string, session: string) => number
  /** Ownership changes; a `Lost` shard's sessions are dropped from the cache. */
  readonly changes: Stream.Stream<{ readonly _tag: "Acquired" | "Lost"; readonly shard: number }>
}

export interface SessionActors {
  /**
   * Runs `f` as the session's only running turn, with its cached state (or
   * none), after the turns that arrived before it; fails with `Busy` at once
   * when `mailbox` turns already wait. `f` returns the state to keep; when it
   * fails, the cached state is dropped.
   */
  readonly withSession: <A, E, R>(
    key: string,
    f: (state: SessionState | undefined) => Effect.Effect<readonly [A, SessionState | undefined], E, R>,
  ) => Effect.Effect<A, E | Errors.Busy, R>
  /** Drops the cached state of every session of `shard` (turns running keep theirs but do not store it). */
  readonly dropShard: (shard: number) => void
  readonly size: () => { readonly sessions: number; readonly messages: number }
  /** Turns waiting behind a running turn of their session, over all sessions (the mailboxes' depth). */
  readonly waiting: () => number
}

interface Entry {
  state: SessionState | undefined
  /** Messages of `state` counted in the cache's total. */
  counted: number
  /** The session's shard, when the cache knows about shards. */
  readonly shard: number | undefined
  /** A turn holds the session. */
  running: boolean
  /** Turns waiting for it, in arrival order. */
  readonly waiters: Array<Deferred.Deferred<void>>
  /** Turns holding or waiting for the session (the entry is not evicted while > 0). */
  users: number
  /** The state was dropped while a turn ran: that turn must not store it back. */
  dropped: boolean
}

/**
 * Builds a cache holding at most `maxSessions` sessions and `maxMessages`
 * messages. With `shards`, a session's state is dropped when its shard is
 * lost (the subscription lives as long as the scope).
 */
export const make = (limits: Limits, shards?: Shards): Effect.Effect<SessionActors, never, Scope.Scope> =>
  Effect.gen(function* () {
    const mailbox = FlowControl.derive(limits.mailbox === undefined ? {} : { mailbox: limits.mailbox }).mailbox
    // Map iteration order is insertion order: re-inserting on use makes it an LRU.
    const entries = new Map<string, Entry>()
    let messages = 0
    // turns in all the mailboxes (the sum of the entries' waiters)
    let queued = 0

    const forget = (entry: Entry) => {
      messages -= entry.counted
      entry.counted = 0
      entry.state = undefined
    }

    const keep = (entry: Entry, state: SessionState | undefined) => {
      const next = entry.dropped ? undefined : state
      entry.dropped = false
      const size = next?.messages.length ?? 0
      messages += size - entry.counted
      entry.counted = size
      entry.state = next
    }

    const evict = () => {
      for (const [k, entry] of entries) {
        if (entries.size <= limits.maxSessions && messages <= limits.maxMessages) return
        if (entry.users > 0) continue
        forget(entry)
        entries.delete(k)
      }
    }

    const acquire = (k: string): Entry => {
      let entry = entries.get(k)
      if (entry === undefined) {
        const ids = shards === undefined ? undefined : parseKey(k)
        entry = {
          state: undefined,
          counted: 0,
          shard: ids === undefined ? undefined : shards!.shardOf(ids.tenant, ids.session),
          running: false,
          waiters: [],
          users: 0,
          dropped: false,
        }
      } else {
        entries.delete(k)
      }
      entries.set(k, entry)
      entry.users++
      return entry
    }

    const release = (entry: Entry) => {
      entry.users--
      evict()
    }

    /** Hands the session to the next waiting turn, or frees it. */
    const unlock = (entry: Entry) => {
      const next = entry.waiters.shift()
      if (next === undefined) entry.running = false
      else {
        queued--
        Deferred.unsafeDone(next, Exit.void)
      }
    }

    const lock = (entry: Entry): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (!entry.running) {
          entry.running = true
          return Effect.void
        }
        const turn = Deferred.unsafeMake<void>(FiberId.none)
        entry.waiters.push(turn)
        queued++
        return Deferred.await(turn).pipe(
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              const at = entry.waiters.indexOf(turn)
              if (at >= 0) {
                entry.waiters.splice(at, 1)
                queued--
              }
              // handed the session as we were interrupted: pass it on
              else unlock(entry)
            }),
          ),
        )
      })

    const dropShard = (shard: number) => {
      for (const [k, entry] of entries) {
        if (entry.shard !== shard) continue
        forget(entry)
        if (entry.users > 0) entry.dropped = entry.running
        else entries.delete(k)
      }
    }

    if (shards !== undefined) {
      yield* shards.changes.pipe(
        Stream.runForEach((change) => (change._tag === "Lost" ? Effect.sync(() => dropShard(change.shard)) : Effect.void)),
        Effect.catchAllCause((cause) => Effect.logWarning("session actors: shard changes ended", cause)),
        Effect.forkScoped,
      )
    }

    const withSession: SessionActors["withSession"] = <A, E, R>(
      k: string,
      f: (state: SessionState | undefined) => Effect.Effect<readonly [A, SessionState | undefined], E, R>,
    ) =>
      Effect.suspend((): Effect.Effect<A, E | Errors.Busy, R> => {
        const entry = acquire(k)
        if (entry.running && entry.waiters.length >= mailbox) {
          release(entry)
          return Effect.fail(
            new Errors.Busy({
              message: `${entry.waiters.length} turns of this session are already waiting`,
              hint: "send a session's turns one at a time; retry with backoff",
            }),
          )
        }
        // in the uninterruptible region each step's exit is taken and the entry settled at once (fewer steps than `ensuring`)
        return Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(Effect.exit(restore(lock(entry))), (locked) => {
            if (Exit.isFailure(locked)) {
              release(entry)
              return Exit.failCause(locked.cause)
            }
            return Effect.flatMap(Effect.exit(restore(Effect.suspend(() => f(entry.state)))), (exit) => {
              // the state it left, or none after a failure: the next turn reads the store
              keep(entry, Exit.isSuccess(exit) ? exit.value[1] : undefined)
              unlock(entry)
              release(entry)
              return Exit.map(exit, ([result]) => result)
            })
          }),
        )
      })

    return { withSession, dropShard, size: () => ({ sessions: entries.size, messages }), waiting: () => queued }
  })
