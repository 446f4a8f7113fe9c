/**
 * What a session has saved so far against sending its whole history, as
 * the cache planner prices both: the bound on what an optional edit may
 * spend.
 *
 * Why: the planner's rent-or-buy rule makes an edit when holding it has
 * cost as much as making it, and bounds the wait by the turns the session
 * is expected to go on for. Neither knows when the session ends: an edit
 * made two turns before the end re-writes the prompt and never gets its
 * saving back, and the session costs more than its whole history would
 * have (on a 4,096-token minimum, a window cut at turn 28 of 30 cost 8 %
 * more). Under the ledger an optional edit's premium (this turn's extra
 * cost) is paid only out of what ctxd has already saved against the whole
 * history plus {@link SLACK} of what that history has cost so far, so
 * whenever the session ends it has cost at most that much more than the
 * whole history, as the planner prices both. Forced edits (over the
 * budget) and edits made while nothing is cached (a cold cache, a new
 * view) spend nothing and are not bounded.
 *
 * The whole history is priced as a client sending it would be billed:
 * under the model's default cache tier, read up to the previous turn's
 * length while the cache is warm, everything above that written; not at
 * all cached below the provider's minimum. Its cache is taken to be as
 * warm as ctxd's (under ctxd's TTL): a longer tier ctxd chose makes the
 * whole history look cheaper than it is, so the bound errs low.
 */

/** A session's savings against its whole history, in base-input-token units (tok-eq). */
export interface Ledger {
  /** What ctxd's prompts cost less than the whole history's, summed over the session's turns. */
  readonly saved: number
  /** What the whole history's prompts cost, summed. */
  readonly full: number
  /** Tokens of the whole history's last prompt: what its cache holds now. */
  readonly fullTotal: number
}

/** The ledger of a session with no turn yet (or new on this worker: nothing saved is known). */
export const start: Ledger = { saved: 0, full: 0, fullTotal: 0 }

/** Of what the whole history has cost, the share an edit may spend beyond the savings: 0.8 %, under the 1 % a replay checks. */
export const SLACK = 0.008

/** What an optional edit may spend this turn. */
export const spendable = (ledger: Ledger): number => Math.max(0, ledger.saved + SLACK * ledger.full)

/** How the turn was priced: the whole history's and ctxd's prompt and the cache rules. */
export interface Turn {
  /** Tokens of the whole history's prompt this turn (system, tools uncompressed, memory, every stored message). */
  readonly fullTotal: number
  /** What ctxd's prompt costs this turn (tok-eq). */
  readonly sent: number
  readonly read: number
  /** The write multiplier of the model's default cache tier. */
  readonly write: number
  /** The shortest prefix the whole history is taken to be cached from. */
  readonly minCacheable: number
  /** Nothing is cached: the cache went cold, or this is the session's first turn. */
  readonly cold: boolean
}

/** What the whole history's prompt costs this turn. */
export const fullCost = (ledger: Ledger, t: Turn): number => {
  if (t.fullTotal < t.minCacheable) return t.fullTotal
  if (t.cold || ledger.fullTotal < t.minCacheable) return t.write * t.fullTotal
  const read = Math.min(ledger.fullTotal, t.fullTotal)
  return t.read * read + t.write * (t.fullTotal - read)
}

/** The ledger after a turn. */
export const after = (ledger: Ledger, t: Turn): Ledger => {
  const full = fullCost(ledger, t)
  return { saved: ledger.saved + full - t.sent, full: ledger.full + full, fullTotal: t.fullTotal }
}
