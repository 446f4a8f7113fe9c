/**
 * The compaction store in memory (`CompactionStore.makeMemory`): the
 * Postgres store's outcomes without a database, for replays and tests.
 * Apart from `CompactionStore.ts` so that the Postgres store reads alone.
 */
import { Clock, Effect, Option } from "effect"
import {
  type AuditRow,
  type CompactionStoreService,
  type Lease,
  LeaseLost,
  LockHeld,
  NotNewer,
  type StoredSummary,
  UnknownSession,
} from "./compactionModel.ts"

/** Options of `CompactionStore.makeMemory` and `CompactionStore.layerMemory`. */
export interface MemoryOptions {
  /** Whether a session is stored (compacting an unknown one fails with {@link UnknownSession}); default: every session is. */
  readonly sessionExists?: ((tenant: string, session: string) => boolean) | undefined
}

/** A fresh, empty store in memory (see `CompactionStore.makeMemory`). */
export const memoryStore = (options: MemoryOptions = {}): CompactionStoreService => {
  const ids = new Map<string, string>()
  const leases = new Map<string, { owner: string; token: bigint; expiresAt: number }>()
  const summaries = new Map<string, Array<StoredSummary>>()
  const audits = new Map<string, Array<AuditRow>>()
  let nextSummary = 0
  let nextAudit = 0
  const idOf = (tenant: string, session: string): string | undefined => {
    const key = `${tenant}\u0000${session}`
    if (!(options.sessionExists?.(tenant, session) ?? true)) return ids.get(key)
    let id = ids.get(key)
    if (id === undefined) ids.set(key, (id = String(ids.size + 1)))
    return id
  }
  const held = (lease: Lease, now: number) => {
    const row = leases.get(lease.sessionId)
    return row !== undefined && row.token === lease.token && row.expiresAt > now
  }
  const live = (sessionId: string): StoredSummary | undefined =>
    [...(summaries.get(sessionId) ?? [])].sort((a, b) => b.coversToSeq - a.coversToSeq || b.id - a.id)[0]
  return {
    acquire: (tenant, session, owner, ttlMs) =>
      Effect.flatMap(Clock.currentTimeMillis, (now): Effect.Effect<Lease, LockHeld | UnknownSession> => {
        const sessionId = idOf(tenant, session)
        if (sessionId === undefined) return Effect.fail(new UnknownSession({ message: `session ${tenant}/${session} is not stored` }))
        const row = leases.get(sessionId)
        if (row !== undefined && row.expiresAt > now) {
          return Effect.fail(
            new LockHeld({
              message: `${row.owner} holds the compaction lease of ${tenant}/${session}`,
              sessionId,
              owner: row.owner,
              expiresAt: new Date(row.expiresAt),
            }),
          )
        }
        const next = { owner, token: (row?.token ?? 0n) + 1n, expiresAt: now + ttlMs }
        leases.set(sessionId, next)
        return Effect.succeed({ sessionId, owner, token: next.token, expiresAt: new Date(next.expiresAt) })
      }),
    renew: (lease, ttlMs) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        if (!held(lease, now))
          return Effect.fail(new LeaseLost({ message: `lease token ${lease.token} is no longer held`, token: lease.token }))
        leases.get(lease.sessionId)!.expiresAt = now + ttlMs
        return Effect.succeed({ ...lease, expiresAt: new Date(now + ttlMs) })
      }),
    release: (lease) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (held(lease, now)) leases.get(lease.sessionId)!.expiresAt = now
      }),
    writeSummary: (lease, summary) =>
      Effect.flatMap(Clock.currentTimeMillis, (now): Effect.Effect<StoredSummary, LeaseLost | NotNewer> => {
        if (!held(lease, now))
          return Effect.fail(
            new LeaseLost({ message: `lease token ${lease.token} is no longer held; summary not written`, token: lease.token }),
          )
        const liveTo = live(lease.sessionId)?.coversToSeq
        if (liveTo !== undefined && liveTo >= summary.coversToSeq) {
          return Effect.fail(new NotNewer({ message: `the live summary already covers up to seq ${liveTo}`, liveToSeq: liveTo }))
        }
        const stored: StoredSummary = {
          id: ++nextSummary,
          coversFromSeq: summary.coversFromSeq,
          coversToSeq: summary.coversToSeq,
          text: summary.text,
          mode: summary.mode,
          depth: summary.depth,
          snapshot: summary.snapshot ?? null,
          token: lease.token,
          createdAt: new Date(now),
          ...(summary.block === undefined ? {} : { block: summary.block }),
        }
        summaries.set(lease.sessionId, [...(summaries.get(lease.sessionId) ?? []), stored])
        return Effect.succeed(stored)
      }),
    latestSummary: (tenant, session) =>
      Effect.sync(() => {
        const id = ids.get(`${tenant}\u0000${session}`)
        return Option.fromNullable(id === undefined ? undefined : live(id))
      }),
    audit: (row) =>
      Effect.sync(() => {
        const rows = audits.get(row.sessionId) ?? []
        rows.push({
          id: ++nextAudit,
          sessionId: row.sessionId,
          outcome: row.outcome,
          trigger: row.trigger,
          coversFromSeq: row.coversFromSeq ?? null,
          coversToSeq: row.coversToSeq ?? null,
          summaryId: row.summaryId ?? null,
          summary: row.summary ?? null,
          mode: row.mode ?? null,
          depth: row.depth ?? null,
          tokensIn: row.tokensIn ?? 0,
          tokensOut: row.tokensOut ?? 0,
          model: row.model ?? null,
          durationMs: Math.round(row.durationMs),
          owner: row.owner ?? null,
          token: row.token ?? null,
          detail: row.detail ?? null,
          finishedAt: row.finishedAt,
        })
        audits.set(row.sessionId, rows)
      }),
    compactions: (tenant, session, limit = 100) =>
      Effect.sync(() => {
        const id = ids.get(`${tenant}\u0000${session}`)
        return id === undefined ? [] : [...(audits.get(id) ?? [])].reverse().slice(0, limit)
      }),
    failureStreak: (tenant, session, n) =>
      Effect.sync(() => {
        const id = ids.get(`${tenant}\u0000${session}`)
        const decisive =
          id === undefined
            ? []
            : [...(audits.get(id) ?? [])]
                .reverse()
                .filter((r) => ["ok", "tool_result_truncated", "no_boundary", "failed"].includes(r.outcome))
                .slice(0, n)
        return decisive.length === n && decisive.every((r) => r.outcome === "failed") ? decisive.map((r) => r.finishedAt) : []
      }),
  }
}
