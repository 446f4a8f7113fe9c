/**
 * The compaction store's records, its four refusals and the service's
 * interface, shared by the Postgres store (`CompactionStore.ts`) and the one
 * in memory (`compactionMemory.ts`); re-exported from `CompactionStore`.
 */
import type { Compact, Summarize } from "@ctxd/contracts"
import type { Database } from "@ctxd/db"
import { Data, type Effect, type Option } from "effect"
import type * as View from "../View.ts"

/** A held lease. */
export interface Lease {
  readonly sessionId: string
  readonly owner: string
  /** The fencing token: larger than every token handed out before for this session. */
  readonly token: bigint
  readonly expiresAt: Date
}

/** Another compactor holds the session's lease. */
export class LockHeld extends Data.TaggedError("LockHeld")<{
  readonly message: string
  readonly sessionId: string
  readonly owner: string
  readonly expiresAt: Date
}> {}

/** The lease expired or was taken over: the holder of `token` may not write. */
export class LeaseLost extends Data.TaggedError("LeaseLost")<{ readonly message: string; readonly token: bigint }> {}

/** The session is not stored (nothing to compact). */
export class UnknownSession extends Data.TaggedError("UnknownSession")<{ readonly message: string }> {}

/** The live summary already covers as much or more. */
export class NotNewer extends Data.TaggedError("NotNewer")<{ readonly message: string; readonly liveToSeq: number }> {}

/** A summary to write. */
export interface NewSummary {
  readonly coversFromSeq: number
  readonly coversToSeq: number
  readonly text: string
  readonly mode: Summarize.Mode
  readonly depth: number
  readonly snapshot?: Summarize.Snapshot | null | undefined
  /** A provider-written summary: its signed block, verbatim (`text` is its readable content). */
  readonly block?: Readonly<Record<string, unknown>> | undefined
}

/** A stored summary. */
export interface StoredSummary extends View.Summary {
  readonly id: number
  readonly snapshot: Summarize.Snapshot | null
  readonly token: bigint
  readonly createdAt: Date
}

/** One audit row. */
export interface Audit {
  readonly sessionId: string
  readonly outcome: Compact.Outcome
  /** What started it: `soft`, `hard`, `over_window`, `manual`. */
  readonly trigger: string
  readonly coversFromSeq?: number | null | undefined
  readonly coversToSeq?: number | null | undefined
  readonly summaryId?: number | null | undefined
  readonly summary?: string | null | undefined
  readonly mode?: Summarize.Mode | null | undefined
  readonly depth?: number | null | undefined
  readonly tokensIn?: number | undefined
  readonly tokensOut?: number | undefined
  readonly model?: string | null | undefined
  readonly durationMs: number
  readonly owner?: string | null | undefined
  readonly token?: bigint | null | undefined
  readonly detail?: string | null | undefined
  /** The compactor's clock. */
  readonly finishedAt: Date
}

/** An audit row as read back. */
export interface AuditRow extends Required<Omit<Audit, "token">> {
  readonly id: number
  readonly token: bigint | null
}

/** What a store call fails with when Postgres does (never in memory). */
export type Failure = Database.DatabaseUnavailable | Database.DatabaseError

/** The store's operations. */
export interface CompactionStoreService {
  /** Takes the session's lease for `ttlMs` (by the database clock; in memory, Effect's `Clock`) if it is free or expired. */
  readonly acquire: (
    tenant: string,
    session: string,
    owner: string,
    ttlMs: number,
  ) => Effect.Effect<Lease, LockHeld | UnknownSession | Failure>
  /** Extends a held lease by `ttlMs` from now; {@link LeaseLost} if it is no longer held. */
  readonly renew: (lease: Lease, ttlMs: number) => Effect.Effect<Lease, LeaseLost | Failure>
  /** Ends a held lease now (the row and its token stay); a lease no longer held is left alone. */
  readonly release: (lease: Lease) => Effect.Effect<void, Failure>
  /**
   * Writes a summary while `lease` holds (in Postgres the lease row is
   * locked and its token and expiry checked in the same transaction as the
   * insert) and it covers more than the live one.
   */
  readonly writeSummary: (lease: Lease, summary: NewSummary) => Effect.Effect<StoredSummary, LeaseLost | NotNewer | Failure>
  /** The live summary of a session: the one covering the most. */
  readonly latestSummary: (tenant: string, session: string) => Effect.Effect<Option.Option<StoredSummary>, Failure>
  /** Records one compaction attempt. */
  readonly audit: (row: Audit) => Effect.Effect<void, Failure>
  /** The session's audit rows, newest first (at most `limit`, default 100). */
  readonly compactions: (tenant: string, session: string, limit?: number) => Effect.Effect<ReadonlyArray<AuditRow>, Failure>
  /**
   * The finish times of the session's last `n` decisive attempts (`ok`,
   * `tool_result_truncated`, `no_boundary`, `failed`) when all of them
   * failed; empty otherwise. `lock_held` rows are not attempts of this
   * session's own and do not break a streak.
   */
  readonly failureStreak: (tenant: string, session: string, n: number) => Effect.Effect<ReadonlyArray<Date>, Failure>
}
