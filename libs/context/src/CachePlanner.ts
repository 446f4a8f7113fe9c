/**
 * The cache planner: a prefix-changing edit (the window's cut advancing, the
 * mask boundary advancing) is made only when it pays for itself.
 *
 * An edit rewrites the cached prompt after the place it changes: those
 * tokens are billed at the cache-write price (Anthropic: 1.25× for 5 min,
 * 2× for 1 h; OpenAI: full price instead of the cached discount) instead of
 * the read price, once. What it removes is saved on this turn and on every
 * later one, at the read price while the cache is warm. So with `r` the read
 * and `w` the write multiplier, `N` the turns the session is expected to go
 * on for, and for each candidate prompt its `total` and its `prefix` (the
 * tokens before its first difference from the previous turn's prompt):
 *
 *     cost = r × prefix + w × (total − prefix) + N × r × total
 *
 * The planner keeps the candidate of least cost; a tie keeps the previous
 * positions (the prefix changes rarely, in large steps). When the cache has
 * gone cold (more time since the previous turn than its TTL) every prompt
 * is written whole anyway: the smallest one wins, and every deferred edit is
 * made at once. A candidate over the budget loses to one within it (a
 * forced edit). A prefix shorter than the provider's minimum cacheable
 * length is never read from the cache.
 */
import type { Turn } from "@ctxd/contracts"

/** One message of a prompt, as the planner compares prompts: its view index, whether it went masked, its tokens. */
export interface SentRef {
  readonly index: number
  readonly masked: boolean
  readonly tokens: number
}

/** What a prompt looks like to the planner (the previous turn's is kept as `Applied`). */
export interface Shape {
  /** The window's first view index and the mask boundary (undefined: masking off). */
  readonly windowStart: number
  readonly maskBoundary: number | undefined
  readonly sent: ReadonlyArray<SentRef>
  /** Digests of the system sections and the tool definitions as sent. */
  readonly systemKey: string
  readonly toolsKey: string
  readonly systemTokens: number
  readonly toolsTokens: number
}

/** A candidate prompt of this turn. */
export interface Candidate extends Shape {
  readonly total: number
  readonly overBudget: boolean
}

/** The planner's knobs for one turn. */
export interface Plan {
  /** The previous turn's prompt in the same view; absent: the first turn (or a new view). */
  readonly previous?: Shape | undefined
  /** The view changed since the previous turn (a new summary): nothing after system and tools is cached. */
  readonly viewChanged?: boolean | undefined
  /** Price multipliers of a cache read and a cache write (relative to an uncached input token). */
  readonly read: number
  readonly write: number
  /** Turns the session is expected to go on for after this one. */
  readonly expectedTurns: number
  /** More time has passed since the previous turn than the cache's TTL. */
  readonly cold: boolean
  readonly ttlSeconds: number
  /** Shortest prefix the provider caches. */
  readonly minCacheable: number
}

/** Tokens at the head of `c` identical to `previous` (system and tools first, then messages in order), and why it stops. */
export const prefixOf = (
  c: Shape,
  previous: Shape | undefined,
  viewChanged = false,
): { readonly tokens: number; readonly reason: Turn.CacheBreakReason } => {
  if (previous === undefined) return { tokens: 0, reason: viewChanged ? "summary" : "first_turn" }
  // Anthropic order: tools, then system, then messages (OpenAI: system first; the tools change rarely)
  if (c.toolsKey !== previous.toolsKey) return { tokens: 0, reason: "tools" }
  if (c.systemKey !== previous.systemKey) return { tokens: c.toolsTokens, reason: "system" }
  let tokens = c.toolsTokens + c.systemTokens
  if (viewChanged) return { tokens, reason: "summary" }
  const n = Math.min(c.sent.length, previous.sent.length)
  for (let k = 0; k < n; k++) {
    const now = c.sent[k]!
    const then = previous.sent[k]!
    if (now.index !== then.index) {
      return { tokens, reason: now.index > then.index && c.windowStart > previous.windowStart ? "window" : "budget" }
    }
    if (now.masked !== then.masked) return { tokens, reason: "mask" }
    tokens += now.tokens
  }
  return { tokens, reason: c.sent.length >= previous.sent.length ? "append" : "budget" }
}

/** The expected cost of `c` now and over the turns to come (see the module doc), with its reusable prefix. */
export const costOf = (plan: Plan, c: Candidate) => {
  const prefix = plan.cold ? { tokens: 0, reason: "ttl_expired" as const } : prefixOf(c, plan.previous, plan.viewChanged)
  const read = prefix.tokens >= plan.minCacheable ? prefix.tokens : 0
  const cost = plan.read * read + plan.write * (c.total - read) + plan.expectedTurns * plan.read * c.total
  return { cost, read, prefix }
}

/**
 * Picks among `candidates` (the first holds the previous positions, the
 * last advances every edit) the one of least expected cost, and reports why
 * its prefix changed and what the provider should read and write.
 */
export const choose = <C extends Candidate>(
  plan: Plan,
  candidates: ReadonlyArray<C>,
): { readonly chosen: C; readonly cache: Required<Pick<Turn.Report["cache"], "prefixTokens" | "changedAtTokens" | "reason" | "ttlSeconds" | "expectedReadTokens" | "expectedWriteTokens" | "deferred">> } => {
  const fits = candidates.filter((c) => !c.overBudget)
  const pool = fits.length > 0 ? fits : candidates
  let best = pool[0]!
  let bestCost = costOf(plan, best)
  for (const c of pool.slice(1)) {
    const cost = costOf(plan, c)
    if (cost.cost < bestCost.cost) {
      best = c
      bestCost = cost
    }
  }
  const advanced = candidates.at(-1)!
  const deferred: Array<"window" | "mask"> = []
  if (best.windowStart < advanced.windowStart) deferred.push("window")
  if (best.maskBoundary !== undefined && advanced.maskBoundary !== undefined && best.maskBoundary < advanced.maskBoundary) deferred.push("mask")
  return {
    chosen: best,
    cache: {
      prefixTokens: best.total,
      changedAtTokens: bestCost.prefix.tokens,
      reason: bestCost.prefix.reason,
      ttlSeconds: plan.ttlSeconds,
      expectedReadTokens: bestCost.read,
      expectedWriteTokens: best.total - bestCost.read,
      deferred,
    },
  }
}
