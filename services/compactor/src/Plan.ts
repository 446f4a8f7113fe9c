/**
 * When to compact and where to cut, pure.
 *
 * When: the pre-flight estimate of a turn (system + tools + the summarized
 * view, see {@link estimate}) against the effective window W (context window
 * − max output tokens):
 *
 * - below `softPct × W` (default 0.6): nothing;
 * - from `softPct × W`: compact in the background (`reason: "soft"`), so
 *   the next turn finds the summary ready; from `compactAtPct × W` (default
 *   0.75) the same, `reason: "hard"` (overdue: the summary should land now);
 * - above W: the turn would not fit: compact now and wait (`blocking`); if
 *   that fails the turn goes out as the budget cut leaves it.
 *
 * With `softPct ≥ compactAtPct` background compaction starts at
 * `compactAtPct`.
 *
 * Where: the last `tail_keep_tokens` stay verbatim (default 20,000; at most
 * `tailMaxPct` × W, default 0.3, and at most half of what the soft threshold
 * leaves beside the fixed part, so a compaction lands well below the soft
 * threshold and the next one is many turns away); the head since the
 * previous summary is folded. The cut is moved back to a unit boundary (the
 * tail then keeps a little more), or forward when that leaves nothing new to
 * fold; never between a tool call and its results. `NoBoundary` when no such
 * cut folds anything, or (background compactions) folds less than
 * `minFoldPct` × W (default 0.05): the prefix changes rarely and in large
 * steps, never a little every turn (lesson 2).
 */
import { Units } from "@ctxd/context"
import type { Pipeline } from "@ctxd/context"
import type { Turn } from "@ctxd/contracts"
import type * as View from "./View.ts"
import { appliesAfter, boundaryOf, indexAfter } from "./View.ts"

/** The thresholds (defaults in {@link defaults}). */
export interface Thresholds {
  /** Share of the effective window at which compaction is due; default 0.75. */
  readonly compactAtPct: number
  /** Share at which background compaction starts; default 0.6. */
  readonly softPct: number
  /** Tokens of the newest messages kept verbatim; default 20,000. */
  readonly tailKeepTokens: number
  /** The kept tail is at most this share of the effective window; default 0.3. */
  readonly tailMaxPct: number
  /** A background compaction folds at least this share of the effective window; default 0.05. */
  readonly minFoldPct: number
}

/** `compact_at_pct` 0.75, soft 0.6, tail 20,000 tokens, tail at most 0.3 of the window, fold at least 0.05 of it. */
export const defaults: Thresholds = { compactAtPct: 0.75, softPct: 0.6, tailKeepTokens: 20_000, tailMaxPct: 0.3, minFoldPct: 0.05 }

/** What a turn should do about compaction. */
export type Trigger = "none" | "background" | "blocking"

/** A decision and the numbers behind it. */
export interface Decision {
  readonly trigger: Trigger
  /** `below_soft`, `soft` (background, early), `hard` (background, due) or `over_window` (blocking). */
  readonly reason: "below_soft" | "soft" | "hard" | "over_window"
  readonly estimate: number
  readonly effectiveWindow: number
  /** `estimate / effectiveWindow`. */
  readonly utilization: number
}

/** The pre-flight estimate: the fixed part (system, tools, memory) plus every message of the view. */
export const estimate = (view: ReadonlyArray<{ readonly tokens: number }>, fixedTokens: number): number => {
  let sum = fixedTokens
  for (const m of view) sum += m.tokens
  return sum
}

/** Decides from the pre-flight `estimate` (see the module doc). */
export const decide = (estimateTokens: number, effectiveWindow: number, t: Thresholds = defaults): Decision => {
  const soft = Math.min(t.softPct, t.compactAtPct) * effectiveWindow
  const hard = t.compactAtPct * effectiveWindow
  const utilization = effectiveWindow > 0 ? estimateTokens / effectiveWindow : Number.POSITIVE_INFINITY
  const base = { estimate: estimateTokens, effectiveWindow, utilization }
  if (estimateTokens > effectiveWindow) return { ...base, trigger: "blocking", reason: "over_window" }
  if (estimateTokens >= hard) return { ...base, trigger: "background", reason: "hard" }
  if (estimateTokens >= soft) return { ...base, trigger: "background", reason: "soft" }
  return { ...base, trigger: "none", reason: "below_soft" }
}

/**
 * Tokens kept verbatim: `min(tailKeepTokens, floor(tailMaxPct × W),
 * floor((soft × W − fixedTokens) / 2))`, at least 0.
 */
