/**
 * Mid-conversation system messages: what changes during a session (the
 * retrieved memory, the learnings, a loop nudge) appended as a `role:
 * "system"` message after the turn's last message, and kept there, instead
 * of editing the top-level system prompt or the tail of an earlier message.
 * "You append a {"role": "system"} message at the point in the conversation
 * where the new instruction becomes relevant, instead of editing the
 * top-level system field. The cached prefix stays the same"
 * (https://platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages);
 * bound thinking before it stays valid too, since nothing before it changes.
 *
 * Used on models whose row has `midConversationSystem`, in formats whose
 * adapter sends them (`Adapter.midConversationSystem`). Such a message is
 * stored with the turn (`midConversation: true`), so later prompts carry it
 * at the same place. A note goes in only when its text differs from the
 * latest one of its kind in the history (the same memories retrieved again
 * are already in the context); nudges always. Rendered for a model without
 * them (the session changed model), it becomes user text at its place.
 */
import type { Conversation } from "@ctxd/contracts"

/** One thing to tell the model mid-conversation: its kind (the header its text starts with) and its text. */
export interface Note {
  /** The text's first line for the kinds that repeat (memory, learnings): a note equal to the latest of its kind is left out. */
  readonly header?: string | undefined
  readonly text: string
}

/** True for a system message ctxd appended mid-conversation. */
export const isMid = (message: Conversation.Message): boolean => message.role === "system" && message.midConversation === true

const texts = (message: Conversation.Message): Array<string> => message.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))

/** The text of the latest note under `header` in `history`, if any. */
export const latest = (history: ReadonlyArray<Conversation.Message>, header: string): string | undefined => {
  for (let i = history.length - 1; i >= 0; i--) {
    const message = history[i]!
    if (!isMid(message)) continue
    const found = texts(message).findLast((t) => t.startsWith(header))
    if (found !== undefined) return found
  }
  return undefined
}

/**
 * The system message to append after `fresh` (this turn's new messages,
 * after `history`), or undefined: no note is new, or the turn does not end
 * with a user or tool message (the API takes a system message only right
 * after a user turn).
 */
export const append = (
  history: ReadonlyArray<Conversation.Message>,
  fresh: ReadonlyArray<Conversation.Message>,
  notes: ReadonlyArray<Note>,
): Conversation.Message | undefined => {
  const last = fresh.at(-1)
  if (last === undefined || (last.role !== "user" && last.role !== "tool")) return undefined
  const all = [...history, ...fresh]
  const parts = notes
    .filter((n) => n.text.trim() !== "" && (n.header === undefined || latest(all, n.header) !== n.text))
    .map((n): Conversation.TextPart => ({ type: "text", text: n.text }))
  return parts.length === 0 ? undefined : { role: "system", parts, midConversation: true }
}

/** `messages` with each mid-conversation system message as a user message at its place (for a model without them). */
export const asUser = (messages: ReadonlyArray<Conversation.Message>): ReadonlyArray<Conversation.Message> =>
  messages.some(isMid) ? messages.map((m) => (isMid(m) ? { role: "user" as const, parts: m.parts } : m)) : messages
