/**
 * Reasoning: the model's own thinking that a client passes back with the
 * assistant turn it led to — Anthropic `thinking` (signed) and
 * `redacted_thinking` (encrypted `data`) blocks, OpenAI Responses `reasoning`
 * items (`encrypted_content` when `store: false`). They are opaque parts of
 * the assistant message they came in; this module is the one place that
 * says which parts they are ({@link isReasoning}) and which of them a prompt
 * still needs ({@link frontier}).
 *
 * What the providers require (their API references and 400 errors):
 *
 * - Anthropic: thinking blocks go only in assistant messages, unmodified
 *   (`thinking` with its `signature`, `redacted_thinking` with its `data`),
 *   in the order they were produced. With `thinking` enabled, in a tool-use
 *   continuation (the last user message carries `tool_result`s) the
 *   assistant message before it — the final one — must start with a thinking
 *   block: "Expected `thinking` or `redacted_thinking`, but found
 *   `tool_use`. When `thinking` is enabled, a final `assistant` message must
 *   start with a thinking block (preceeding the lastmost set of `tool_use`
 *   and `tool_result` blocks)". Thinking of earlier assistant turns may be
 *   omitted: the API strips it from the context itself (the
 *   `clear_thinking_20251015` context-management default for most models is
 *   `keep: {type: "thinking_turns", value: 1}`, the last assistant turn's
 *   thinking; an assistant turn is everything the model produced between two
 *   user messages with non-tool-result content, a whole tool-use loop, so it
 *   may hold several thinking blocks with interleaved thinking). Clearing
 *   thinking invalidates the prompt cache at the place it is cleared.
 * - OpenAI Responses: a `reasoning` item must be followed by the item it led
 *   to ("Item 'rs_…' of type 'reasoning' was provided without its required
 *   following item"); with `store: false` only its `encrypted_content` lets
 *   the model use it again (without it the item is only its summary). Older
 *   reasoning items may be left out.
 * - Gemini: `thought: true` parts (opaque, format `gemini`) and thought
 *   signatures (`signature` on text and tool call parts), required on the
 *   current turn's function calls only.
 *
 * So ctxd keeps reasoning in its message, never moves it to another one,
 * keeps every thinking block of the last N thinking turns (a turn: the
 * messages from a user message to the next; a thinking turn: one whose
 * assistant messages carry reasoning; default N = 1, as the API's own
 * default) and leaves out the reasoning of older turns ({@link frontier},
 * the pipeline's `thinking` stage). The current tool-use loop is always in
 * the last thinking turn it has, so its reasoning always goes.
 */
import type { Conversation, Turn } from "@ctxd/contracts"
import * as Opaque from "./providers/Opaque.ts"

/** Thinking turns whose reasoning is sent (default 1; at least 1: the current tool-use loop needs its own). */
export const defaults = { keepTurns: 1 } as const

/**
 * True for a reasoning part: an Anthropic `thinking` / `redacted_thinking`
 * block, a Responses `reasoning` item or a Gemini `thought: true` part
 * (opaque parts of their format; each adapter's `Opaque` module says which).
 */
export const isReasoning = (part: Conversation.Part): boolean => part.type === "opaque" && Opaque.of(part.format).isReasoning(part.block)

/** A part that carries a Gemini thought signature (`signature`, a field of text and tool call parts). */
const signed = (part: Conversation.Part): part is Conversation.TextPart | Conversation.ToolCallPart =>
  (part.type === "text" || part.type === "tool_call") && part.signature !== undefined

/** True when an assistant message carries reasoning (parts, or thought signatures on its parts). */
export const hasReasoning = (message: Conversation.Message): boolean =>
  message.role === "assistant" && message.parts.some((p) => isReasoning(p) || signed(p))

/** `message` without its reasoning: reasoning parts dropped, thought signatures (`signature`) removed from the rest. */
export const withoutReasoning = (message: Conversation.Message): Conversation.Message => ({
  ...message,
  parts: message.parts.flatMap((p): Array<Conversation.Part> => {
    if (isReasoning(p)) return []
    if (!signed(p)) return [p]
    const { signature: _drop, ...rest } = p
    return [rest]
  }),
})

/**
 * `pruned` (a copy of `original` with some parts removed, the others the same
 * objects in the same order) without the reasoning whose output went: a run
 * of reasoning parts leads to the parts after it up to the next reasoning
 * (its text and calls, parallel ones included), and goes when none of them
 * is left (its calls removed as orphans) or when nothing follows it. The same
 * object when nothing changes.
 */
export const withoutOrphanedReasoning = (original: Conversation.Message, pruned: Conversation.Message): Conversation.Message => {
  if (original === pruned || !pruned.parts.some(isReasoning)) return pruned
  const kept = new Set<Conversation.Part>(pruned.parts)
  const gone = new Set<Conversation.Part>()
  let run: Array<Conversation.Part> = []
  let led = false
  let outputSeen = false
  const settle = () => {
    if (!led) for (const r of run) gone.add(r)
    run = []
    led = false
  }
  for (const p of original.parts) {
    if (isReasoning(p)) {
      // a new run starts after some output: the previous one is settled (output before any run leads nowhere)
      if (outputSeen) {
        if (run.length > 0) settle()
        led = false
      }
      run.push(p)
      outputSeen = false
      continue
    }
    outputSeen = true
    if (kept.has(p)) led = true
  }
  if (run.length > 0) settle()
  return gone.size === 0 ? pruned : { ...pruned, parts: pruned.parts.filter((p) => !gone.has(p)) }
}

/** The reasoning parts of a message. */
export const reasoningParts = (message: Conversation.Message): Array<Conversation.Part> => message.parts.filter(isReasoning)

/** A message of a view: its history index and content. */
export interface Indexed {
  readonly index: number
  readonly message: Conversation.Message
}

/**
 * Where the last `keep` thinking turns of a view start: the history index of
 * the user message opening the oldest of them (0 when the view has no more
 * than `keep` thinking turns). Reasoning of assistant messages before it is
 * not sent. A turn runs from a user message to the next (tool results and
 * pinned system messages do not end it); the messages before the view's
 * first user message are one turn. `keep` is at least 1. Monotone as the
 * history grows: a turn's reasoning goes once, when `keep` newer thinking
 * turns exist, and stays gone. Cost: the view back to that turn.
 */
export const frontier = (view: ReadonlyArray<Indexed>, keep: number): number => {
  const wanted = Math.max(1, keep)
  let seen = 0
  let thinking = false
  for (let k = view.length - 1; k >= 0; k--) {
    const { index, message } = view[k]!
    if (!thinking && hasReasoning(message)) thinking = true
    if (message.role !== "user") continue
    if (thinking && ++seen === wanted) return index
    thinking = false
  }
  return 0
}

/**
 * The first reasoning of a turn request's history field (raw `items` under
 * `field`, in `format`) the provider would refuse: its path and why (the
 * adapter's `inputProblem`); `undefined` when there is none.
 */
export const inputProblem = (
  format: Turn.Format,
  items: unknown,
  field: string,
): { readonly path: string; readonly message: string } | undefined => Opaque.of(format).inputProblem?.(items, field)
