/**
 * The tenants' agents' histories of session lengths as this worker knows
 * them, for the cache planner's expected remaining turns
 * (`@ctxd/context` `SessionLengths`): read from the `SessionLengthStore` as
 * one aggregate per tenant and agent, kept in a bounded LRU and read again
 * at most every `refreshMs` — not a round trip per turn.
 *
 * A turn never waits long for it. A stale histogram is served while one
 * background read refreshes it; only when nothing is known yet for the
 * tenant and agent does a turn wait for the read, alongside its other reads
 * (`Gather`), until the read has taken `waitMs` (the turns that come
 * meanwhile share that wait), and then goes on with the planner's rule of
 * thumb while the read lands for later turns. A read that fails or outlasts
 * `readTimeoutMs` is logged by its code (never content) and tried again
 * after `retryMs`; meanwhile the last histogram (or the rule) stands. At
 * most one read per tenant and agent is in flight; reads run in the
 * service's scope, so none outlives the worker.
 */
import { SessionLengths } from "@ctxd/context"
import { SessionLengthStore } from "@ctxd/db"
import { Lru } from "@ctxd/tokens"
import { Cause, Clock, Context, Deferred, Effect, Exit, FiberSet, Layer, Option, type Scope } from "effect"

/**
 * The defaults: a histogram is read again after 300 s (at most every 30 s
 * after a failed read); a turn waits at most 250 ms when nothing is known
 * yet; one read may take 5 s; 1,024 tenant/agent pairs are kept (LRU, each
 * a 145-bucket histogram).
 */
export const defaults = {
  refreshMs: 300_000,
  retryMs: 30_000,
  waitMs: 250,
  readTimeoutMs: 5_000,
  maxEntries: 1_024,
} as const

export type Config = { readonly [K in keyof typeof defaults]: number }

/** The port. */
export interface LengthHistoryService {
  /** The tenant's agent's histogram as known now (undefined: nothing known yet; use the rule of thumb). */
  readonly get: (tenant: string, agent: string) => Effect.Effect<SessionLengths.Histogram | undefined>
}

export class LengthHistory extends Context.Tag("@ctxd/assembler/LengthHistory")<LengthHistory, LengthHistoryService>() {}

interface Entry {
  histogram: SessionLengths.Histogram | undefined
  /** When to read again (ms, the Effect clock). */
  staleAt: number
  /** The read in flight: completes with the histogram known after it. */
  reading: Deferred.Deferred<SessionLengths.Histogram | undefined> | undefined
  /** When the read in flight started (ms). */
  readingSince: number
}

/** A failed read's code for the log: the error's tag (with the SQLSTATE), `Defect` or `Interrupted`; never a message, which could quote data. */
const codeOf = (cause: Cause.Cause<{ readonly _tag: string; readonly code?: string | undefined }>): string =>
  Option.match(Cause.failureOption(cause), {
    onNone: () => (Cause.isInterruptedOnly(cause) ? "Interrupted" : "Defect"),
    onSome: (error) => (error.code === undefined ? error._tag : `${error._tag}:${error.code}`),
  })

/** The cache over `store`'s reads, its reads owned by the current scope. */
export const make = (
  config: Partial<Config> = {},
): Effect.Effect<LengthHistoryService, never, SessionLengthStore.SessionLengthStore | Scope.Scope> =>
  Effect.gen(function* () {
    const { refreshMs, retryMs, waitMs, readTimeoutMs, maxEntries } = { ...defaults, ...config }
    const store = yield* SessionLengthStore.SessionLengthStore
    const reads = yield* FiberSet.make<void, never>()
    const entries = Lru.make<Entry>(maxEntries)

    /** Runs the entry's read in the background, owned by the service's scope; `done` completes when it lands (or fails). */
    const read = (entry: Entry, done: Deferred.Deferred<SessionLengths.Histogram | undefined>, tenant: string, agent: string) => {
      const landed = (histogram: SessionLengths.Histogram | undefined, nextInMs: number) =>
        Effect.flatMap(Clock.currentTimeMillis, (at) => {
          entry.histogram = histogram
          entry.staleAt = at + nextInMs
          entry.reading = undefined
          return Deferred.succeed(done, histogram)
        })
      return FiberSet.run(
        reads,
        store.counts(tenant, agent).pipe(
          Effect.timeout(readTimeoutMs),
          Effect.matchCauseEffect({
            onSuccess: (rows) => landed(SessionLengths.fromCounts(rows), refreshMs),
            onFailure: (cause) =>
              Effect.logWarning("session lengths unavailable; the cache planner uses its rule of thumb").pipe(
                Effect.annotateLogs({ code: codeOf(cause), tenant, agent }),
                Effect.zipRight(landed(entry.histogram, retryMs)),
              ),
          }),
          Effect.asVoid,
        ),
      )
    }

    const keyOf = (tenant: string, agent: string) => `${tenant}\u0000${agent}`
    /** Whether a read of the entry is due now (none running, and the histogram stale). */
    const due = (entry: Entry, now: number) => entry.reading === undefined && now >= entry.staleAt
    /** Whether the entry answers now: a histogram known, no read running, or the running one waited for long enough (waitMs). */
    const answersNow = (entry: Entry, now: number) =>
      entry.histogram !== undefined || entry.reading === undefined || entry.readingSince + waitMs - now <= 0

    const claim = (tenant: string, agent: string, now: number): Effect.Effect<SessionLengths.Histogram | undefined> =>
      // look up and claim the read in one synchronous step: no other fiber can start a second one
      Effect.fiberIdWith((fiberId) => {
        const key = keyOf(tenant, agent)
        let entry = entries.get(key)
        if (entry === undefined) {
          entry = { histogram: undefined, staleAt: now, reading: undefined, readingSince: now }
          entries.set(key, entry)
        }
        let started: Effect.Effect<unknown> = Effect.void
        if (due(entry, now)) {
          const done = Deferred.unsafeMake<SessionLengths.Histogram | undefined>(fiberId)
          entry.reading = done
          entry.readingSince = now
          started = read(entry, done, tenant, agent)
        }
        // nothing known yet: wait for the read until it has taken waitMs (turns that come meanwhile share that wait)
        const answer = answersNow(entry, now)
          ? Effect.succeed(entry.histogram)
          : Deferred.await(entry.reading!).pipe(
              Effect.timeoutTo({ duration: entry.readingSince + waitMs - now, onTimeout: () => undefined, onSuccess: (h) => h }),
            )
        return Effect.zipRight(started, answer)
      })

    // the clock of the scope that made the cache (a test's TestClock)
    const clock = yield* Effect.clock
    const get = (tenant: string, agent: string): Effect.Effect<SessionLengths.Histogram | undefined> => {
      // the usual turn: no read to start and an answer to give now — the answer as it is (no runtime step)
      const now = clock.unsafeCurrentTimeMillis()
      const entry = entries.get(keyOf(tenant, agent))
      if (entry !== undefined && !due(entry, now) && answersNow(entry, now)) return Exit.succeed(entry.histogram)
      return Effect.suspend(() => claim(tenant, agent, clock.unsafeCurrentTimeMillis()))
    }

    return { get }
  })

/** The cache over the `SessionLengthStore`, with `config` over {@link defaults}. */
export const layer = (config: Partial<Config> = {}): Layer.Layer<LengthHistory, never, SessionLengthStore.SessionLengthStore> =>
  Layer.scoped(LengthHistory, make(config))

/** No history: every turn uses the planner's rule of thumb. */
export const layerNone: Layer.Layer<LengthHistory> = Layer.succeed(LengthHistory, { get: () => Effect.succeed(undefined) })
