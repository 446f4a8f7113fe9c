/**
 * Flow control of one worker, derived in one place: every limit that bounds
 * what a worker holds at once comes from {@link derive}, from one normalized
 * {@link Config}; the consumers (the endpoints' byte budget and tenant
 * shares, the turn slots, the turn endpoints' requests at once, the group
 * commit, the session mailboxes, the CPU yield) take their number from the
 * {@link Limits} and compute nothing of their own.
 *
 * The derivation (each knob's environment name in parentheses):
 *
 * - **Turn slots** = `maxConcurrent` (`CTXD_MAX_CONCURRENT`, default 4), at
 *   least 1: turns whose CPU work runs at once over both turn subjects. A turn
 *   holds its slot (`Permits.Slot`) while it decodes, gathers and runs its
 *   stages, and gives it back explicitly once only its commit remains: the
 *   slots bound the CPU work, not what waits for Postgres.
 * - **Commit grouping** = `commitBatch` (`CTXD_COMMIT_BATCH`, default 16)
 *   turns per statement and `commitStatements` (`CTXD_COMMIT_STATEMENTS`,
 *   default 2) statements in flight, each whole and at least 1 (0 or less
 *   runs every commit alone in one statement at a time): what the session
 *   store's group commit runs.
 * - **Commit waits** = (statements + 1) × batch (48 by default): the turns
 *   that wait for their commit at once under a load that keeps every
 *   statement full, a batch in each statement in flight and one more
 *   gathering behind them.
 * - **Requests per turn subject** = max(16, 4 × turn slots) + commit waits
 *   (64 by default): what each turn subject takes at once before requests
 *   wait unread. Four per slot, and at least 16, so requests being forwarded
 *   to another worker or waiting for a slot never block the turns; the commit
 *   waits on top, so the turns waiting for Postgres do not hold back the next
 *   turns' CPU work, and wait together (one statement for many commits).
 * - **Requests waiting per turn subject** = 1024 (not a knob): requests read
 *   from NATS beyond those taken at once, in arrival order, before the next
 *   is answered `Busy` at once; their bytes count against the byte budget.
 * - **Bytes in flight** = `maxInflightBytes` (`CTXD_MAX_INFLIGHT_BYTES`,
 *   default 16 MiB; 0 or less: unbounded): request bytes the worker's
 *   endpoints hold, running and waiting (`Admission`).
 * - **Fair share** of one tenant = `tenantBytesPercent`
 *   (`CTXD_TENANT_BYTES_PERCENT`, default 50) % of the bytes in flight,
 *   rounded down, at least 1, and `tenantTurnsPercent`
 *   (`CTXD_TENANT_TURNS_PERCENT`, default 100) % of the turn slots, rounded
 *   up, at least 1; 100 % is no per-tenant limit, and so is an unbounded byte
 *   budget for the bytes. A tenant's own percents (its configuration section)
 *   go through the same derivation ({@link Limits.shareOf}).
 * - **Mailbox depth** = `mailbox` (`CTXD_SESSION_MAILBOX`, default 64), whole
 *   and at least 0: turns of one session waiting behind its running turn
 *   before `Busy`.
 * - **CPU yield** = `sliceMs` (default 10 ms): CPU work run back to back
 *   before the socket reads get their turn (`Endpoint.yieldIfBusy` before a
 *   turn's work), so a run of turns never starves the reads of Busy answers.
 */

/** A tenant's share: bytes and turns in flight (non-positive or non-finite = no limit); `Admission` enforces it. */
export interface Share {
  readonly maxBytes?: number | undefined
  readonly maxTurns?: number | undefined
}

/** The knobs, as read from the environment (any value: {@link derive} normalizes). */
export interface Config {
  /** Turn slots (`CTXD_MAX_CONCURRENT`); default 4. */
  readonly maxConcurrent: number
  /** Request bytes in flight (`CTXD_MAX_INFLIGHT_BYTES`); default 16 MiB, 0 or less unbounded. */
  readonly maxInflightBytes: number
  /** Turns per commit statement (`CTXD_COMMIT_BATCH`); default 16. */
  readonly commitBatch: number
  /** Commit statements in flight (`CTXD_COMMIT_STATEMENTS`); default 2. */
  readonly commitStatements: number
  /** Turns of one session waiting behind its running turn (`CTXD_SESSION_MAILBOX`); default 64. */
  readonly mailbox: number
  /** Percent of the bytes in flight one tenant may hold (`CTXD_TENANT_BYTES_PERCENT`); default 50. */
  readonly tenantBytesPercent: number
  /** Percent of the turn slots one tenant may have in flight (`CTXD_TENANT_TURNS_PERCENT`); default 100, no limit. */
  readonly tenantTurnsPercent: number
  /** CPU work run back to back before the socket reads get their turn, in ms; default 10. */
  readonly sliceMs: number
}

