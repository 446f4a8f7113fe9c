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
 *
 * A provider-written summary (one the compactor asked the API for, see
 * `ProviderSummary`) replaces the span with its signed block instead, in the
 * block's format; elsewhere its readable content makes the pair.
 *
 * A provider compaction (Anthropic's `compaction` block, OpenAI's
 * `compaction` item) is a boundary: the view starts at the latest one of the
 * request's format and ctxd's summaries only ever fold what follows it
 * (see {@link applySummary}).
 */
import type { Pipeline } from "@ctxd/context"
import { ProviderCompaction, Window } from "@ctxd/context"
import type { Conversation, Summarize, Turn } from "@ctxd/contracts"

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
  /**
   * A provider-written summary (Anthropic on-demand compaction): the signed
   * `compaction` block, verbatim; `text` is its readable content.
   */
  readonly block?: Readonly<Record<string, unknown>> | undefined
}

/** The format a provider-written summary's block belongs to: only its requests send the block. */
export const BLOCK_FORMAT: Turn.Format = "anthropic"

/**
 * The view's head for a provider-written summary: one assistant message
 * holding the signed block, which the API takes first in `messages` in place
 * of every message it summarized (the on-demand compaction docs' "continue
 * from the summary").
 */
export const blockMessage = (block: Readonly<Record<string, unknown>>): Conversation.Message => ({
  role: "assistant",
  parts: [{ type: "opaque", format: BLOCK_FORMAT, block }],
})

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
export const pair = (summary: Summary, anchor: Conversation.Message | undefined): readonly [Conversation.Message, Conversation.Message] => {
  const request = anchor === undefined ? "" : `The conversation began with this request:\n${anchorText(anchor)}\n\n`
  return [
    { role: "user", parts: [{ type: "text", text: `${header(summary)}\n\n${request}Summary:\n${summary.text}` }] },
    { role: "assistant", parts: [{ type: "text", text: ACK }] },
  ]
}

/** A provider compaction boundary in the history (see `ProviderCompaction`). */
export interface Boundary {
  /** History index of the latest message holding a provider compaction of the view's format. */
  readonly index: number
  readonly seq: number
  /** The format of that compaction. */
  readonly format: string
}

/** A summarized view of the history. */
export interface View {
  /** What to pass to `Pipeline.assemble` as `history`. */
  readonly messages: ReadonlyArray<Pipeline.StoredMessage>
  /** The summary the view applies: `undefined` without one, or when a provider boundary supersedes it. */
  readonly summary: Summary | undefined
  /** The summary the view was made with (applied or superseded): compare it to tell whether it changed. */
  readonly given?: Summary | undefined
  /** The provider compaction boundary the view starts at, if any: nothing before it is in `messages`. */
  readonly boundary?: Boundary | undefined
  /** The format whose provider compactions are boundaries (`undefined`: any format's). */
  readonly format?: Turn.Format | undefined
  /** History index of the first message after the covered span (0 without a summary or boundary). */
  readonly tailFrom: number
  /** Messages the view puts before `history[tailFrom]` (the boundary, pinned + the pair). */
  readonly prefixLength: number
  /** Changes exactly when the summary or the boundary does: landmarks and mask grids of another key are stale. */
  readonly key: string
}

/**
 * The latest provider compaction boundary of `format` in `history` (any
 * format's when undefined), scanning from `from` (see `ProviderCompaction.boundary`).
 */
export const boundaryOf = (
  history: ReadonlyArray<Pipeline.StoredMessage>,
  format: Turn.Format | undefined,
  from = 0,
): Boundary | undefined => {
  const index = ProviderCompaction.boundary(history, format, from)
  if (index === undefined) return undefined
  const message = history[index]!.message
  const part = message.parts.findLast((p) => ProviderCompaction.isCompaction(p, format))
  return { index, seq: history[index]!.seq, format: part === undefined ? "unknown" : (ProviderCompaction.formatOf(part) ?? "unknown") }
}

/** True when `summary` applies under `boundary`: it was made after it (it folds only messages that follow it). */
export const appliesAfter = (summary: Summary, boundary: Boundary | undefined): boolean =>
  boundary === undefined || summary.coversFromSeq > boundary.seq

/** The highest seq the view folds (summary or provider boundary): a compaction job's `afterSeq`. */
export const foldedThrough = (view: View): number => Math.max(view.summary?.coversToSeq ?? 0, view.boundary?.seq ?? 0)

