/**
 * Provider compaction: the summaries a provider makes of a conversation on
 * its own servers, which come back in the history the agent sends ctxd.
 * Pure. What the providers document (and the SDK types say):
 *
 * - Anthropic (beta `compact-2026-01-12`; the `context_management` edit
 *   `{type: "compact_20260112", trigger?, pause_after_compaction?,
 *   instructions?}`, or a request with the top-level `compaction`
 *   parameter): the reply's assistant content starts with a `compaction`
 *   block `{type: "compaction", content: string | null, encrypted_content?,
 *   signature?, tool_changes?, cache_control?}` — `content` the readable
 *   summary (`null`: the compaction failed, a no-op; an empty string is
 *   refused), the rest opaque, to be sent back verbatim. On later requests
 *   the API drops every message block before the latest compaction block
 *   and continues from the summary; the block may be sent first in
 *   `messages` (an assistant message opening the conversation), and takes a
 *   `cache_control` breakpoint like a text block.
 * - OpenAI Responses (`context_management: [{type: "compaction",
 *   compact_threshold}]` in `responses.create`, or `POST
 *   /responses/compact`): an output item `{type: "compaction", id,
 *   encrypted_content}` (as input: `id` optional), opaque and encrypted,
 *   carrying the state of everything before it. Items before the latest
 *   compaction item may be dropped: it carries what the next request needs
 *   (the compaction guide's advice for stateless input chaining). The
 *   `/responses/compact` output lists the user messages before the item;
 *   ctxd drops them too, following that advice.
 *
 * Sources: the installed SDKs' types (`BetaCompactionBlockParam`,
 * `BetaCompact20260112Edit`, `BetaCompactionConfig` in `@anthropic-ai/sdk`;
 * `ResponseCompactionItemParam`, `CompactedResponse` in `openai`) and the
 * providers' compaction guides. Not documented, so decided here: the fake
 * provider accepts a compaction block only in assistant messages and only
 * with the beta header; a request holding one is otherwise validated whole.
 *
 * ctxd treats the latest message holding a provider compaction of the
 * request's own format as a summary boundary: nothing before it is sent
 * (it is what the provider folded), and ctxd's own compaction never folds
 * across it. A compaction of another format is opaque to the request's
 * provider (OpenAI's is encrypted; Anthropic's is signed): it is no
 * boundary there, the renderers drop it, and the full history ctxd keeps is
 * sent instead (subject to the window and ctxd's own summary).
 */
import type { Conversation, Turn } from "@ctxd/contracts"
import * as Opaque from "./providers/Opaque.ts"

/** The opaque blocks that are a provider's compaction, by format (each adapter's `Opaque` module names its own). */
export const KINDS: ReadonlyArray<{ readonly format: Conversation.OpaquePart["format"]; readonly type: string }> = Opaque.all.flatMap(
  (r) => (r.compaction === undefined ? [] : [{ format: r.format, type: r.compaction }]),
)

const typeOf = (block: unknown): unknown =>
  typeof block === "object" && block !== null && !Array.isArray(block) ? (block as Record<string, unknown>)["type"] : undefined

/** The format whose provider compaction `part` is, or `undefined` when it is none. */
export const formatOf = (part: Conversation.Part): Conversation.OpaquePart["format"] | undefined => {
  if (part.type !== "opaque") return undefined
  const type = typeOf(part.block)
  return KINDS.some((k) => k.format === part.format && k.type === type) ? part.format : undefined
}

/** True when `part` is a provider compaction of `format` (any format when `format` is undefined). */
export const isCompaction = (part: Conversation.Part, format?: Turn.Format): boolean => {
  const f = formatOf(part)
  return f !== undefined && (format === undefined || f === format)
}

/** True when `message` holds a provider compaction of `format` (any format when undefined). */
export const holds = (message: Conversation.Message, format?: Turn.Format): boolean => message.parts.some((p) => isCompaction(p, format))

/**
 * The index of the boundary in `history`: the latest message holding a
 * provider compaction of `format` (any format when undefined) at or after
 * `from`, or `undefined`. Scans backwards: O(messages after the boundary).
 */
export const boundary = (
  history: ReadonlyArray<{ readonly message: Conversation.Message }>,
  format?: Turn.Format,
  from = 0,
): number | undefined => {
  for (let i = history.length - 1; i >= from; i--) if (holds(history[i]!.message, format)) return i
  return undefined
}

/**
 * The boundary message as it is sent: its parts from its last provider
 * compaction of `format` on (what precedes it in the message was folded
 * too; a tool call dropped so loses its results, which the prune stage
 * removes as orphans).
 */
export const trim = (message: Conversation.Message, format?: Turn.Format): Conversation.Message => {
  let at = -1
  message.parts.forEach((p, i) => {
    if (isCompaction(p, format)) at = i
  })
  return at <= 0 ? message : { ...message, parts: message.parts.slice(at) }
}
