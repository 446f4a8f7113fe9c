/**
 * Budget allocation over the window. The history budget is what remains of
 * the total after system, tools and the memory actually used. Inside the
 * window, a protected fresh tail (plus the anchor and pinned messages) is
 * always kept; the evictable prefix before the tail is filled newest-first,
 * unit by unit, and the first unit that does not fit is dropped together with
 * everything older (contiguous, no holes).
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
  /** First index of the protected fresh tail (a unit boundary ≥ window start). */
  readonly tailStart: number
  /** Everything from here on is kept; before it only the anchor and pinned messages. */
  readonly cut: number
  /** Kept history indices, ascending. */
  readonly kept: Array<number>
  /** Tokens of the kept messages. */
  readonly keptTokens: number
  /** Tokens of tail + anchor + pinned: what is kept whatever the budget. */
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

/**
 * Allocates the history budget over `window`. Cost: O(window) plus binary
 * searches over the pinned indices. The fresh tail is the last
 * `freshTailMessages` messages of the window, extended back to a unit
 * boundary (never before the window start).
 */
export const allocate = (history: ReadonlyArray<Entry>, window: Window.Window, input: BudgetInput): Allocation => {
  const n = history.length
  const start = window.start
  const step = Math.max(1, input.windowStep)
  const tailStart =
    input.freshTailMessages <= 0 ? n : Units.unitStart(history, Math.max(start, n - input.freshTailMessages))
  const anchor = window.anchor
  const isProtected = (i: number): boolean => i === anchor || contains(input.pinned, i)
  const tokenOf = input.tokenOf ?? ((i: number): number => history[i]!.tokens)

  let protectedTokens = 0
  for (let i = tailStart; i < n; i++) protectedTokens += tokenOf(i)
  // Pinned messages and the anchor before the tail.
  const early: Array<number> = []
  let anchorPlaced = anchor === undefined || anchor >= tailStart
  for (const p of input.pinned) {
    if (p >= tailStart) break
    if (!anchorPlaced && anchor! < p) {
      early.push(anchor!)
      anchorPlaced = true
    }
    early.push(p)
  }
  if (!anchorPlaced) early.push(anchor!)
  for (const i of early) protectedTokens += tokenOf(i)

  const available = input.totalTokens - input.systemTokens - input.toolsTokens
  const historyBudget = available - input.memoryTokens
  const overBudget = protectedTokens > historyBudget

  let cut = tailStart
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
  }

  const kept: Array<number> = []
  let keptTokens = 0
  let beforeStart = 0
  let beforeCut = 0
  for (const i of early) {
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
  return {
    historyBudget,
    tailStart,
    cut,
    kept,
    keptTokens,
    protectedTokens,
    overBudget,
    droppedByWindow: start - beforeStart,
    droppedByBudget: cut - start - beforeCut,
  }
}
