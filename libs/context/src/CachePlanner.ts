/**
 * The cache planner: a prefix-changing edit (the window's cut advancing, the
 * mask boundary advancing) is made only when it pays for itself.
 *
 * An edit rewrites the cached prompt after the place it changes: those
 * tokens are billed at the cache-write price (Anthropic: 1.25× for 5 min,
 * 2× for 1 h; OpenAI: full price instead of the cached discount) instead of
 * the read price, once. What it removes is saved on this turn and on every
 * later one, at the read price while the cache is warm. With `r` the read
 * and `w` the write multiplier, a candidate prompt's `total` and its
 * `prefix` (the tokens before its first difference from the previous
 * turn's prompt), this turn costs
 *
 *     now = r × prefix + w × (total − prefix)
 *
 * and an edit's premium is `now` with it minus `now` without it. When to pay
 * it is {@link choose}'s rule (rent or buy, bounded by the turns the session
 * is expected to go on for). When the cache has gone cold (more time since
 * the previous turn than its TTL) every prompt is written whole anyway: the
 * smallest one wins, and every deferred edit is made at once. A candidate
 * over the budget loses to one within it (a forced edit). A prefix shorter
 * than the provider's minimum cacheable length is never read from the cache.
 * With a `Ledger` in the plan, an optional choice also has to be covered by
 * what the session has saved against its whole history ({@link affordable}).
 */
import type { Turn } from "@ctxd/contracts"
import * as BoundReasoning from "./BoundReasoning.ts"
import * as Ledger from "./Ledger.ts"

/** One message of a prompt, as the planner compares prompts: its view index, whether it went masked, its tokens. */
export interface SentRef {
  readonly index: number
  readonly masked: boolean
  readonly tokens: number
  /** Its reasoning was left out (the `thinking` stage; absent: false). A change of it breaks the prefix like a mask. */
  readonly thinned?: boolean | undefined
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
  /** What holding its deferred edits had cost when this prompt was chosen (absent: nothing). */
  readonly rent?: Rent | undefined
  /** The cache TTL it was sent under (absent: the model's default). */
  readonly ttlSeconds?: number | undefined
  /** The tool schema compression it was sent with (absent: the configured one). */
  readonly compression?: string | undefined
  /**
   * The `thinking` stage's frontier (reasoning of messages before this view
   * index left out) and the rent paid so far for holding a due drop (see
   * `Reasoning`; absent: no reasoning).
   */
  readonly thinking?: { readonly from: number; readonly rent: number } | undefined
  /** On a model that binds reasoning to its prefix: what this prompt sent, the next turn's reference (`BoundReasoning`). */
  readonly bound?: BoundReasoning.Record | undefined
  /** Tokens of bound reasoning the previous prompt sent that this one invalidates (left out). */
  readonly reasoningLost?: number | undefined
  /** A digest of the system prompt and tools as the client sent them (`CacheMiss.clientKey`; absent: not known). */
  readonly clientKey?: string | undefined
  /** The session's ledger after this prompt (`Ledger`; absent: none kept). */
  readonly ledger?: Ledger.Ledger | undefined
  /** Tokens of the whole history's prompt this turn: system, tools uncompressed, memory, every stored message (absent: not known). */
  readonly fullTotal?: number | undefined
}

/** A candidate prompt of this turn. */
export interface Candidate extends Shape {
  readonly total: number
  readonly overBudget: boolean
  /** The edits it makes that holding the previous positions does not (absent or empty: it holds). */
  readonly advances?: ReadonlyArray<Edit> | undefined
}

/** The planner's knobs for one turn. */
export interface Plan {
  /** The previous turn's prompt in the same view; absent: the first turn (or a new view). */
  readonly previous?: Candidate | undefined
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
  /** Shortest prefix the provider caches, as planned (with a margin for counts below the provider's). */
  readonly minCacheable: number
  /** The provider's own minimum, without the margin (absent: `minCacheable`); see `NoHarm.baselineWins`. */
  readonly providerMinCacheable?: number | undefined
  /** The cache tier the prompt is sent under (`"5m"`, `"1h"`; absent: the model's default). */
  readonly tier?: string | undefined
  /** The output price over the uncached input price (absent: `BoundReasoning.DEFAULT_OUTPUT_MULTIPLIER`). */
  readonly outputMultiplier?: number | undefined
  /** The session's savings against its whole history so far: what an optional edit may spend (absent: no bound; see `Ledger`). */
  readonly ledger?: Ledger.Ledger | undefined
  /** The write multiplier of the model's default tier, the whole history's (absent: `write`). */
  readonly defaultWrite?: number | undefined
}

