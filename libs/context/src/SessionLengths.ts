/**
 * How much longer a session is expected to go on, from how long the same
 * tenant's agent's sessions went on before: the cache planner's
 * `expectedTurns` (an edit must pay back within them). Pure, no I/O.
 *
 * A session's length `L` is its turns — model calls whose reply is stored
 * (the assistant messages stored, `SessionState.turns` in the assembler) —
 * counted as the worker records it with a commit (when it moves to another
 * bucket, below, or the agent changes), so sessions still running
 * count at their length so far: a lower bound, which only makes the
 * expectation conservative. With `s` the current session's turns once this
 * turn is stored, the sessions that got as far are those with `L ≥ s`, and
 *
 *     expected remaining turns = mean(L − s | L ≥ s)
 *
 * over them. When fewer than {@link defaults}.`minSessions` (20) sessions got
 * as far, the history says too little and the caller's rule of thumb stands
 * ({@link rule}: half the turns so far, at least 1).
 *
 * Bounded: lengths are kept in {@link BUCKETS} (145) buckets — one per
 * length below 64, then 8 log-spaced buckets per doubling up to 65,536, and
 * one for every length from there on — and a session in a bucket counts at
 * the bucket's lower end (again a lower bound).
 */

/**
 * The defaults: lengths below 64 kept exactly, 8 buckets per doubling above
 * (each about 9 % wide), lengths from 65,536 on in one bucket, and at least
 * 20 sessions that reached the current turn before the history is used.
 */
export const defaults = {
  exactBelow: 64,
  perDoubling: 8,
  cap: 65_536,
  minSessions: 20,
} as const

const EXACT_BITS = Math.log2(defaults.exactBelow) // 6
const SUB_BITS = Math.log2(defaults.perDoubling) // 3
const CAP_BITS = Math.log2(defaults.cap) // 16

/** How many buckets a histogram has: 64 exact + 8 × 10 doublings + 1 for the cap and above = 145. */
export const BUCKETS = defaults.exactBelow + (CAP_BITS - EXACT_BITS) * defaults.perDoubling + 1

/** Sessions per length bucket: `counts[i]` sessions have a length in bucket `i` (see {@link bucketOf}); always {@link BUCKETS} long. */
export interface Histogram {
  readonly counts: ReadonlyArray<number>
}

/** Sessions of one length, as a store reports them. */
export interface LengthCount {
  readonly turns: number
  readonly sessions: number
}

/** A histogram with no sessions. */
export const empty: Histogram = { counts: Array.from({ length: BUCKETS }, () => 0) }

/** The bucket of a length (negative and fractional lengths round down to a whole number ≥ 0). */
export const bucketOf = (turns: number): number => {
  const n = Number.isFinite(turns) ? Math.max(0, Math.floor(turns)) : turns > 0 ? defaults.cap : 0
  if (n < defaults.exactBelow) return n
  if (n >= defaults.cap) return BUCKETS - 1
  const e = 31 - Math.clz32(n) // 2^e ≤ n < 2^(e+1), EXACT_BITS ≤ e < CAP_BITS
  const sub = (n - 2 ** e) >> (e - SUB_BITS)
  return defaults.exactBelow + (e - EXACT_BITS) * defaults.perDoubling + sub
}

/** The smallest length in bucket `index` (what a session in it counts as). */
export const lowerBound = (index: number): number => {
  if (index < defaults.exactBelow) return Math.max(0, index)
  if (index >= BUCKETS - 1) return defaults.cap
  const j = index - defaults.exactBelow
  const e = EXACT_BITS + Math.floor(j / defaults.perDoubling)
  return 2 ** e + (j % defaults.perDoubling) * 2 ** (e - SUB_BITS)
}

/** A histogram of `rows` (rows of one length may repeat; non-positive counts are ignored). */
export const fromCounts = (rows: Iterable<LengthCount>): Histogram => {
  const counts = [...empty.counts]
  for (const row of rows) if (row.sessions > 0) counts[bucketOf(row.turns)]! += row.sessions
  return { counts }
}

/** How many sessions `histogram` holds. */
export const sessions = (histogram: Histogram): number => histogram.counts.reduce((sum, n) => sum + n, 0)

/**
 * The rule of thumb without a history: half as many turns as the session has
 * had, at least 1. Conservative on purpose: an edit that does not pay back
 * before the session ends costs more than doing nothing, and most sessions
 * are short; a long session earns its edits as it goes on.
 */
export const rule = (turnsSoFar: number): number => Math.max(1, Math.floor(turnsSoFar / 2))

/** What {@link estimate} found: the expected turns after this one, from the history or the rule, and how many sessions got as far. */
export interface Estimate {
  readonly turns: number
  readonly from: "history" | "rule"
  readonly sessions: number
}

/**
 * The turns the session is expected to go on for after this one:
 * `mean(L − turns | L ≥ turns)` over the sessions of `history` that got as
 * far (a session counting at its bucket's lower end), when there are at
 * least `minSessions` of them; otherwise `otherwise`.
 *
 * @param turns the session's turns once this turn is stored (as the store records them).
 * @param otherwise the rule of thumb to fall back on; default {@link rule}`(turns)`.
 */
export const estimate = (
  history: Histogram | undefined,
  turns: number,
  otherwise: number = rule(turns),
  minSessions: number = defaults.minSessions,
): Estimate => {
  const s = Math.max(0, Math.floor(turns))
  let reached = 0
  let remaining = 0
  if (history !== undefined) {
    for (let i = bucketOf(s); i < BUCKETS; i++) {
      const n = history.counts[i] ?? 0
      const length = lowerBound(i)
      if (n <= 0 || length < s) continue
      reached += n
      remaining += n * (length - s)
    }
  }
  return reached >= Math.max(1, minSessions)
    ? { turns: remaining / reached, from: "history", sessions: reached }
    : { turns: otherwise, from: "rule", sessions: reached }
}

/** {@link estimate}'s turns. */
export const expectedTurns = (
  history: Histogram | undefined,
  turns: number,
  otherwise: number = rule(turns),
  minSessions: number = defaults.minSessions,
): number => estimate(history, turns, otherwise, minSessions).turns