export const tailKeep = (effectiveWindow: number, t: Thresholds = defaults, fixedTokens = 0): number =>
  Math.max(
    0,
    Math.min(
      t.tailKeepTokens,
      Math.floor(t.tailMaxPct * effectiveWindow),
      Math.floor((Math.min(t.softPct, t.compactAtPct) * effectiveWindow - fixedTokens) / 2),
    ),
  )

/** Options of {@link planCut}. */
export interface CutOptions {
  /** System + tools (+ memory) tokens beside the history; default 0. */
  readonly fixedTokens?: number | undefined
  /** Fold at least this many tokens or answer `NoBoundary`; default 0 (a blocking or manual compaction folds what it can). */
  readonly minFoldTokens?: number | undefined
  /** The format whose provider compactions are boundaries the cut never crosses; default: any format's. */
  readonly format?: Turn.Format | undefined
}

/** A cut: fold history indices `[fromIndex, toIndex)` (with the previous summary) into a new summary. */
export interface Cut {
  readonly _tag: "Cut"
  /** First index of the new span (just after the previous summary's coverage, or the provider boundary). */
  readonly fromIndex: number
  /** First index kept verbatim (a unit boundary). */
  readonly toIndex: number
  /** The new summary covers `coversFromSeq..coversToSeq` (from the start of the history, rolling). */
  readonly coversFromSeq: number
  readonly coversToSeq: number
  /** Tokens of the new span folded now. */
  readonly foldTokens: number
  /** Tokens of the verbatim tail. */
  readonly tailTokens: number
  /** The summary the new one rolls in (the live one, unless a provider boundary superseded it). */
  readonly previous: View.Summary | undefined
}

/** No cut folds anything without splitting a tool call from its result. */
export interface NoBoundary {
  readonly _tag: "NoBoundary"
  readonly reason: string
}

/**
 * Where to cut the full stored `history` (seq ascending), given the live
 * summary (if any) and the effective window (see the module doc). A
 * provider compaction boundary (`options.format`'s, any format's by
 * default; see `View.applySummary`) is never folded across: the span starts
 * after it, and a live summary made before it is superseded (the new one
 * covers only what follows the boundary and does not roll the old one in).
 */
export const planCut = (
  history: ReadonlyArray<Pipeline.StoredMessage>,
  summary: View.Summary | undefined,
  effectiveWindow: number,
  t: Thresholds = defaults,
  options: CutOptions = {},
): Cut | NoBoundary => {
  const n = history.length
  const boundary = boundaryOf(history, options.format)
  const previous = summary !== undefined && appliesAfter(summary, boundary) ? summary : undefined
  const after = boundary === undefined ? 0 : boundary.index + 1
  const from = Math.max(after, previous === undefined ? 0 : indexAfter(history, previous.coversToSeq))
  if (from >= n) {
    return {
      _tag: "NoBoundary",
      reason:
        previous === undefined && boundary !== undefined
          ? "no messages after the provider compaction"
          : "no messages after the live summary",
    }
  }
  const keep = tailKeep(effectiveWindow, t, options.fixedTokens ?? 0)
  let tailStart = n
  let acc = 0
  while (tailStart > from && acc < keep) acc += history[--tailStart]!.tokens
  if (acc < keep || tailStart <= from) {
    return { _tag: "NoBoundary", reason: `the ${acc} tokens since the live summary fit in the kept tail of ${keep}` }
  }
  let cut = Units.unitStart(history, tailStart)
  if (cut <= from) cut = Units.nextBoundary(history, tailStart + 1)
  if (cut <= from || cut >= n) {
    return { _tag: "NoBoundary", reason: "every cut that keeps the tail would split a tool call from its result" }
  }
  let foldTokens = 0
  let folded = false
  for (let i = from; i < cut; i++) {
    foldTokens += history[i]!.tokens
    if (history[i]!.message.role !== "system") folded = true
  }
  if (!folded) return { _tag: "NoBoundary", reason: "only pinned system messages before the cut" }
  const minFold = options.minFoldTokens ?? 0
  if (foldTokens < minFold) {
    return { _tag: "NoBoundary", reason: `only ${foldTokens} tokens to fold, less than the minimum of ${minFold}` }
  }
  let tailTokens = 0
  for (let i = cut; i < n; i++) tailTokens += history[i]!.tokens
  return {
    _tag: "Cut",
    fromIndex: from,
    toIndex: cut,
    coversFromSeq: previous?.coversFromSeq ?? history[from]!.seq,
    coversToSeq: history[cut - 1]!.seq,
    foldTokens,
    tailTokens,
    previous,
  }
}
