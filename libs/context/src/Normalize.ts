/**
 * Normalization into the provider-neutral {@link Conversation} model, by
 * format through the provider adapters (`providers/<format>/Normalize.ts`),
 * plus the neutral checks a turn's new messages must pass before they are
 * stored (tool call / result pairing) and the session's open calls.
 *
 * Every normalized message remembers the index of the request message it came
 * from (`sourceIndex`), so errors can name `messages[i]` of the request even
 * when one source message became two neutral ones (an Anthropic user message
 * with tool results and text becomes a `tool` message and a `user` message).
 */
import type { Anthropic, Conversation, Gemini, OpenAI, OpenAIResponses, Turn } from "@ctxd/contracts"
import type * as Adapter from "./providers/Adapter.ts"
import type * as Common from "./providers/Common.ts"
import * as Providers from "./providers/Providers.ts"

export type { NormalizedMessage, NormalizedRequest, OpenCall, PairingError } from "./providers/Common.ts"
export { system } from "./providers/Common.ts"
export { fromAnthropic, fromAnthropicIndexed } from "./providers/anthropic/Normalize.ts"
export { fromGemini, fromGeminiIndexed, geminiCallId, type GeminiOptions } from "./providers/gemini/Normalize.ts"
export { fromOpenAI, fromOpenAIIndexed } from "./providers/openai-chat/Normalize.ts"
export { fromResponses, fromResponsesIndexed } from "./providers/openai-responses/Normalize.ts"

/** A history in any request format (the loop check's and the summarizer's requests carry one). */
export type History = Adapter.History

/** `history` in the neutral model, by its format's adapter. */
export const fromHistory = (history: History): Array<Conversation.Message> => Providers.of(history.format).history(history)

/**
 * True when `message` carries something for the model: any part but a text
 * that is empty or only whitespace (the providers refuse such a prompt:
 * Anthropic an empty or blank text block, Gemini an empty text part or a
 * content without parts).
 */
export const hasContent = (message: Conversation.Message): boolean => message.parts.some((p) => p.type !== "text" || p.text.trim() !== "")

/**
 * The open calls of a stored history (`step` negative, the most recent
 * message −1): every call whose id is in `known` and not in `answered`, at
 * its latest occurrence.
 */
export const openCalls = (
  messages: ReadonlyArray<Conversation.Message>,
  known: ReadonlySet<string>,
  answered: ReadonlySet<string>,
): Array<Common.OpenCall> => {
  const out: Array<Common.OpenCall> = []
  const seen = new Set<string>()
  for (let i = messages.length - 1; i >= 0; i--) {
    const calls = messages[i]!.parts.filter((p): p is Conversation.ToolCallPart => p.type === "tool_call")
    for (let j = calls.length - 1; j >= 0; j--) {
      const call = calls[j]!
      if (seen.has(call.id)) continue
      seen.add(call.id)
      if (known.has(call.id) && !answered.has(call.id)) out.push({ id: call.id, name: call.name, step: i - messages.length })
    }
  }
  return out.reverse()
}

/**
 * Tool definitions → neutral tools, by `format`'s adapter: name,
 * description, argument schema, `toolset`, `readOnly` from
 * `annotations.readOnlyHint`. OpenAI `strict` is kept in `extra`; a missing
 * OpenAI `parameters` becomes an empty object schema. Anthropic
 * `cache_control` is dropped.
 */
export const tools = (
  format: Turn.Format,
  defs:
    | ReadonlyArray<Anthropic.Tool>
    | ReadonlyArray<OpenAI.Tool>
    | ReadonlyArray<OpenAIResponses.Tool>
    | ReadonlyArray<Gemini.Tool>
    | undefined,
): Array<Conversation.Tool> => Providers.of(format).tools(defs as never)

/**
 * A whole decoded turn request → messages (with source indices), system
 * sections and tools, by its format's adapter. `openCalls`: the session's
 * open calls, read when a Gemini function response without id answers no
 * call of the request.
 */
export const request = (
  req: Turn.TurnRequest,
  openCalls?: () => ReadonlyArray<Common.OpenCall>,
  workspace?: ReadonlyArray<Conversation.SystemSection>,
): Common.NormalizedRequest => Providers.of(req.format).request(req, openCalls, workspace)

// ------------------------------------------------------------------ pairing

/**
 * Checks a turn's new messages against the session's tool calls so far.
 *
 * `knownCallIds` holds every call id made so far; `answeredCallIds` the ids
 * whose latest call has its result (keep both with {@link recordPairing}).
 * A call id may be reused once its earlier call is answered: real agents do
 * this (a quarter of the tau-bench GPT-4o sessions do).
 *
 * Errors: a tool result for a call id never seen (neither known nor earlier
 * in `incoming`); a result for a call that is already answered; a call whose
 * id is still waiting for the result of an earlier call with that id (which
 * includes one id twice in one message). A call without a result is not an
 * error (the assembler removes it from the view as an orphan). Plain messages
 * count as their own source index. Returns the first violation, or `undefined`;
 * its message names the request field (`field`: `messages`, or `input` for
 * Responses requests) and the source index.
 */
export const findPairingError = (
  knownCallIds: ReadonlySet<string>,
  answeredCallIds: ReadonlySet<string>,
  incoming: ReadonlyArray<Common.NormalizedMessage | Conversation.Message>,
  field = "messages",
): Common.PairingError | undefined => {
  // Ids whose open/answered state changed in this turn: true = waiting for a result.
  const open = new Map<string, boolean>()
  const isOpen = (id: string): boolean => open.get(id) ?? (knownCallIds.has(id) && !answeredCallIds.has(id))
  for (let index = 0; index < incoming.length; index++) {
    const item = incoming[index]!
    const { message, sourceIndex } = "sourceIndex" in item ? item : { message: item, sourceIndex: index }
    const fail = (text: string): Common.PairingError => ({ index, sourceIndex, message: `${field}[${sourceIndex}]: ${text}` })
    for (const part of message.parts) {
      if (part.type === "tool_call") {
        if (isOpen(part.id)) return fail(`duplicate tool call id '${part.id}' (an earlier call with this id has no result yet)`)
        open.set(part.id, true)
      } else if (part.type === "tool_result") {
        const id = part.callId
        if (!open.has(id) && !knownCallIds.has(id)) return fail(`tool result for unknown tool call '${id}'`)
        if (!isOpen(id)) return fail(`second tool result for tool call '${id}'`)
        open.set(id, false)
      }
    }
  }
  return undefined
}

/**
 * Records a stored message in the pairing state {@link findPairingError}
 * reads: a call adds its id to `knownCallIds` and removes it from
 * `answeredCallIds` (a reused id is open again); a result adds its id to
 * `answeredCallIds`.
 */
export const recordPairing = (knownCallIds: Set<string>, answeredCallIds: Set<string>, message: Conversation.Message): void => {
  for (const part of message.parts) {
    if (part.type === "tool_call") {
      knownCallIds.add(part.id)
      answeredCallIds.delete(part.id)
    } else if (part.type === "tool_result") {
      answeredCallIds.add(part.callId)
    }
  }
}
