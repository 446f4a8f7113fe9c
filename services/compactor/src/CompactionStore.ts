/**
 * Compaction state in Postgres (migration 4): the per-session lease, the
 * summaries (the newest per session is the live one; migration 13: a
 * provider-written one keeps its signed block) and the audit.
 *
 * Lease: one row per session, never deleted. {@link CompactionStore.acquire}
 * takes it when it is free or expired, by the database clock, and bumps the
 * fencing token on every acquire, so a token is never handed out twice.
 * {@link CompactionStore.writeSummary} locks the lease row and checks the
 * token and the expiry in the same transaction as the insert: a compactor
 * whose lease expired or was taken over writes nothing ({@link LeaseLost}).
 * A summary must also cover more than the live one ({@link NotNewer}).
 */
import type { Compact, Summarize } from "@ctxd/contracts"
import { Database } from "@ctxd/db"
import { Effect, Layer, Option } from "effect"
import { type MemoryOptions, memoryStore } from "./internal/compactionMemory.ts"
import {
  type Audit,
  type AuditRow,
  type CompactionStoreService,
  type Failure,
  type Lease,
  LeaseLost,
  LockHeld,
  type NewSummary,
  NotNewer,
  type StoredSummary,
  UnknownSession,
} from "./internal/compactionModel.ts"

export type { MemoryOptions } from "./internal/compactionMemory.ts"
export type { Audit, AuditRow, Lease, NewSummary, StoredSummary } from "./internal/compactionModel.ts"
export { LeaseLost, LockHeld, NotNewer, UnknownSession } from "./internal/compactionModel.ts"

interface LeaseRow {
  readonly session_id: string
  readonly owner: string
  readonly token: string
  readonly expires_at: Date
}

const ACQUIRE = `
  WITH s AS (SELECT id FROM ctxd_sessions WHERE tenant = $1 AND session = $2)
  INSERT INTO ctxd_compaction_leases AS l (session_id, owner, token, expires_at)
  SELECT s.id, $3, 1, clock_timestamp() + make_interval(secs => $4::double precision / 1000) FROM s
  ON CONFLICT (session_id) DO UPDATE
    SET owner = EXCLUDED.owner, token = l.token + 1, expires_at = EXCLUDED.expires_at
    WHERE l.expires_at <= clock_timestamp()
  RETURNING l.session_id, l.owner, l.token, l.expires_at`

const HOLDER = `
  SELECT s.id AS session_id, l.owner, l.token, l.expires_at
  FROM ctxd_sessions s LEFT JOIN ctxd_compaction_leases l ON l.session_id = s.id
  WHERE s.tenant = $1 AND s.session = $2`

const SUMMARY_COLUMNS = "id, covers_from_seq, covers_to_seq, text, mode, depth, snapshot, token, created_at, block"

interface SummaryRow {
  readonly id: string
  readonly covers_from_seq: number
  readonly covers_to_seq: number
  readonly text: string
  readonly mode: Summarize.Mode
  readonly depth: number
  readonly snapshot: Summarize.Snapshot | null
  readonly token: string
  readonly created_at: Date
  readonly block: Readonly<Record<string, unknown>> | null
}

const toSummary = (row: SummaryRow): StoredSummary => ({
  id: Number(row.id),
  coversFromSeq: row.covers_from_seq,
  coversToSeq: row.covers_to_seq,
  text: row.text,
  mode: row.mode,
  depth: row.depth,
  snapshot: row.snapshot,
  token: BigInt(row.token),
  createdAt: row.created_at,
  ...(row.block === null ? {} : { block: row.block }),
})

const toLease = (row: LeaseRow): Lease => ({
  sessionId: String(row.session_id),
  owner: row.owner,
  token: BigInt(row.token),
  expiresAt: row.expires_at,
})

