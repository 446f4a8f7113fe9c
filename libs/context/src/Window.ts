/**
 * Message-count windowing. The window keeps the last `windowMessages` (N)
 * non-system messages, but its cut moves on a grid of `step` messages so the
 * prompt prefix (and so the provider's cache) changes once every `step`
 * messages rather than every turn. The cut is then moved forward to a unit
 * boundary (a tool call never loses its results).
 *
 * Never dropped: pinned `system`-role messages and messages holding a
 * provider compaction (the provider's summary of what preceded it, see
 * `ProviderCompaction`; both kept in place), the intent anchor (the first
 * request) and the newest exchange. A request is a user
 * message with non-tool content. The newest exchange is what the model must
 * see to answer this turn: the latest request, and the last message with its
 * whole tool-call group (the assistant message carrying the calls and all
 * their results). The window never starts after that group, however large
 * it is; the latest request, when older than the window's start, is kept
 * before it like the anchor. Positions on the grid count non-system messages
 * only, so a pinned message arriving mid-session does not move the cut.
 *
 * Cache-aware: the request that was the latest when the cut last moved stays
 * in front of the window until the cut moves again, so a new request does
 * not change the prefix (see {@link Window.held}).
 */
import type { Conversation } from "@ctxd/contracts"
import * as ProviderCompaction from "./ProviderCompaction.ts"
import * as Units from "./Units.ts"

/**
 * Where the anchor and the pinned messages are. Cheap to extend as the
 * history grows (see {@link landmarks}), so a caller may keep it between turns.
 */
export interface Landmarks {
  /** History index of the intent anchor, if there is one yet. */
  readonly anchor: number | undefined
  /** History indices of `system`-role messages and of messages holding a provider compaction, ascending. */
  readonly pinned: ReadonlyArray<number>
  /** History indices of requests ({@link isRequest}), ascending: the anchor first, the latest last. */
  readonly requests: ReadonlyArray<number>
  /** How many history messages were scanned (the next scan starts here). */
  readonly scanned: number
}

/** True for a request: a user message with some non-tool content. The first one is the anchor. */
export const isRequest = (message: Conversation.Message): boolean =>
  message.role === "user" && message.parts.some((p) => p.type !== "tool_call" && p.type !== "tool_result")

/** True for a candidate anchor: a request ({@link isRequest}). */
export const isAnchor = isRequest

/**
 * Finds the anchor, the requests and the pinned messages, scanning only the
 * messages after `previous.scanned` when a previous result for a prefix of
 * the same history is given (so a caller that keeps it pays O(new messages)
 * per turn).
 */
export const landmarks = (history: ReadonlyArray<Units.Entry>, previous?: Landmarks): Landmarks => {
  const from = previous !== undefined && previous.scanned <= history.length ? previous.scanned : 0
  let anchor = from === 0 ? undefined : previous?.anchor
  let added: Array<number> | undefined
  let asked: Array<number> | undefined
  for (let i = from; i < history.length; i++) {
    const message = history[i]!.message
    if ((message.role === "system" && message.midConversation !== true) || ProviderCompaction.holds(message)) (added ??= []).push(i)
    else if (isRequest(message)) {
      anchor ??= i
      ;(asked ??= []).push(i)
    }
  }
  const base = from === 0 ? [] : (previous?.pinned ?? [])
  const requests = from === 0 ? [] : (previous?.requests ?? [])
  return {
    anchor,
    pinned: added === undefined ? base : base.concat(added),
    requests: asked === undefined ? requests : requests.concat(asked),
    scanned: history.length,
  }
}

/** The last element of an ascending array that is < `x` (binary search). */
const lastBelow = (sorted: ReadonlyArray<number>, x: number): number | undefined => {
  let lo = 0
  let hi = sorted.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (sorted[mid]! < x) lo = mid + 1
    else hi = mid
  }
  return lo === 0 ? undefined : sorted[lo - 1]
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
  /**
   * Keep the window starting here (the previous turn's start) rather than
   * advancing it: an edit the cache planner defers. Ignored when not before
   * the computed start.
   */
  readonly holdStart?: number | undefined
}

/** A computed window: history indices `[start, history.length)` plus what is kept before it. */
export interface Window {
  /** First history index inside the window (a unit boundary, never after {@link lastUnit}). */
  readonly start: number
  /** The grid cut before moving to a unit boundary. */
  readonly gridCut: number
  /** Start of the newest exchange's tool-call group (`Units.lastUnitStart`): always in the window. */
  readonly lastUnit: number
  /** The anchor, if any (kept wherever it is). */
  readonly anchor: number | undefined
  /** The latest request, if any (kept wherever it is: part of the newest exchange). */
  readonly request: number | undefined
  /**
   * An older request kept before `start`: the one that was the latest when
   * the cut last moved, while a newer request has arrived since (only when it
   * is neither the anchor nor in the window). It keeps the prefix unchanged
   * until the cut moves again; the budget may drop it.
   */
  readonly held: number | undefined
  /** Pinned messages before `start`, ascending (kept). */
  readonly pinnedBefore: ReadonlyArray<number>
}

/**
 * Computes the window over `history`: the grid cut moved forward to a unit
 * boundary, but never past the start of the newest exchange's tool-call
 * group (so a group larger than the window is sent whole). Cost:
 * O(pinned + unit length + log requests), not O(history) — given the
 * {@link landmarks}.
 */
export const compute = (history: ReadonlyArray<Units.Entry>, options: WindowOptions, marks: Landmarks): Window => {
  const pinned = marks.pinned
  const m = history.length - pinned.length
  const rel = cutIndex(m, options.windowMessages, Math.max(1, options.windowStep))
  const gridCut = rel === 0 ? 0 : Math.min(history.length, absolute(rel, pinned))
  const lastUnit = Units.lastUnitStart(history)
  const advanced = Math.min(Units.nextBoundary(history, gridCut), lastUnit)
  const start = options.holdStart !== undefined && options.holdStart >= 0 && options.holdStart < advanced ? options.holdStart : advanced
  const request = marks.requests.at(-1)
  // The cut moved to `rel` when the history reached `rel + windowMessages` non-system messages.
  const latestThen = rel === 0 ? undefined : lastBelow(marks.requests, absolute(rel + options.windowMessages, pinned))
  const held =
    latestThen !== undefined && latestThen < start && latestThen !== request && latestThen !== marks.anchor ? latestThen : undefined
  return {
    start,
    gridCut,
    lastUnit,
    anchor: marks.anchor,
    request,
    held,
    pinnedBefore: pinned.slice(0, pinnedBefore(start, pinned)),
  }
}
