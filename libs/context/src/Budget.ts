/**
 * Budget allocation over the window. The history budget is what remains of
 * the total after system, tools and the memory actually used. Inside the
 * window, a protected fresh tail (plus the anchor, the latest request and
 * pinned messages) is always kept; the evictable prefix before the tail is
 * filled newest-first, unit by unit, and the first unit that does not fit is
 * dropped together with everything older (contiguous, no holes).
 *
 * The fresh tail always includes the newest exchange's tool-call group (see
 * `Window`), even with `freshTailMessages` 0: when the protected messages
 * alone exceed the budget they are still all kept and the allocation says
 * `overBudget`, never dropping the results the model asked for.
 *
 * Cache-aware: a budget cut is rounded up to the window's grid (multiples of
 * `step` non-system messages), so the prompt prefix changes in steps.
 */
import * as Units from "./Units.ts"
import * as Window from "./Window.ts"

/** A history entry with its token count. */
export interface Entry extends Units.Entry {
  readonly tokens: number
}

/** What the allocation needs besides the history and the window. */
export interface BudgetInput {
  /** The total budget (the caller's `budgetTokens`, else the model's effective window). */
  readonly totalTokens: number
  readonly systemTokens: number
  readonly toolsTokens: number
  /** Memory content actually sent (0 until memory exists). */
  readonly memoryTokens: number
  /** Messages at the end of the window never evicted for budget. */
  readonly freshTailMessages: number
  /** The window's grid step. */
  readonly windowStep: number
  /** All pinned indices (from the landmarks), ascending. */
  readonly pinned: ReadonlyArray<number>
  /** Tokens of history message `i` as it will be sent (after masking); default `history[i].tokens`. */
  readonly tokenOf?: ((i: number) => number) | undefined
}

/** The outcome of {@link allocate}. */
export interface Allocation {
  /** `total − system − tools − memory used`. */
  readonly historyBudget: number
  /** First index of the protected fresh tail (a unit boundary ≥ window start, ≤ the window's `lastUnit`). */
  readonly tailStart: number
  /** Everything from here on is kept; before it only the anchor, the latest (or held) request and pinned messages. */
  readonly cut: number
  /** Kept history indices, ascending. */
  readonly kept: Array<number>
  /** Tokens of the kept messages. */
  readonly keptTokens: number
  /** Tokens of tail + anchor + latest request + pinned: what is kept whatever the budget. */
  readonly protectedTokens: number
  /** True when the protected messages alone exceed the history budget. */
  readonly overBudget: boolean
  readonly droppedByWindow: number
  readonly droppedByBudget: number
}

const contains = (sorted: ReadonlyArray<number>, x: number): boolean => {
  let lo = 0
  let hi = sorted.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    const v = sorted[mid]!
    if (v === x) return true
    if (v < x) lo = mid + 1
    else hi = mid
  }
  return false
}

/** The grid position at or after `cut`, moved to a unit boundary and capped at `limit`. */
const roundToGrid = (
  history: ReadonlyArray<Units.Entry>,
  cut: number,
  step: number,
  pinned: ReadonlyArray<number>,
  limit: number,
): number => {
  const rel = Window.relative(cut, pinned)
  const rounded = Math.ceil(rel / step) * step
  const abs = Math.min(history.length, Window.absolute(rounded, pinned))
  return Math.min(limit, Units.nextBoundary(history, abs))
}

/** The ascending `sorted` indices below `limit` merged with a few `extra` ones (deduplicated, ascending). */
const protectedBefore = (sorted: ReadonlyArray<number>, extra: ReadonlyArray<number | undefined>, limit: number): Array<number> => {
  const add = [...new Set(extra)].filter((i): i is number => i !== undefined && i < limit).sort((a, b) => a - b)
  const out: Array<number> = []
  let k = 0
  for (const p of sorted) {
    if (p >= limit) break
    while (k < add.length && add[k]! < p) out.push(add[k++]!)
    if (add[k] === p) k++
    out.push(p)
  }
  while (k < add.length) out.push(add[k++]!)
  return out
}

/**
 * Allocates the history budget over `window`. Cost: O(window) plus binary
 * searches over the pinned indices. The fresh tail is the last
 * `freshTailMessages` messages of the window, extended back to a unit
 * boundary (never before the window start) and always reaching back to the
 * window's `lastUnit` (the newest exchange's tool-call group). The window's
 * `held` request is kept only when the budget evicts nothing else and it fits.
 */
export const allocate = (history: ReadonlyArray<Entry>, window: Window.Window, input: BudgetInput): Allocation => {
  const n = history.length
  const start = window.start
  const step = Math.max(1, input.windowStep)
  const fresh = input.freshTailMessages <= 0 ? n : Units.unitStart(history, Math.max(start, n - input.freshTailMessages))
  const tailStart = Math.min(fresh, window.lastUnit)
  const anchor = window.anchor
  const request = window.request
  const isProtected = (i: number): boolean => i === anchor || i === request || contains(input.pinned, i)
  const tokenOf = input.tokenOf ?? ((i: number): number => history[i]!.tokens)

  let protectedTokens = 0
  for (let i = tailStart; i < n; i++) protectedTokens += tokenOf(i)
  // Pinned messages, the anchor and the latest request before the tail.
  const early = protectedBefore(input.pinned, [anchor, request], tailStart)
  for (const i of early) protectedTokens += tokenOf(i)

  const available = input.totalTokens - input.systemTokens - input.toolsTokens
  const historyBudget = available - input.memoryTokens
  const overBudget = protectedTokens > historyBudget

  let cut = tailStart
  let held = false
  if (!overBudget) {
    let remaining = historyBudget - protectedTokens
    let e = tailStart
    while (e > start) {
      const s = Units.unitStart(history, e - 1)
      let cost = 0
      for (let i = s; i < e; i++) if (!isProtected(i)) cost += tokenOf(i)
      if (cost > remaining) break
      remaining -= cost
      e = s
    }
    cut = e > start ? roundToGrid(history, e, step, input.pinned, tailStart) : start
    held = cut === start && window.held !== undefined && tokenOf(window.held) <= remaining
  }
  const before = held ? protectedBefore(early, [window.held], tailStart) : early

  const kept: Array<number> = []
  let keptTokens = 0
  let beforeStart = 0
  let beforeCut = 0
  for (const i of before) {
    if (i >= cut) break
    kept.push(i)
    keptTokens += tokenOf(i)
    if (i < start) beforeStart++
    else beforeCut++
  }
  for (let i = cut; i < n; i++) {
    kept.push(i)
    keptTokens += tokenOf(i)
  }
  // A held request the budget could not keep counts as dropped by the budget.
  const heldDropped = window.held !== undefined && !held ? 1 : 0
  return {
    historyBudget,
    tailStart,
    cut,
    kept,
    keptTokens,
    protectedTokens,
    overBudget,
    droppedByWindow: start - beforeStart - heldDropped,
    droppedByBudget: cut - start - beforeCut + heldDropped,
  }
}
