/**
 * The stored data's lifecycle: expired turn replies pruned, idle sessions
 * deleted after their tenant's retention, a session (or a user's sessions)
 * deleted or exported on request.
 *
 * Every write is small and idempotent, so several workers may run it at once:
 * a prune batch updates at most `batch` rows it could lock at once (`FOR
 * UPDATE SKIP LOCKED`, nobody waits), and a deletion removes at most a
 * handful of sessions per transaction. A deletion locks each session row
 * `FOR UPDATE` first, the lock `ctxd_commit_turn` takes (`FOR NO KEY
 * UPDATE`) conflicts with: a commit in flight finishes before, or finds the
 * session gone after and starts it anew; never a half-deleted session.
 * Every table holding a session's rows is emptied by its own statement (the
 * counts are reported) before the session row itself goes, whose `ON DELETE
 * CASCADE` takes the rest (leases, lengths, users).
 */
import type { Session } from "@ctxd/contracts"
import { Effect, type Layer } from "effect"
import { Database, type DatabaseError, type DatabaseUnavailable, type Queryable } from "./Database.ts"
import { logFailure } from "./internal/logFailure.ts"
import * as SessionExport from "./internal/sessionExport.ts"
import { EXPIRED_REPLY } from "./SessionStore.ts"

export { BadCursor, type ExportPage } from "./internal/sessionExport.ts"

type Failure = DatabaseUnavailable | DatabaseError

/** A tenant's retention: its sessions idle for more than `days` days are deleted. */
export interface RetentionRule {
  readonly tenant: string
  readonly days: number
}

/** Nothing removed. */
export const NONE: Session.Removed = { sessions: 0, messages: 0, turns: 0, summaries: 0, compactions: 0, usageReports: 0 }

/** `a + b`, per kind. */
export const add = (a: Session.Removed, b: Session.Removed): Session.Removed => ({
  sessions: a.sessions + b.sessions,
  messages: a.messages + b.messages,
  turns: a.turns + b.turns,
  summaries: a.summaries + b.summaries,
  compactions: a.compactions + b.compactions,
  usageReports: a.usageReports + b.usageReports,
})

const PRUNE = `
  WITH expired AS (
    SELECT session_id, turn_id FROM ctxd_turns
    WHERE ${SessionExport.KEPT} AND created_at < now() - make_interval(secs => $1::double precision)
    ORDER BY created_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  )
  UPDATE ctxd_turns t SET reply = $3::jsonb, reply_z = NULL
  FROM expired e
  WHERE t.session_id = e.session_id AND t.turn_id = e.turn_id`

const IDLE = `
  SELECT s.id::text AS id FROM ctxd_sessions s
  JOIN unnest($1::text[], $2::integer[]) AS r (tenant, days) ON r.tenant = s.tenant
  WHERE s.id > $3::bigint AND s.id <= $3::bigint + $4::bigint
    AND s.updated_at < now() - make_interval(days => r.days)`

/** Deletes the locked sessions `ids` (bigint text) and every row of theirs; the counts. */
const removeLocked = (tx: Queryable, ids: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    if (ids.length === 0) return NONE
    const p = [ids]
    const count = (sql: string) => Effect.map(tx.query(sql, p), (r) => r.rowCount)
    const usageReports = yield* count(
      `DELETE FROM ctxd_usage_reports u USING ctxd_sessions s
       WHERE s.id = ANY($1::bigint[]) AND u.tenant = s.tenant AND u.session = s.session`,
    )
    const messages = yield* count(`DELETE FROM ctxd_messages WHERE session_id = ANY($1::bigint[])`)
    const turns = yield* count(`DELETE FROM ctxd_turns WHERE session_id = ANY($1::bigint[])`)
    const compactions = yield* count(`DELETE FROM ctxd_compactions WHERE session_id = ANY($1::bigint[])`)
    const summaries = yield* count(`DELETE FROM ctxd_summaries WHERE session_id = ANY($1::bigint[])`)
    // cascades to ctxd_compaction_leases, ctxd_session_lengths, ctxd_session_users
    const sessions = yield* count(`DELETE FROM ctxd_sessions WHERE id = ANY($1::bigint[])`)
    return { sessions, messages, turns, summaries, compactions, usageReports } satisfies Session.Removed
  })

