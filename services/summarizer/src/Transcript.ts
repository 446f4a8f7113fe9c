/**
 * The span to summarize as plain text: one block per message, labelled with
 * its sequence number and role, tool calls as `→ call name(args)`, tool
 * results under the name of their call. The summarizer sends the transcript
 * as one user message, so the summarizer request never carries tool blocks
 * (no pairing to get wrong) and always alternates roles.
 *
 * Tool results longer than the cap (`tool_result_max_pct` of the
 * summarizer's input budget) are cut in the middle — the head and the end
 * (where errors and results usually are) stay — and counted as truncated.
 * Any other text longer than its cap is cut the same way, so one message
 * always fits one summarizer call. Pure.
 */
import type { Conversation } from "@ctxd/contracts"

/** Counts the tokens of a text under the summarizer model's encoding. */
export type CountText = (text: string) => number

/** One message of the span with its label (its sequence number). */
export interface Item {
  readonly seq: number
  readonly message: Conversation.Message
}

/** Caps, in tokens. */
export interface Caps {
  /** The longest tool result kept whole. */
  readonly toolResult: number
  /** The longest text of any other kind kept whole. */
  readonly text: number
}

/** One rendered message. */
export interface Block {
  readonly seq: number
  readonly text: string
  readonly tokens: number
  /** Tool results of this message that were cut. */
  readonly truncated: number
}

/**
 * `text` cut to about `max` tokens: two thirds from the head, one third from
 * the end, with a marker naming what was cut. Returns `text` itself when it fits.
 */
export const truncateMiddle = (text: string, max: number, count: CountText): { text: string; cut: boolean } => {
  const tokens = count(text)
  if (tokens <= max) return { text, cut: false }
  let ratio = max / tokens
  let out = text
  for (let attempt = 0; attempt < 4; attempt++) {
    const keep = Math.max(0, Math.floor(text.length * ratio * 0.97) - 64)
    const head = Math.ceil((keep * 2) / 3)
    const tail = keep - head
    out = `${text.slice(0, head)}\n… [${tokens - max} of ${tokens} tokens cut] …\n${tail > 0 ? text.slice(text.length - tail) : ""}`
    const now = count(out)
    if (now <= max) break
    ratio *= max / now
  }
  return { text: out, cut: true }
}

const ROLE: Record<Conversation.Role, string> = { system: "SYSTEM", user: "USER", assistant: "ASSISTANT", tool: "TOOL" }

const opaqueNote = (part: Conversation.OpaquePart): string => {
  const block = part.block
  const type = typeof block === "object" && block !== null && "type" in block ? String(block.type) : "block"
  if (typeof block === "object" && block !== null && "thinking" in block && typeof block.thinking === "string") {
    return `(thinking) ${block.thinking}`
  }
  // a provider's own summary (only an Anthropic one is readable): ctxd folds it only when the session's format changed
  if (type === "compaction" && typeof block === "object" && block !== null && "content" in block && typeof block.content === "string") {
    return `(earlier summary) ${block.content}`
  }
  return `[${type}]`
}

const resultText = (part: Conversation.ToolResultPart): string =>
  part.content.map((c) => (c.type === "text" ? c.text : "[image]")).join("\n")

const callArguments = (part: Conversation.ToolCallPart): string => part.arguments ?? JSON.stringify(part.input ?? {}) ?? "{}"

/**
 * Renders one message. `names` maps call ids to tool names (calls seen
 * earlier in the span) and is extended with this message's calls.
 */
export const renderMessage = (item: Item, names: Map<string, string>, caps: Caps, count: CountText): Block => {
  const { seq, message } = item
  const lines: Array<string> = []
  const texts: Array<string> = []
  let truncated = 0
  const flushText = () => {
    if (texts.length === 0) return
    const joined = texts.join("\n").trim()
    texts.length = 0
    if (joined !== "") lines.push(truncateMiddle(joined, caps.text, count).text)
  }
  for (const part of message.parts) {
    switch (part.type) {
      case "text":
        texts.push(part.text)
        break
      case "image":
        texts.push("[image]")
        break
      case "opaque":
        texts.push(opaqueNote(part))
        break
      case "tool_call": {
        flushText()
        names.set(part.id, part.name)
        lines.push(`→ call ${part.name}(${truncateMiddle(callArguments(part), caps.text, count).text})`)
        break
      }
      case "tool_result": {
        flushText()
        const name = names.get(part.callId) ?? "unknown tool"
        const cut = truncateMiddle(resultText(part), caps.toolResult, count)
        if (cut.cut) truncated++
        lines.push(`← result of ${name}${part.isError ? " (error)" : ""}:\n${cut.text}`)
        break
      }
    }
  }
  flushText()
  const text = `[${seq}] ${ROLE[message.role]}${message.name === undefined ? "" : ` (${message.name})`}:\n${lines.join("\n")}`
  return { seq, text, tokens: count(text) + 1, truncated }
}

/** Renders every message of a span, in order. */
export const render = (items: ReadonlyArray<Item>, caps: Caps, count: CountText): Array<Block> => {
  const names = new Map<string, string>()
  return items.map((item) => renderMessage(item, names, caps, count))
}