/**
 * The defaults: 4 turn slots (a turn is mostly CPU on one core: more at once
 * only interleave their work between socket reads, so under a burst requests
 * wait unread), 16 MiB in flight, 16 turns a commit statement and 2
 * statements in flight (a slow statement does not hold every other session's
 * commit behind it), 64 turns per session mailbox, 50 % of the bytes and all
 * the slots per tenant, a 10 ms CPU slice.
 */
export const defaults: Config = {
  maxConcurrent: 4,
  maxInflightBytes: 16 * 1024 * 1024,
  commitBatch: 16,
  commitStatements: 2,
  mailbox: 64,
  tenantBytesPercent: 50,
  tenantTurnsPercent: 100,
  sliceMs: 10,
}

/** How the session store groups commits: `maxBatch` turns per statement, `statements` in flight (both whole, at least 1). */
export interface CommitGrouping {
  readonly maxBatch: number
  readonly statements: number
}

/** A tenant's percents of the worker (its own, or the default). */
export interface Percents {
  readonly bytesPercent: number
  readonly turnsPercent: number
}

/** Every limit of one worker (see the module doc for each derivation). */
export interface Limits {
  /** Turns whose CPU work runs at once (the turn slots). */
  readonly turnSlots: number
  /** Request bytes held in flight by the worker's endpoints (`Infinity`: unbounded). */
  readonly inflightBytes: number
  /** The group commit's options, normalized. */
  readonly commit: CommitGrouping
  /** Turns that wait for their commit at once under full load. */
  readonly commitWaits: number
  /** Requests each turn subject takes at once (its endpoint's `maxConcurrent`). */
  readonly requestsPerSubject: number
  /** Requests each turn subject holds waiting beyond those before answering `Busy` (its endpoint's `maxPending`). */
  readonly requestsWaiting: number
  /** Turns of one session that may wait behind its running turn. */
  readonly mailbox: number
  /** The default percents of a tenant's share. */
  readonly tenantPercents: Percents
  /** A tenant's share under the default percents. */
  readonly tenantShare: Share
  /** A tenant's share under its `own` percents (each over the default). */
  readonly shareOf: (own?: Partial<Percents>) => Share
  /** CPU work run back to back before the socket reads get their turn, in ms. */
  readonly sliceMs: number
}

/** Requests a turn subject holds waiting (see the module doc). */
const REQUESTS_WAITING = 1024

const whole = (n: number, least: number, fallback: number) => (Number.isFinite(n) ? Math.max(least, Math.floor(n)) : fallback)

/** The byte budget: a positive finite `n`, else `Infinity` (unbounded). */
const budget = (n: number) => (Number.isFinite(n) && n > 0 ? n : Number.POSITIVE_INFINITY)

/**
 * The share of one tenant under `percents` of `inflightBytes` and
 * `turnSlots`: the bytes rounded down and the turns rounded up, each at least
 * 1; 100 % (or an unbounded byte budget, for the bytes) is no limit.
 */
const share = (percents: Percents, inflightBytes: number, turnSlots: number): Share => ({
  maxBytes:
    percents.bytesPercent >= 100 || !Number.isFinite(inflightBytes)
      ? undefined
      : Math.max(1, Math.floor((inflightBytes * percents.bytesPercent) / 100)),
  maxTurns: percents.turnsPercent >= 100 ? undefined : Math.max(1, Math.ceil((turnSlots * percents.turnsPercent) / 100)),
})

/** The group commit's options as it runs them: each whole and at least 1. */
const commitGrouping = (options: { readonly maxBatch: number; readonly statements: number }): CommitGrouping => ({
  maxBatch: whole(options.maxBatch, 1, defaults.commitBatch),
  statements: whole(options.statements, 1, defaults.commitStatements),
})

/** Every limit, from `config` over {@link defaults} (the derivation: the module doc). */
export const derive = (config: Partial<Config> = {}): Limits => {
  const c = { ...defaults, ...config }
  const turnSlots = whole(c.maxConcurrent, 1, defaults.maxConcurrent)
  const inflightBytes = budget(c.maxInflightBytes)
  const commit = commitGrouping({ maxBatch: c.commitBatch, statements: c.commitStatements })
  const commitWaits = (commit.statements + 1) * commit.maxBatch
  const tenantPercents: Percents = { bytesPercent: c.tenantBytesPercent, turnsPercent: c.tenantTurnsPercent }
  const shareOf = (own?: Partial<Percents>): Share => share({ ...tenantPercents, ...own }, inflightBytes, turnSlots)
  return {
    turnSlots,
    inflightBytes,
    commit,
    commitWaits,
    requestsPerSubject: Math.max(16, 4 * turnSlots) + commitWaits,
    requestsWaiting: REQUESTS_WAITING,
    mailbox: whole(c.mailbox, 0, defaults.mailbox),
    tenantPercents,
    tenantShare: shareOf(),
    shareOf,
    sliceMs: Math.max(0, Number.isFinite(c.sliceMs) ? c.sliceMs : defaults.sliceMs),
  }
}
