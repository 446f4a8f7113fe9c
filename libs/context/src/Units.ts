/**
 * Atomic units of a history: an assistant message that makes tool calls
 * together with the run of `tool` messages right after it (parallel calls
 * stay together); any other message is a unit of its own, and so is a `tool`
 * message that does not follow such an assistant message (a headless result).
 *
 * Cuts (window, budget) only ever fall on unit boundaries, and
 * {@link prune} removes what still does not pair: results whose call is not
 * in their unit, and calls whose result is not in their unit. All functions
 * work on indices into the history, touching only the messages they need.
 */
import type { Conversation } from "@ctxd/contracts"

/** Anything holding a neutral message: the store's rows, or a wrapped plain message. */
export interface Entry {
  readonly message: Conversation.Message
}

/** Wraps plain messages as entries (for tests and callers without stored rows). */
export const entries = (messages: ReadonlyArray<Conversation.Message>): Array<Entry> => messages.map((message) => ({ message }))

/** True when the message makes at least one tool call. */
export const hasToolCalls = (message: Conversation.Message): boolean =>
  message.role === "assistant" && message.parts.some((p) => p.type === "tool_call")

/**
 * The index of the assistant message heading the unit that `i` continues, or
 * -1 when message `i` starts a unit itself. Cost: the length of the tool run.
 */
export const headOf = (history: ReadonlyArray<Entry>, i: number): number => {
  if (history[i]?.message.role !== "tool") return -1
  let j = i - 1
  while (j >= 0 && history[j]!.message.role === "tool") j--
  return j >= 0 && hasToolCalls(history[j]!.message) ? j : -1
}

/** True when a unit starts at `i` (and at `0` and `history.length`). */
export const isBoundary = (history: ReadonlyArray<Entry>, i: number): boolean => i <= 0 || i >= history.length || headOf(history, i) === -1

/** The smallest unit boundary ≥ `i` (at most `history.length`). */
export const nextBoundary = (history: ReadonlyArray<Entry>, i: number): number => {
  if (i <= 0) return 0
  if (isBoundary(history, i)) return i
  let j = i
  while (j < history.length && history[j]!.message.role === "tool") j++
  return j
}

/** The largest unit boundary ≤ `i`: the start of the unit containing message `i`. */
export const unitStart = (history: ReadonlyArray<Entry>, i: number): number => {
  if (i >= history.length) return history.length
  const head = headOf(history, i)
  return head === -1 ? Math.max(0, i) : head
}

/**
 * Where the newest exchange's tool-call group starts: the unit of the last
 * non-system message (the assistant message carrying the calls when that
 * message is one of their results), or `history.length` when there is none.
 * Window, budget and masking never cut into it. Cost: the trailing pinned
 * messages plus the unit's length.
 */
export const lastUnitStart = (history: ReadonlyArray<Entry>): number => {
  let i = history.length - 1
  while (i >= 0 && history[i]!.message.role === "system") i--
  return i < 0 ? history.length : unitStart(history, i)
}

/** A message of the view: its history index and its (possibly pruned) content. */
export interface ViewMessage {
  readonly index: number
  readonly message: Conversation.Message
}

/** The outcome of {@link prune}. */
export interface Pruned {
  readonly messages: Array<ViewMessage>
  /** Tool calls without a result and results without a call that were removed. */
  readonly orphans: { calls: number; results: number }
  /** History indices of messages dropped because nothing was left in them. */
  readonly dropped: Array<number>
}

const withoutParts = (message: Conversation.Message, keep: (p: Conversation.Part) => boolean): Conversation.Message | undefined => {
  const parts = message.parts.filter(keep)
  return parts.length === 0 ? undefined : { ...message, parts }
}

/**
 * Removes orphans from a view given as ascending history indices. A call is
 * kept only when a result for it sits in the same unit and in the view; a
 * result only when its call does (the first result per call; later ones are
 * removed as orphans too). A message left without parts is dropped. Messages
 * that need no change are returned as they are (same object).
 */
export const prune = (history: ReadonlyArray<Entry>, indices: ReadonlyArray<number>): Pruned => {
  const out: Array<ViewMessage> = []
  const dropped: Array<number> = []
  const orphans = { calls: 0, results: 0 }
  let k = 0
  while (k < indices.length) {
    const index = indices[k]!
    const message = history[index]!.message
    if (message.role === "tool") {
      // Not reached through a head in this view: every result is an orphan.
      orphans.results += message.parts.reduce((n, p) => n + (p.type === "tool_result" ? 1 : 0), 0)
      const rest = withoutParts(message, (p) => p.type !== "tool_result")
      if (rest === undefined) dropped.push(index)
      else out.push({ index, message: rest })
      k++
      continue
    }
    if (!hasToolCalls(message)) {
      out.push({ index, message })
      k++
      continue
    }
    // A head: gather the tool messages of its unit that are in the view.
    let end = k + 1
    while (end < indices.length && indices[end] === indices[end - 1]! + 1 && history[indices[end]!]!.message.role === "tool") {
      end++
    }
    const calls = new Set<string>()
    let callParts = 0
    for (const p of message.parts) {
      if (p.type === "tool_call") {
        calls.add(p.id)
        callParts++
      }
    }
    const answered = new Set<string>()
    const results: Array<ViewMessage | number> = []
    for (let r = k + 1; r < end; r++) {
      const ri = indices[r]!
      const tm = history[ri]!.message
      let changed = false
      const keep = (p: Conversation.Part): boolean => {
        if (p.type !== "tool_result") return true
        if (calls.has(p.callId) && !answered.has(p.callId)) {
          answered.add(p.callId)
          return true
        }
        orphans.results++
        changed = true
        return false
      }
      const parts = tm.parts.filter(keep)
      if (!changed) results.push({ index: ri, message: tm })
      else if (parts.length === 0) results.push(ri)
      else results.push({ index: ri, message: { ...tm, parts } })
    }
    let head: Conversation.Message | undefined = message
    if (answered.size < callParts) {
      // Unanswered calls go, and so does any repeat of a call id.
      const kept = new Set<string>()
      head = withoutParts(message, (p) => {
        if (p.type !== "tool_call") return true
        if (!answered.has(p.id) || kept.has(p.id)) return false
        kept.add(p.id)
        return true
      })
      orphans.calls += callParts - kept.size
    }
    if (head === undefined) dropped.push(index)
    else out.push({ index, message: head })
    for (const r of results) {
      if (typeof r === "number") dropped.push(r)
      else out.push(r)
    }
    k = end
  }
  return { messages: out, orphans, dropped }
}