export { chooseTier, MAX_GAPS, MIN_GAPS, recordGap } from "./CacheTier.ts"

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
    // reasoning left out is an edit of the same kind as a mask: part of an old message replaced by less
    if (now.masked !== then.masked || (now.thinned === true) !== (then.thinned === true)) return { tokens, reason: "mask" }
    tokens += now.tokens
  }
  return { tokens, reason: c.sent.length >= previous.sent.length ? "append" : "budget" }
}

/** The expected cost of `c` now and over `expectedTurns` more turns (`now + N × r × total`), with its reusable prefix. */
export const costOf = (plan: Plan, c: Candidate) => {
  const prefix = plan.cold ? { tokens: 0, reason: "ttl_expired" as const } : prefixOf(c, plan.previous, plan.viewChanged)
  const read = prefix.tokens >= plan.minCacheable ? prefix.tokens : 0
  const cost = nowOf(plan, c, read) + plan.expectedTurns * (cacheable(plan, c) ? plan.read : 1) * c.total
  return { cost, read, prefix }
}

/** A prompt shorter than the provider's minimum is not cached at all: billed at the base price, now and later. */
const cacheable = (plan: Plan, c: Candidate): boolean => c.total >= plan.minCacheable

/** This turn's cost of sending `c` with `read` of its tokens read from the cache (and the bound reasoning it invalidates). */
const nowOf = (plan: Plan, c: Candidate, read: number): number =>
  (cacheable(plan, c) ? plan.read * read + plan.write * (c.total - read) : c.total) +
  BoundReasoning.lossOf(c.reasoningLost ?? 0, plan.outputMultiplier)

/** The edits a candidate makes that holding does not. */
export type Edit = "window" | "mask"

/**
 * What holding back an edit has cost so far, per edit, in base-input-token
 * units: the reads of the tokens it would have removed, summed over the
 * turns it was held (reset when it is made, or when nothing is pending).
 */
export interface Rent {
  readonly window: number
  readonly mask: number
  /** A proactive rung held back (see {@link climb}; absent: 0). */
  readonly rung?: number | undefined
}

const noRent: Rent = { window: 0, mask: 0 }

/** This turn's cost of `c` alone (no later turns). */
const nowCost = (plan: Plan, c: Candidate): number => nowOf(plan, c, costOf(plan, c).read)

/** `plan` with the provider's own minimum cacheable prefix instead of the planning margin under it. */
export const exactly = (plan: Plan): Plan => ({ ...plan, minCacheable: plan.providerMinCacheable ?? plan.minCacheable })

/**
 * What making `edited` instead of sending `held` costs extra this turn, on
 * the worst reading of the counts: the edited prompt's prefix is read only
 * if it reaches the provider's own minimum, the held one's if it reaches the
 * planning margin under it. An edit that leaves a prefix in that band looks
 * free under the margin, and is not when the provider counts as we do.
 */
const premiumOf = (plan: Plan, edited: Candidate, held: Candidate): number => nowCost(exactly(plan), edited) - nowCost(plan, held)

/**
 * The rule for an optional edit of `premium` (this turn's extra cost) that
 * saves `saving` a turn: free, or earned by its `rent` and paid back within
 * the turns the session is expected to go on for (whether the session's
 * savings cover it is {@link affordable}'s part).
 */
export const pays = (plan: Plan, premium: number, saving: number, rent: number): boolean =>
  premium <= 0 || (saving > 0 && premium <= rent && premium <= plan.expectedTurns * saving)

/** How the ledger prices this turn of the whole history (its `fullTotal` tokens). */
const ledgerTurn = (plan: Plan, fullTotal: number, sent: number): Ledger.Turn => ({
  fullTotal,
  sent,
  read: plan.read,
  write: plan.defaultWrite ?? plan.write,
  // the planning margin: near the minimum the whole history is taken to be cached (the savings err low)
  minCacheable: plan.minCacheable,
  cold: plan.cold,
})

/**
 * Whether sending `c` by choice (an optional edit, or going back to the
 * unedited prompt while something is cached) is covered by the session's
 * savings: what it costs this turn beyond what the whole history would is
 * at most {@link Ledger.spendable}. Always, when no ledger is kept.
 */