export class LifecycleStore extends Effect.Service<LifecycleStore>()("@ctxd/db/LifecycleStore", {
  effect: Effect.gen(function* () {
    const db = yield* Database

    /**
     * One batch: the replies of at most `batch` turns committed more than
     * `olderThanSeconds` ago become {@link EXPIRED_REPLY} (the turn row stays:
     * a late retry is recognised). Rows another pruner holds are skipped.
     * Returns how many were pruned.
     */
    const pruneReplies = (olderThanSeconds: number, batch: number): Effect.Effect<number, Failure> =>
      db.query(PRUNE, [olderThanSeconds, batch, JSON.stringify(EXPIRED_REPLY)]).pipe(
        Effect.map((r) => r.rowCount),
        logFailure("lifecycle: pruneReplies"),
      )

    /**
     * The sessions with `afterId < id <= afterId + span` idle past their
     * tenant's rule (ids as text), and the largest session id (where a sweep ends).
     */
    const idleSessions = (
      rules: ReadonlyArray<RetentionRule>,
      afterId: bigint,
      span: number,
    ): Effect.Effect<{ readonly ids: ReadonlyArray<string>; readonly maxId: bigint }, Failure> =>
      Effect.all([
        db.query<{ id: string }>(IDLE, [rules.map((r) => r.tenant), rules.map((r) => r.days), afterId.toString(), span]),
        db.query<{ max: string }>(`SELECT coalesce(max(id), 0)::text AS max FROM ctxd_sessions`),
      ]).pipe(
        Effect.map(([idle, max]) => ({ ids: idle.rows.map((r) => r.id), maxId: BigInt(max.rows[0]!.max) })),
        logFailure("lifecycle: idleSessions"),
      )

    /**
     * Deletes the sessions `ids` that are still idle past their tenant's
     * rule once locked (a turn may have come since they were found); a
     * session a turn is writing is skipped (the next sweep sees it again).
     */
    const deleteIdle = (rules: ReadonlyArray<RetentionRule>, ids: ReadonlyArray<string>): Effect.Effect<Session.Removed, Failure> =>
      ids.length === 0
        ? Effect.succeed(NONE)
        : db
            .transaction((tx) =>
              Effect.flatMap(
                tx.query<{ id: string }>(
                  `SELECT s.id::text AS id FROM ctxd_sessions s
                   JOIN unnest($1::text[], $2::integer[]) AS r (tenant, days) ON r.tenant = s.tenant
                   WHERE s.id = ANY($3::bigint[]) AND s.updated_at < now() - make_interval(days => r.days)
                   ORDER BY s.id FOR UPDATE OF s SKIP LOCKED`,
                  [rules.map((r) => r.tenant), rules.map((r) => r.days), ids],
                ),
                ({ rows }) =>
                  removeLocked(
                    tx,
                    rows.map((r) => r.id),
                  ),
              ),
            )
            .pipe(logFailure("lifecycle: deleteIdle"))

    /**
     * Deletes the session and every row of it, in one transaction, after a
     * turn committing on it (which holds its row lock) finishes. Idempotent:
     * an unknown session removes nothing.
     */
    const deleteSession = (tenant: string, session: string): Effect.Effect<Session.Removed, Failure> =>
      db
        .transaction((tx) =>
          Effect.gen(function* () {
            const { rows } = yield* tx.query<{ id: string }>(
              `SELECT id::text AS id FROM ctxd_sessions WHERE tenant = $1 AND session = $2 FOR UPDATE`,
              [tenant, session],
            )
            if (rows.length > 0)
              return yield* removeLocked(
                tx,
                rows.map((r) => r.id),
              )
            // usage reports are keyed by name: one may outlive its session
            const usage = yield* tx.query(`DELETE FROM ctxd_usage_reports WHERE tenant = $1 AND session = $2`, [tenant, session])
            return { ...NONE, usageReports: usage.rowCount }
          }),
        )
        .pipe(logFailure("lifecycle: deleteSession"))

    /** The names of at most `limit` sessions of `tenant` whose turns carried `user` (by session id). */
    const sessionsOfUser = (tenant: string, user: string, limit: number): Effect.Effect<ReadonlyArray<string>, Failure> =>
      db
        .query<{ session: string }>(
          `SELECT s.session FROM ctxd_session_users u JOIN ctxd_sessions s ON s.id = u.session_id
           WHERE u.tenant = $1 AND u.user_id = $2 ORDER BY u.session_id LIMIT $3`,
          [tenant, user, limit],
        )
        .pipe(
          Effect.map(({ rows }) => rows.map((r) => r.session)),
          logFailure("lifecycle: sessionsOfUser"),
        )

    /**
     * One page of the session's stored data as JSON Lines: at most `limit`
     * lines, stopping before `maxBytes` (at least one line). Fails with
     * {@link BadCursor} for a cursor this store did not write for this
     * session as it is now.
     */
    const exportPage = (
      tenant: string,
      session: string,
      cursor: string | undefined,
      limit: number,
      maxBytes: number,
    ): Effect.Effect<SessionExport.ExportPage, Failure | SessionExport.BadCursor> =>
      SessionExport.page(db, tenant, session, cursor, limit, maxBytes).pipe(logFailure("lifecycle: exportPage"))

    return { pruneReplies, idleSessions, deleteIdle, deleteSession, sessionsOfUser, exportPage } as const
  }),
}) {}

/** The store; needs a migrated {@link Database}. */
export const layer: Layer.Layer<LifecycleStore, never, Database> = LifecycleStore.Default
