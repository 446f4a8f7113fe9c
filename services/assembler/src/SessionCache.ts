/**
 * The worker's in-memory view of recently used sessions: the stored history
 * (for the encoding it was counted with), the tool call ids seen and
 * answered, and a per-session lock so one session's turns run one at a time
 * on this worker.
 *
 * Bounded: at most `maxSessions` sessions and `maxMessages` messages in all;
 * the least recently used sessions are evicted first. A cache entry is only a
 * speed-up: Postgres is the truth, and a stale entry is detected at commit
 * (the expected last sequence number no longer matches) and reloaded.
 */
import { type Assemble, Normalize, type Window } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import { LoopState } from "@ctxd/loop-detector"
import { Effect } from "effect"

export interface SessionState {
  /** Sequence number of the last stored message (0 for a new session). */
  lastSeq: number
  /** The token family `messages[].tokens` were counted in (see `Assembler`). */
  family: string
  messages: Array<Assemble.StoredMessage>
  /** Sum of `messages[].tokens`. */
  tokens: number
  /** Tool call ids made so far, and the ones answered with a result. */
  readonly callIds: Set<string>
  readonly answered: Set<string>
  /** Anchor and pinned positions of `messages`, so assembly scans only new messages. */
  landmarks: Window.Landmarks | undefined
  /** The loop detector's folded state over `messages`. */
  loop: LoopState.State
}

/** A state for a session with nothing loaded yet. */
export const emptyState = (family: string): SessionState => ({
  lastSeq: 0,
  family,
  messages: [],
  tokens: 0,
  callIds: new Set(),
  answered: new Set(),
  landmarks: undefined,
  loop: LoopState.initial(),
})

/** One stored message as `append` takes it. */
export interface Row {
  readonly seq: number
  readonly message: Conversation.Message
  readonly tokens: number
}

/** Appends stored rows (ascending seq) to `state` in place: history, token sum, pairing and loop state. */
export const append = (state: SessionState, rows: ReadonlyArray<Row>): SessionState => {
  if (rows.length === 0) return state
  const start = state.messages.length
  for (const row of rows) {
    state.messages.push(row)
    state.tokens += row.tokens
    Normalize.recordPairing(state.callIds, state.answered, row.message)
    state.lastSeq = row.seq
  }
  state.loop = LoopState.observe(
    state.loop,
    rows.map((r) => r.message),
    start,
  )
  return state
}

export interface SessionCache {
  /** Runs `f` holding the session's lock, with its cached state (or none). */
  readonly withSession: <A, E, R>(
    key: string,
    f: (state: SessionState | undefined) => Effect.Effect<readonly [A, SessionState | undefined], E, R>,
  ) => Effect.Effect<A, E, R>
  readonly size: () => { readonly sessions: number; readonly messages: number }
}

interface Entry {
  state: SessionState | undefined
  readonly lock: Effect.Semaphore
  users: number
}

/** Builds a cache holding at most `maxSessions` sessions and `maxMessages` messages. */
export const make = (options: { readonly maxSessions: number; readonly maxMessages: number }): Effect.Effect<SessionCache> =>
  Effect.sync(() => {
    // Map iteration order is insertion order: re-inserting on use makes it an LRU.
    const entries = new Map<string, Entry>()
    let messages = 0

    const evict = () => {
      for (const [key, entry] of entries) {
        if (entries.size <= options.maxSessions && messages <= options.maxMessages) return
        if (entry.users > 0) continue
        messages -= entry.state?.messages.length ?? 0
        entries.delete(key)
      }
    }

    const acquire = (key: string): Entry => {
      let entry = entries.get(key)
      if (entry === undefined) {
        entry = { state: undefined, lock: Effect.unsafeMakeSemaphore(1), users: 0 }
      } else {
        entries.delete(key)
      }
      entries.set(key, entry)
      entry.users++
      return entry
    }

    return {
      withSession: (key, f) =>
        Effect.suspend(() => {
          const entry = acquire(key)
          return entry.lock
            .withPermits(1)(
              Effect.suspend(() => f(entry.state)).pipe(
                Effect.map(([result, next]) => {
                  messages += (next?.messages.length ?? 0) - (entry.state?.messages.length ?? 0)
                  entry.state = next
                  return result
                }),
              ),
            )
            .pipe(
              Effect.ensuring(
                Effect.sync(() => {
                  entry.users--
                  evict()
                }),
              ),
            )
        }),
      size: () => ({ sessions: entries.size, messages }),
    }
  })