export const affordable = (plan: Plan, c: Candidate): boolean => {
  if (plan.ledger === undefined || c.fullTotal === undefined) return true
  const over = inputCost(plan, c) - Ledger.fullCost(plan.ledger, ledgerTurn(plan, c.fullTotal, 0))
  return over <= 0 || over <= Ledger.spendable(plan.ledger)
}

/** This turn's input cost of sending `c` (no reasoning), a prompt under the provider's own minimum uncached: what the ledger books. */
export const inputCost = (plan: Plan, c: Candidate): number => {
  const exact = exactly(plan)
  const read = costOf(exact, c).read
  return cacheable(exact, c) ? exact.read * read + exact.write * (c.total - read) : c.total
}

/** The ledger after sending `c` this turn (undefined: the plan keeps none, or the whole history's size is not known). */
export const booked = (plan: Plan, c: Candidate): Ledger.Ledger | undefined =>
  plan.ledger === undefined || c.fullTotal === undefined
    ? undefined
    : Ledger.after(plan.ledger, ledgerTurn(plan, c.fullTotal, inputCost(plan, c)))

/**
 * Picks among `candidates` — the first holds the previous positions, the
 * others advance the edits in their `advances` (the last advances every
 * due edit) — and reports why its prefix changed and what the provider
 * should read and write, with the rent to carry to the next turn.
 *
 * While the cache is warm and holding fits the budget, an edit is optional
 * and is made only when both hold:
 *
 * - **it has been earned** (rent or buy): the reads its removal would have
 *   saved on the turns it was already held ({@link Rent}) reach its premium
 *   (this turn's cost with it minus without it). Under a prompt that grows
 *   by about the same each turn this makes the edit exactly when a rewrite
 *   every T turns costs least (the premium equals the reads accumulated
 *   over T), and never pays more than twice the best choice in hindsight,
 *   whatever the future — no guess of the session's length is needed for it;
 * - **it pays back before the session ends**: its saving per turn times the
 *   turns the session is expected to go on for reaches its premium (a short
 *   session never earns a rewrite, so it never makes one).
 *
 * An edit whose premium is not positive is always made. When the cache is
 * cold, the view changed, or holding is over the budget (a forced edit),
 * the candidate of least expected cost over the turns to come
 * ({@link costOf}) wins, among those within the budget.
 */
export const choose = <C extends Candidate>(
  plan: Plan,
  candidates: ReadonlyArray<C>,
): { readonly chosen: C; readonly rent: Rent; readonly cache: CacheReport } => {
  const held = candidates[0]!
  const fits = candidates.filter((c) => !c.overBudget)
  const optional = !plan.cold && plan.previous !== undefined && plan.viewChanged !== true && !held.overBudget
  const rent = plan.previous?.rent ?? noRent
  const saving = (c: Candidate) => plan.read * (held.total - c.total)
  const premium = (c: Candidate) => premiumOf(plan, c, held)
  // the mask's rent counts toward a candidate that also advances the window only up to what
  // the mask edit alone costs: its surplus does not pay for the window's re-write
  const maskOnly = candidates.find((c) => c.advances?.length === 1 && c.advances[0] === "mask")
  const maskCap = maskOnly === undefined ? Number.POSITIVE_INFINITY : Math.max(0, premium(maskOnly))
  const accrued = (c: Candidate) =>
    (c.advances ?? []).reduce((sum, e) => sum + (e === "mask" && c !== maskOnly ? Math.min(rent.mask, maskCap) : rent[e]), 0)
  const pool = !optional
    ? fits.length > 0
      ? fits
      : candidates
    : [held, ...fits.slice(1).filter((c) => pays(plan, premium(c), saving(c), accrued(c)) && affordable(plan, c))]
  let best = pool[0]!
  let bestCost = costOf(plan, best).cost
  for (const c of pool.slice(1)) {
    const cost = costOf(plan, c).cost
    if (cost < bestCost) {
      best = c
      bestCost = cost
    }
  }
  const advanced = candidates.at(-1)!
  const deferred: Array<Edit> = []
  if (best.windowStart < advanced.windowStart) deferred.push("window")
  if (best.maskBoundary !== undefined && advanced.maskBoundary !== undefined && best.maskBoundary < advanced.maskBoundary)
    deferred.push("mask")
  return {
    chosen: best,
    rent: optional ? rentAfter(rent, candidates, deferred, saving) : noRent,
    cache: describe(plan, best, deferred),
  }
}