/**
 * The view of `history` (seq ascending) under `summary`; the full history
 * when there is none. `countMessage` counts the two synthetic messages under
 * the request's encoding. Cost: O(history) for the slice, O(anchor index)
 * to find the anchor.
 *
 * With a provider compaction boundary (the latest message holding a
 * provider compaction of `format`; any format's when `format` is undefined)
 * the view starts at it, trimmed to its compaction part onwards
 * (`ProviderCompaction.trim`): what precedes it is what the provider
 * folded (the trimmed message keeps its stored token count: an upper
 * bound). A summary that does not start after the boundary is superseded
 * by it (not applied); one made after it follows the boundary message.
 */
export const applySummary = (
  history: ReadonlyArray<Pipeline.StoredMessage>,
  summary: Summary | undefined,
  countMessage: (message: Conversation.Message) => number,
  format?: Turn.Format,
): View => {
  const boundary = boundaryOf(history, format)
  const applied = summary !== undefined && appliesAfter(summary, boundary) ? summary : undefined
  const marks = { given: summary, boundary, format }
  const head: Array<Pipeline.StoredMessage> =
    boundary === undefined
      ? []
      : [{ ...history[boundary.index]!, message: ProviderCompaction.trim(history[boundary.index]!.message, format) }]
  const base = boundary === undefined ? 0 : boundary.index + 1
  const boundaryKey = boundary === undefined ? "" : `|b${boundary.seq}`
  if (applied === undefined || history.length === 0) {
    if (boundary === undefined) return { messages: history, summary: undefined, ...marks, tailFrom: 0, prefixLength: 0, key: "none" }
    return {
      messages: head.concat(history.slice(base)),
      summary: undefined,
      ...marks,
      tailFrom: base,
      prefixLength: 1,
      key: `none${boundaryKey}`,
    }
  }
  const start = Math.max(base, indexAfter(history, applied.coversFromSeq - 1))
  const tailFrom = Math.max(start, indexAfter(history, applied.coversToSeq))
  const pinned: Array<Pipeline.StoredMessage> = []
  let anchor: Conversation.Message | undefined
  for (let i = start; i < tailFrom; i++) {
    const m = history[i]!
    if (m.message.role === "system") pinned.push(m)
    else if (anchor === undefined && Window.isAnchor(m.message)) anchor = m.message
  }
  if (applied.block !== undefined && format === BLOCK_FORMAT) {
    // the block stands for all it summarized: the view up to the cut (a boundary, pinned messages, an
    // older summary included), so nothing of it is repeated; turns appended meanwhile follow verbatim
    const message = blockMessage(applied.block)
    const head: Array<Pipeline.StoredMessage> = [{ seq: applied.coversToSeq, message, tokens: countMessage(message) }]
    return {
      messages: head.concat(history.slice(tailFrom)),
      summary: applied,
      ...marks,
      tailFrom,
      prefixLength: 1,
      key: `${applied.coversFromSeq}-${applied.coversToSeq}-${applied.id ?? "x"}p${boundaryKey}`,
    }
  }
  const [user, assistant] = pair(applied, anchor)
  const prefix: Array<Pipeline.StoredMessage> = [
    ...head,
    ...history.slice(base, start),
    ...pinned,
    { seq: applied.coversFromSeq, message: user, tokens: countMessage(user) },
    { seq: applied.coversToSeq, message: assistant, tokens: countMessage(assistant) },
  ]
  return {
    messages: prefix.concat(history.slice(tailFrom)),
    summary: applied,
    ...marks,
    tailFrom,
    prefixLength: prefix.length,
    key: `${applied.coversFromSeq}-${applied.coversToSeq}-${applied.id ?? "x"}${boundaryKey}`,
  }
}

/**
 * Extends a view with messages appended to the history since it was made
 * (`history` is the same history, longer): the prefix is reused as is. When
 * an appended message holds a provider compaction of the view's format, the
 * view is made anew at that boundary (its summary, older, is superseded).
 */
export const extend = (view: View, history: ReadonlyArray<Pipeline.StoredMessage>): View => {
  const known = view.messages.length - view.prefixLength + view.tailFrom
  if (history.length <= known) return view
  if (ProviderCompaction.boundary(history, view.format, known) !== undefined) {
    // the summary predates the new boundary: no synthetic message is needed, so nothing to count
    return applySummary(history, view.given, () => 0, view.format)
  }
  if (view.summary === undefined && view.boundary === undefined) return { ...view, messages: history }
  return { ...view, messages: view.messages.concat(history.slice(known)) }
}
