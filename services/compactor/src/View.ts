/**
 * The summarized view: the history the assembler gets instead of the full
 * one once a summary is live. Pure.
 *
 * The covered span `coversFromSeq..coversToSeq` is replaced by a synthetic
 * pair — a user message `[Summary of messages a–b] ...` carrying the
 * original request (the intent anchor, verbatim, when it lies in the span)
 * and the summary, then an assistant message {@link ACK} — followed by every
 * message after the span, verbatim. Pinned `system` messages inside the span
 * stay, in order, before the pair. Why this shape:
 *
 * - Role alternation stays valid in both formats: the pair is user then
 *   assistant; the Anthropic renderer merges same-role neighbours (the tail
 *   always starts on a unit boundary, never with a tool result), and OpenAI
 *   accepts them as they are.
 * - The summary message is the view's first user message with text, so the
 *   Window keeps it as the intent anchor whatever it cuts; the task is never
 *   lost.
 * - The view is append-mostly: the same summary renders byte-identically on
 *   every turn and new messages only append, so the cached prefix changes
 *   only when a new summary lands ({@link View.key} changes then: drop the
 *   landmarks and the mask grid kept for the old view).
 */
import type { Pipeline } from "@ctxd/context"
import { Window } from "@ctxd/context"
import type { Conversation, Summarize } from "@ctxd/contracts"

/** The index of the first message with `seq > afterSeq` (binary search; seqs ascend): where a span ending at `afterSeq` ends in the history. */
export const indexAfter = (history: ReadonlyArray<{ readonly seq: number }>, afterSeq: number): number => {
  let lo = 0
  let hi = history.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (history[mid]!.seq <= afterSeq) lo = mid + 1
    else hi = mid
  }
  return lo
}

/** A live summary: what it covers and its text. */
export interface Summary {
  /** Database id, when stored. */
  readonly id?: number | undefined
  readonly coversFromSeq: number
  readonly coversToSeq: number
  readonly text: string
  readonly mode: Summarize.Mode
  readonly depth: number
}

/** The assistant half of the pair. */
export const ACK = "Understood. I will continue from this summary and the messages that follow."

/** The first line of the user half. */
export const header = (summary: Summary): string =>
  `[Summary of messages ${summary.coversFromSeq}–${summary.coversToSeq}: the earlier conversation was compacted]`

const anchorText = (message: Conversation.Message): string =>
  message.parts
    .map((p) => (p.type === "text" ? p.text : p.type === "image" ? "[image]" : ""))
    .filter((t) => t !== "")
    .join("\n")

/** The synthetic pair for `summary`; `anchor` is the original request when the span covers it. */
export const pair = (
  summary: Summary,
  anchor: Conversation.Message | undefined,
): readonly [Conversation.Message, Conversation.Message] => {
  const request = anchor === undefined ? "" : `The conversation began with this request:\n${anchorText(anchor)}\n\n`
  return [
    { role: "user", parts: [{ type: "text", text: `${header(summary)}\n\n${request}Summary:\n${summary.text}` }] },
    { role: "assistant", parts: [{ type: "text", text: ACK }] },
  ]
}

/** A summarized view of the history. */
export interface View {
  /** What to pass to `Pipeline.assemble` as `history`. */
  readonly messages: ReadonlyArray<Pipeline.StoredMessage>
  readonly summary: Summary | undefined
  /** History index of the first message after the covered span (0 without a summary). */
  readonly tailFrom: number
  /** Messages the view puts before `history[tailFrom]` (pinned + the pair). */
  readonly prefixLength: number
  /** Changes exactly when the summary does: landmarks and mask grids of another key are stale. */
  readonly key: string
}

/**
 * The view of `history` (seq ascending) under `summary`; the full history
 * when there is none. `countMessage` counts the two synthetic messages under
 * the request's encoding. Cost: O(history) for the slice, O(anchor index)
 * to find the anchor.
 */
export const applySummary = (
  history: ReadonlyArray<Pipeline.StoredMessage>,
  summary: Summary | undefined,
  countMessage: (message: Conversation.Message) => number,
): View => {
  if (summary === undefined || history.length === 0) {
    return { messages: history, summary: undefined, tailFrom: 0, prefixLength: 0, key: "none" }
  }
  const start = indexAfter(history, summary.coversFromSeq - 1)
  const tailFrom = indexAfter(history, summary.coversToSeq)
  const pinned: Array<Pipeline.StoredMessage> = []
  let anchor: Conversation.Message | undefined
  for (let i = start; i < tailFrom; i++) {
    const m = history[i]!
    if (m.message.role === "system") pinned.push(m)
    else if (anchor === undefined && Window.isAnchor(m.message)) anchor = m.message
  }
  const [user, assistant] = pair(summary, anchor)
  const prefix: Array<Pipeline.StoredMessage> = [
    ...history.slice(0, start),
    ...pinned,
    { seq: summary.coversFromSeq, message: user, tokens: countMessage(user) },
    { seq: summary.coversToSeq, message: assistant, tokens: countMessage(assistant) },
  ]
  return {
    messages: prefix.concat(history.slice(tailFrom)),
    summary,
    tailFrom,
    prefixLength: prefix.length,
    key: `${summary.coversFromSeq}-${summary.coversToSeq}-${summary.id ?? "x"}`,
  }
}

/**
 * Extends a view with messages appended to the history since it was made
 * (`history` is the same history, longer): the prefix is reused as is.
 */
export const extend = (view: View, history: ReadonlyArray<Pipeline.StoredMessage>): View => {
  if (view.summary === undefined) return { ...view, messages: history }
  const known = view.messages.length - view.prefixLength + view.tailFrom
  if (history.length <= known) return view
  return { ...view, messages: view.messages.concat(history.slice(known)) }
}