/** The cache report of sending `c`: its size, where it differs from the previous prompt and why, what is read and written. */
export const describe = (plan: Plan, c: Candidate, deferred: ReadonlyArray<Edit>): CacheReport => {
  const { read, prefix } = costOf(plan, c)
  return {
    prefixTokens: c.total,
    changedAtTokens: prefix.tokens,
    reason: prefix.reason,
    ttlSeconds: plan.ttlSeconds,
    expectedReadTokens: read,
    expectedWriteTokens: c.total - read,
    deferred: [...deferred],
  }
}

/** The planner's part of `report.cache`. */
export type CacheReport = Required<
  Pick<
    Turn.Report["cache"],
    "prefixTokens" | "changedAtTokens" | "reason" | "ttlSeconds" | "expectedReadTokens" | "expectedWriteTokens" | "deferred"
  >
>

/**
 * Whether to climb the proactive rung this turn (`climbed`) or send the
 * prompt at the session's rung (`held`): an optional edit by the rule of
 * {@link choose} (rent or buy, paid back within the expected turns), made at
 * once when the cache is cold or there is no previous prompt to keep, when
 * holding is over the budget, or when it costs nothing extra this turn.
 * Returns the rent to carry (what holding it has cost so far).
 */
export const climb = (
  plan: Plan,
  held: Candidate,
  climbed: Candidate,
  rent: number,
): { readonly climb: boolean; readonly rent: number } => {
  if (plan.cold || plan.previous === undefined || plan.viewChanged === true || held.overBudget) return { climb: true, rent: 0 }
  const saving = plan.read * (held.total - climbed.total)
  const made = pays(plan, premiumOf(plan, climbed, held), saving, rent) && affordable(plan, climbed)
  return { climb: made, rent: made ? 0 : rent + Math.max(0, saving) }
}

/**
 * The rent after this turn: an edit still deferred adds what making it
 * would have saved this turn — the mask's share is what the candidate that
 * makes only the mask edit saves, the window's the rest of what advancing
 * everything saves — and a made or no longer pending edit starts again at 0.
 */
const rentAfter = (
  rent: Rent,
  candidates: ReadonlyArray<Candidate>,
  deferred: ReadonlyArray<Edit>,
  saving: (c: Candidate) => number,
): Rent => {
  const advanced = candidates.at(-1)!
  const maskOnly = candidates.find((c) => c.advances?.length === 1 && c.advances[0] === "mask")
  const maskShare = maskOnly === undefined ? 0 : saving(maskOnly)
  const windowShare = saving(advanced) - (maskOnly === undefined || maskOnly === advanced ? 0 : maskShare)
  return {
    window: deferred.includes("window") ? rent.window + Math.max(0, windowShare) : 0,
    mask: deferred.includes("mask") ? rent.mask + Math.max(0, maskShare) : 0,
    rung: rent.rung,
  }
}

/** What the summary decision compares of a prompt: its report's cache split, its size, whether it fits. */
export interface Built {
  readonly total: number
  readonly overBudget: boolean
  readonly expectedReadTokens: number
  readonly expectedWriteTokens: number
}

/**
 * Whether to swap in a newer summary now. `held` is this turn's prompt on
 * the previous view (its summary, extended), `swapped` the prompt under the
 * new summary, which re-writes everything after the system and the tools —
 * the summary and every message after the point it covers to. Unlike a
 * window or mask edit, waiting does not batch anything: the tail after that
 * point grows each turn, and with it the re-write, while the saving per turn
 * stays the same. So the swap is made as soon as it pays back within the
 * turns the session is expected to go on for (its premium — this turn's cost
 * with it minus without it — at most `expectedTurns` × its saving per turn),
 * and at once when the cache is cold, when holding is over the budget, or
 * when it costs nothing extra this turn.
 */
export const swapSummary = (plan: Plan, held: Built, swapped: Built): boolean => {
  const now = (b: Built) => (b.total < plan.minCacheable ? b.total : plan.read * b.expectedReadTokens + plan.write * b.expectedWriteTokens)
  // no rent: waiting batches nothing here
  return (
    plan.cold ||
    (held.overBudget && !swapped.overBudget) ||
    pays(plan, now(swapped) - now(held), plan.read * (held.total - swapped.total), Number.POSITIVE_INFINITY)
  )
}
