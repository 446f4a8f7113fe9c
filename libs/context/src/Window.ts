/**
 * Message-count windowing. The window keeps the last `windowMessages` (N)
 * non-system messages, but its cut moves on a grid of `step` messages so the
 * prompt prefix (and so the provider's cache) changes once every `step`
 * messages rather than every turn. The cut is then moved forward to a unit
 * boundary (a tool call never loses its results).
 *
 * Never dropped: pinned `system`-role messages (kept in place) and the intent
 * anchor, the first user message with non-tool content. Positions on the grid
 * count non-system messages only, so a pinned message arriving mid-session
 * does not move the cut.
 */
import type { Conversation } from "@ctxd/contracts"
import * as Units from "./Units.ts"

/**
 * Where the anchor and the pinned messages are. Cheap to extend as the
 * history grows (see {@link landmarks}), so a caller may keep it between turns.
 */
export interface Landmarks {
  /** History index of the intent anchor, if there is one yet. */
  readonly anchor: number | undefined
  /** History indices of `system`-role messages, ascending. */
  readonly pinned: ReadonlyArray<number>
  /** How many history messages were scanned (the next scan starts here). */
  readonly scanned: number
}

/** True for a user message with some non-tool content: a candidate anchor. */
export const isAnchor = (message: Conversation.Message): boolean =>
  message.role === "user" && message.parts.some((p) => p.type !== "tool_call" && p.type !== "tool_result")

/**
 * Finds the anchor and pinned messages, scanning only the messages after
 * `previous.scanned` when a previous result for a prefix of the same history
 * is given (so a caller that keeps it pays O(new messages) per turn).
 */
export const landmarks = (history: ReadonlyArray<Units.Entry>, previous?: Landmarks): Landmarks => {
  const from = previous !== undefined && previous.scanned <= history.length ? previous.scanned : 0
  let anchor = from === 0 ? undefined : previous?.anchor
  let added: Array<number> | undefined
  for (let i = from; i < history.length; i++) {
    const message = history[i]!.message
    if (message.role === "system") (added ??= []).push(i)
    else if (anchor === undefined && isAnchor(message)) anchor = i
  }
  const base = from === 0 ? [] : (previous?.pinned ?? [])
  return { anchor, pinned: added === undefined ? base : base.concat(added), scanned: history.length }
}

/** How many pinned indices are < `abs` (binary search). */
const pinnedBefore = (abs: number, pinned: ReadonlyArray<number>): number => {
  let lo = 0
  let hi = pinned.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (pinned[mid]! < abs) lo = mid + 1
    else hi = mid
  }
  return lo
}

/** The non-system position of history index `abs`: `abs` minus the pinned messages before it. */
export const relative = (abs: number, pinned: ReadonlyArray<number>): number => abs - pinnedBefore(abs, pinned)

/** The history index of the `rel`-th non-system message (or just past the last one). */
export const absolute = (rel: number, pinned: ReadonlyArray<number>): number => {
  let abs = rel
  for (const p of pinned) {
    if (p <= abs) abs++
    else break
  }
  return abs
}

/**
 * The grid cut for `n` messages: 0 when `n ≤ windowMessages`, else
 * `floor((n − windowMessages) / step) * step`, so between `windowMessages`
 * and `windowMessages + step − 1` messages remain after it.
 */
export const cutIndex = (n: number, windowMessages: number, step: number): number =>
  n <= windowMessages ? 0 : Math.floor((n - windowMessages) / step) * step

/** The window knobs (defaults 40 and 20 are applied by `Pipeline.resolveOptions`). */
export interface WindowOptions {
  readonly windowMessages: number
  readonly windowStep: number
}

/** A computed window: history indices `[start, history.length)` plus what is kept before it. */
export interface Window {
  /** First history index inside the window (a unit boundary). */
  readonly start: number
  /** The grid cut before moving to a unit boundary. */
  readonly gridCut: number
  /** The anchor, if any (kept wherever it is). */
  readonly anchor: number | undefined
  /** Pinned messages before `start`, ascending (kept). */
  readonly pinnedBefore: ReadonlyArray<number>
}

/**
 * Computes the window over `history`. Cost: O(pinned + unit length), not
 * O(history) — given the {@link landmarks}.
 */
export const compute = (history: ReadonlyArray<Units.Entry>, options: WindowOptions, marks: Landmarks): Window => {
  const pinned = marks.pinned
  const m = history.length - pinned.length
  const rel = cutIndex(m, options.windowMessages, Math.max(1, options.windowStep))
  const gridCut = rel === 0 ? 0 : Math.min(history.length, absolute(rel, pinned))
  const start = Units.nextBoundary(history, gridCut)
  return { start, gridCut, anchor: marks.anchor, pinnedBefore: pinned.slice(0, pinnedBefore(start, pinned)) }
}
