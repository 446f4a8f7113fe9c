/**
 * Each tenant's agents' history of session lengths (`ctxd_session_lengths`,
 * migration 7): one row per session with its agent and its turns (assistant
 * messages stored) as of the last commit that recorded them — sessions still
 * running count at their length so far. (The worker records when the length
 * moves to another bucket of the histogram or the agent changes:
 * `SessionState.recordsLength` in the assembler.) The assembler turns {@link SessionLengthStoreService.counts}
 * into the cache planner's expected remaining turns (`@ctxd/context`
 * `SessionLengths`).
 *
 * The worker records a length inside its commit (`SessionStore.commitTurn`
 * with `length`, the same statement and transaction, no extra round trip);
 * {@link SessionLengthStoreService.record} is the same upsert on its own. A count
 * is only ever raised, and a session's agent is the latest one recorded.
 *
 * A port: {@link layer} (Postgres) and {@link layerMemory} (tests, in-process).
 */
import { Context, Effect, Layer } from "effect"
import { Database, type DatabaseError, type DatabaseUnavailable } from "./Database.ts"
import { logFailure } from "./internal/logFailure.ts"

type Failure = DatabaseUnavailable | DatabaseError

/**
 * The defaults: the histogram is read over the tenant's agent's 10,000 most
 * recently created sessions (bounds the read and follows changes in use);
 * the memory store keeps 100,000 sessions (the oldest created go first).
 */
export const defaults = {
  sessions: 10_000,
  memorySessions: 100_000,
} as const

/** Sessions of one length. */
export interface LengthCount {
  readonly turns: number
  readonly sessions: number
}

/** The port. */
export interface SessionLengthStoreService {
  /**
   * The lengths of the tenant's agent's most recently created sessions (at
   * most `sessions`, default {@link defaults}), one row per distinct length.
   */
  readonly counts: (tenant: string, agent: string) => Effect.Effect<ReadonlyArray<LengthCount>, Failure>
  /** Records that the stored session has had `turns` turns, under `agent` (an unknown session: nothing). */
  readonly record: (tenant: string, session: string, agent: string, turns: number) => Effect.Effect<void, Failure>
}

export class SessionLengthStore extends Context.Tag("@ctxd/db/SessionLengthStore")<SessionLengthStore, SessionLengthStoreService>() {}

/** Options of {@link make} and {@link layerMemory}. */
export interface Options {
  /** Sessions the histogram is read over (the most recently created). */
  readonly sessions?: number | undefined
}

const COUNTS = `
  SELECT turns, count(*)::integer AS sessions
  FROM (
    SELECT l.turns FROM ctxd_session_lengths l
    WHERE l.tenant = $1 AND l.agent = $2
    ORDER BY l.session_id DESC
    LIMIT $3
  ) recent
  GROUP BY turns`

/** The Postgres store; needs a migrated {@link Database}. */
export const make = (options: Options = {}): Effect.Effect<SessionLengthStoreService, never, Database> =>
  Effect.map(Database, (db) => {
    const limit = Math.max(1, Math.floor(options.sessions ?? defaults.sessions))
    return {
      counts: (tenant, agent) =>
        db.query<LengthCount>(COUNTS, [tenant, agent, limit]).pipe(
          Effect.map(({ rows }) => rows.map((r) => ({ turns: r.turns, sessions: r.sessions }))),
          logFailure("session lengths: counts"),
          Effect.withSpan("SessionLengthStore.counts"),
        ),
      record: (tenant, session, agent, turns) =>
        db
          .query("SELECT ctxd_record_session_length($1::text, $2::text, $3::text, $4::integer)", [
            tenant,
            session,
            agent,
            Math.max(0, Math.floor(turns)),
          ])
          .pipe(Effect.asVoid, logFailure("session lengths: record")),
    }
  })

/** {@link make} as a layer. */
export const layer: Layer.Layer<SessionLengthStore, never, Database> = Layer.effect(SessionLengthStore, make())

/**
 * In memory: every recorded session counts as stored. Bounded: at most
 * {@link defaults}.`memorySessions`, the oldest created dropped first.
 */
export const makeMemory = (options: Options & { readonly maxSessions?: number | undefined } = {}): SessionLengthStoreService => {
  const limit = Math.max(1, Math.floor(options.sessions ?? defaults.sessions))
  const max = Math.max(1, Math.floor(options.maxSessions ?? defaults.memorySessions))
  // insertion order = creation order (a session is inserted once)
  const rows = new Map<string, { readonly tenant: string; agent: string; turns: number }>()
  return {
    counts: (tenant, agent) =>
      Effect.sync(() => {
        const byLength = new Map<number, number>()
        let taken = 0
        for (const row of [...rows.values()].reverse()) {
          if (taken >= limit) break
          if (row.tenant !== tenant || row.agent !== agent) continue
          taken++
          byLength.set(row.turns, (byLength.get(row.turns) ?? 0) + 1)
        }
        return [...byLength].map(([turns, sessions]) => ({ turns, sessions }))
      }),
    record: (tenant, session, agent, turns) =>
      Effect.sync(() => {
        const key = `${tenant}\u0000${session}`
        const n = Math.max(0, Math.floor(turns))
        const row = rows.get(key)
        if (row !== undefined) {
          row.agent = agent
          row.turns = Math.max(row.turns, n)
          return
        }
        rows.set(key, { tenant, agent, turns: n })
        if (rows.size > max) rows.delete(rows.keys().next().value!)
      }),
  }
}

/** {@link makeMemory} as a layer (a fresh store per build). */
export const layerMemory = (options: Options & { readonly maxSessions?: number | undefined } = {}): Layer.Layer<SessionLengthStore> =>
  Layer.sync(SessionLengthStore, () => makeMemory(options))