/** The store; needs a migrated `Database`. */
export class CompactionStore extends Effect.Service<CompactionStore>()("@ctxd/compactor/CompactionStore", {
  effect: Effect.gen(function* () {
    const db = yield* Database.Database

    const acquire = (
      tenant: string,
      session: string,
      owner: string,
      ttlMs: number,
    ): Effect.Effect<Lease, LockHeld | UnknownSession | Failure> =>
      Effect.gen(function* () {
        const { rows } = yield* db.query<LeaseRow>(ACQUIRE, [tenant, session, owner, ttlMs])
        if (rows[0] !== undefined) return toLease(rows[0])
        const holder = (yield* db.query<LeaseRow>(HOLDER, [tenant, session])).rows[0]
        if (holder === undefined) return yield* new UnknownSession({ message: `session ${tenant}/${session} is not stored` })
        return yield* new LockHeld({
          message: `${holder.owner ?? "another compactor"} holds the compaction lease of ${tenant}/${session}`,
          sessionId: String(holder.session_id),
          owner: holder.owner ?? "",
          expiresAt: holder.expires_at ?? new Date(0),
        })
      }).pipe(Effect.withSpan("CompactionStore.acquire"))

    const renew = (lease: Lease, ttlMs: number): Effect.Effect<Lease, LeaseLost | Failure> =>
      db
        .query<{ expires_at: Date }>(
          `UPDATE ctxd_compaction_leases SET expires_at = clock_timestamp() + make_interval(secs => $3::double precision / 1000)
           WHERE session_id = $1 AND token = $2 AND expires_at > clock_timestamp() RETURNING expires_at`,
          [lease.sessionId, lease.token.toString(), ttlMs],
        )
        .pipe(
          Effect.flatMap(({ rows }) =>
            rows[0] === undefined
              ? Effect.fail(new LeaseLost({ message: `lease token ${lease.token} is no longer held`, token: lease.token }))
              : Effect.succeed({ ...lease, expiresAt: rows[0].expires_at }),
          ),
        )

    const release = (lease: Lease): Effect.Effect<void, Failure> =>
      db.query(
        `UPDATE ctxd_compaction_leases SET expires_at = clock_timestamp()
         WHERE session_id = $1 AND token = $2 AND expires_at > clock_timestamp()`,
        [lease.sessionId, lease.token.toString()],
      )

    const writeSummary = (lease: Lease, summary: NewSummary): Effect.Effect<StoredSummary, LeaseLost | NotNewer | Failure> =>
      db
        .transaction((tx) =>
          Effect.gen(function* () {
            const held = yield* tx.query(
              `SELECT 1 FROM ctxd_compaction_leases
               WHERE session_id = $1 AND token = $2 AND expires_at > clock_timestamp() FOR UPDATE`,
              [lease.sessionId, lease.token.toString()],
            )
            if (held.rowCount === 0) {
              return yield* new LeaseLost({
                message: `lease token ${lease.token} is no longer held; summary not written`,
                token: lease.token,
              })
            }
            const live = yield* tx.query<{ covers_to_seq: number }>(
              "SELECT max(covers_to_seq) AS covers_to_seq FROM ctxd_summaries WHERE session_id = $1",
              [lease.sessionId],
            )
            const liveTo = live.rows[0]?.covers_to_seq ?? null
            if (liveTo !== null && liveTo >= summary.coversToSeq) {
              return yield* new NotNewer({ message: `the live summary already covers up to seq ${liveTo}`, liveToSeq: liveTo })
            }
            const { rows } = yield* tx.query<SummaryRow>(
              `INSERT INTO ctxd_summaries (session_id, covers_from_seq, covers_to_seq, text, mode, depth, snapshot, token, block)
               VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9::jsonb) RETURNING ${SUMMARY_COLUMNS}`,
              [
                lease.sessionId,
                summary.coversFromSeq,
                summary.coversToSeq,
                summary.text,
                summary.mode,
                summary.depth,
                summary.snapshot === undefined || summary.snapshot === null ? null : JSON.stringify(summary.snapshot),
                lease.token.toString(),
                summary.block === undefined ? null : JSON.stringify(summary.block),
              ],
            )
            return toSummary(rows[0]!)
          }),
        )
        .pipe(Effect.withSpan("CompactionStore.writeSummary"))

    const latestSummary = (tenant: string, session: string): Effect.Effect<Option.Option<StoredSummary>, Failure> =>
      db
        .query<SummaryRow>(
          `SELECT ${SUMMARY_COLUMNS.split(", ")
            .map((c) => `m.${c}`)
            .join(", ")}
           FROM ctxd_summaries m JOIN ctxd_sessions s ON s.id = m.session_id
           WHERE s.tenant = $1 AND s.session = $2 ORDER BY m.covers_to_seq DESC, m.id DESC LIMIT 1`,
          [tenant, session],
        )
        .pipe(Effect.map(({ rows }) => Option.map(Option.fromNullable(rows[0]), toSummary)))

    const audit = (row: Audit): Effect.Effect<void, Failure> =>
      db.query(
        `INSERT INTO ctxd_compactions (session_id, outcome, trigger, covers_from_seq, covers_to_seq, summary_id, summary, mode,
           depth, tokens_in, tokens_out, model, duration_ms, owner, token, detail, finished_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
        [
          row.sessionId,
          row.outcome,
          row.trigger,
          row.coversFromSeq ?? null,
          row.coversToSeq ?? null,
          row.summaryId ?? null,
          row.summary ?? null,
          row.mode ?? null,
          row.depth ?? null,
          row.tokensIn ?? 0,
          row.tokensOut ?? 0,
          row.model ?? null,
          Math.round(row.durationMs),
          row.owner ?? null,
          row.token === undefined || row.token === null ? null : row.token.toString(),
          row.detail ?? null,
          row.finishedAt,
        ],
      )

    const compactions = (tenant: string, session: string, limit = 100): Effect.Effect<ReadonlyArray<AuditRow>, Failure> =>
      db
        .query<Record<string, unknown>>(
          `SELECT c.* FROM ctxd_compactions c JOIN ctxd_sessions s ON s.id = c.session_id
           WHERE s.tenant = $1 AND s.session = $2 ORDER BY c.id DESC LIMIT $3`,
          [tenant, session, limit],
        )
        .pipe(
          Effect.map(({ rows }) =>
            rows.map((r) => ({
              id: Number(r.id),
              sessionId: String(r.session_id),
              outcome: r.outcome as Compact.Outcome,
              trigger: r.trigger as string,
              coversFromSeq: r.covers_from_seq as number | null,
              coversToSeq: r.covers_to_seq as number | null,
              summaryId: r.summary_id === null ? null : Number(r.summary_id),
              summary: r.summary as string | null,
              mode: r.mode as Summarize.Mode | null,
              depth: r.depth as number | null,
              tokensIn: r.tokens_in as number,
              tokensOut: r.tokens_out as number,
              model: r.model as string | null,
              durationMs: r.duration_ms as number,
              owner: r.owner as string | null,
              token: r.token === null ? null : BigInt(r.token as string),
              detail: r.detail as string | null,
              finishedAt: r.finished_at as Date,
            })),
          ),
        )

    const failureStreak = (tenant: string, session: string, n: number): Effect.Effect<ReadonlyArray<Date>, Failure> =>
      db
        .query<{ outcome: string; finished_at: Date }>(
          `SELECT c.outcome, c.finished_at FROM ctxd_compactions c JOIN ctxd_sessions s ON s.id = c.session_id
           WHERE s.tenant = $1 AND s.session = $2 AND c.outcome IN ('ok', 'tool_result_truncated', 'no_boundary', 'failed')
           ORDER BY c.id DESC LIMIT $3`,
          [tenant, session, n],
        )
        .pipe(
          Effect.map(({ rows }) => (rows.length === n && rows.every((r) => r.outcome === "failed") ? rows.map((r) => r.finished_at) : [])),
        )

    const service: CompactionStoreService = { acquire, renew, release, writeSummary, latestSummary, audit, compactions, failureStreak }
    return service
  }),
}) {}

/** The store; needs a migrated `Database`. */
export const layer: Layer.Layer<CompactionStore, never, Database.Database> = CompactionStore.Default

/**
 * The store in memory, with the Postgres store's outcomes: leases with a TTL
 * on Effect's `Clock` (so `TestClock` moves them) and a fencing token bumped
 * on every acquire, summaries written only under a held lease and only when
 * they cover more than the live one, the audit newest first. Unbounded: for
 * one replay or one test.
 */
export const makeMemory = (options: MemoryOptions = {}): Effect.Effect<CompactionStore> =>
  Effect.sync(() => CompactionStore.make(memoryStore(options)))

/** The store in memory ({@link makeMemory}); a fresh, empty store per build. */
export const layerMemory = (options: MemoryOptions = {}): Layer.Layer<CompactionStore> => Layer.effect(CompactionStore, makeMemory(options))
