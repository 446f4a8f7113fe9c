/**
 * The cache tier (TTL) of a session's prompt, chosen from the gaps between
 * its recent turns: the 1-hour tier's dearer writes pay when pauses of 5–60
 * minutes are common and the prompt is large.
 */
import type * as CostModel from "./CostModel.ts"

/**
 * Gaps kept per session: the most recent 8, so the choice follows the
 * session's current rhythm (pauses at its start say little about its end).
 */
export const MAX_GAPS = 8
/** Gaps needed before a tier other than the model's default is chosen. */
export const MIN_GAPS = 3

/** `gaps` (seconds between a session's turns, oldest first) with `seconds` added, at most {@link MAX_GAPS}. */
export const recordGap = (gaps: ReadonlyArray<number>, seconds: number): ReadonlyArray<number> => [
  ...gaps.slice(-(MAX_GAPS - 1)),
  Math.max(0, seconds),
]

/**
 * The cache tier (TTL) of least expected cost per turn for a session whose
 * recent gaps between turns are `gaps` (seconds), whose prompt is about
 * `promptTokens` and grows by about `newTokens` a turn: under a tier of TTL
 * T, a turn after a gap longer than T finds the cache cold and re-writes the
 * whole prompt, any other reads it and writes only what is new, so per turn
 *
 *     cost(T) = r × prompt × (1 − p_T) + w_T × (new + p_T × prompt)
 *
 * with `p_T` the share of gaps longer than T and `w_T` its write premium
 * (Anthropic: 1.25× for 5 minutes, 2× for 1 hour — worth it when pauses of
 * 5–60 minutes are common and the prompt is large). The first tier (the
 * model's default) until {@link MIN_GAPS} gaps are known, and on a tie.
 * Switching back is free: reads refresh an entry whatever its tier.
 */
export const chooseTier = (
  tiers: ReadonlyArray<CostModel.CacheTier>,
  read: number,
  gaps: ReadonlyArray<number>,
  promptTokens: number,
  newTokens: number,
): CostModel.CacheTier => {
  const first = tiers[0]!
  if (tiers.length < 2 || gaps.length < MIN_GAPS) return first
  const cost = (t: CostModel.CacheTier) => {
    const p = gaps.filter((g) => g > t.ttlSeconds).length / gaps.length
    return read * promptTokens * (1 - p) + t.writeMultiplier * (newTokens + p * promptTokens)
  }
  let best = first
  let bestCost = cost(first)
  for (const t of tiers.slice(1)) {
    const c = cost(t)
    if (c < bestCost) {
      best = t
      bestCost = c
    }
  }
  return best
}
