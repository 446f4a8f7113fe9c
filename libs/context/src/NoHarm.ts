/**
 * Do no harm: the cache planner's choice of prompt against the prompt with
 * no edit at all — the window from the first message, nothing masked: what
 * sending the whole history appends turn after turn. The planner's rules
 * (`CachePlanner.choose`) compare this turn's candidates with holding the
 * previous prompt; this module compares the prompt they chose with that
 * baseline, priced with the same cost model (`CachePlanner.costOf`: read
 * and write multipliers, the minimum cacheable prefix, the expected turns),
 * and sends the baseline when it is expected to cost less.
 *
 * Why a baseline beyond holding: edits made while nothing is cached look
 * free (the prompt is written, or sent uncached, either way), but near the
 * provider's minimum cacheable prefix they are not. An edit that keeps the
 * prompt under the minimum leaves nothing cached on a turn the whole
 * history would already have been cached, and the turn after re-writes
 * everything (on a 4,096-token minimum a masked SWE-agent session cost 10 %
 * more than its whole history for exactly this). Above the minimum the
 * baseline never wins: every edit chosen costs no more than holding, and
 * holding no more than a prompt that diverges earlier and is no shorter.
 * The budget still forces edits: a baseline over it never wins.
 */
import * as CachePlanner from "./CachePlanner.ts"
import type { Hold } from "./internal/stages.ts"

/** The provider's own minimum (without the planning margin). */
const providerMin = (plan: CachePlanner.Plan): number => plan.providerMinCacheable ?? plan.minCacheable

/**
 * Whether `baseline` costs less than `chosen` over this turn and the
 * expected ones after it. Both are priced by `CachePlanner.costOf`, except
 * that a prompt below the provider's own minimum counts as uncached: the
 * planning margin under it (`plan.minCacheable`) guards against local
 * counts that fall short of the provider's, which is no reason to believe
 * an edited prompt in that band is cached while the unedited one surely is.
 */
export const baselineWins = (plan: CachePlanner.Plan, chosen: CachePlanner.Candidate, baseline: CachePlanner.Candidate): boolean => {
  if (baseline.overBudget) return false
  const exact = CachePlanner.exactly(plan)
  if (CachePlanner.costOf(exact, baseline).cost >= CachePlanner.costOf(exact, chosen).cost) return false
  // while something is cached, going back to the baseline is an optional edit like the others: paid from the savings
  const warm = !plan.cold && plan.previous !== undefined && plan.viewChanged !== true
  return !warm || CachePlanner.affordable(plan, baseline)
}

/** A prompt as the pipeline builds it: its planner shape. */
interface Built {
  readonly shape: CachePlanner.Candidate
}

/**
 * The baseline (built by `build` with the window held at the first message,
 * the mask boundary at 0 and the tools whole) when it beats `out`, the
 * planner's choice, with its cache report (the edits `advanced` makes,
 * deferred) and no rent carried; undefined when `out` stands. Built only
 * when `out` is under the provider's minimum (only then can it win): a
 * small prompt.
 */
export const baseline = <R extends Built>(
  plan: CachePlanner.Plan,
  advanced: R,
  out: R,
  build: (hold: Hold) => R,
): { readonly out: R; readonly rent: CachePlanner.Rent; readonly cache: CachePlanner.CacheReport } | undefined => {
  if (out.shape.total >= providerMin(plan)) return undefined
  const masking = advanced.shape.maskBoundary !== undefined
  const unedited = build({ windowStart: 0, maskBoundary: masking ? 0 : undefined })
  if (unedited.shape.total < providerMin(plan) || !baselineWins(plan, out.shape, unedited.shape)) return undefined
  const deferred: Array<CachePlanner.Edit> = []
  if (unedited.shape.windowStart < advanced.shape.windowStart) deferred.push("window")
  if (masking && (unedited.shape.maskBoundary ?? 0) < advanced.shape.maskBoundary!) deferred.push("mask")
  return { out: unedited, rent: { window: 0, mask: 0, rung: 0 }, cache: CachePlanner.describe(plan, unedited.shape, deferred) }
}
