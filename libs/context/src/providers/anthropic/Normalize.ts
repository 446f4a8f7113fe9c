/**
 * Anthropic Messages input → the neutral model: messages (with the index of
 * the request message each came from), tools, and a whole turn request.
 */
import type { Anthropic, Conversation, Turn } from "@ctxd/contracts"
import * as Common from "../Common.ts"

const anthropicImage = (block: Anthropic.ImageBlock): Conversation.ImagePart => ({
  type: "image",
  source:
    block.source.type === "base64"
      ? { kind: "base64", mediaType: block.source.media_type, data: block.source.data }
      : { kind: "url", url: block.source.url },
})

const anthropicResult = (block: Anthropic.ToolResultBlock): Conversation.ToolResultPart => ({
  type: "tool_result",
  callId: block.tool_use_id,
  content:
    block.content === undefined
      ? []
      : typeof block.content === "string"
        ? [{ type: "text", text: block.content }]
        : block.content.map((c): Conversation.ToolResultContent =>
            c.type === "text" ? { type: "text", text: c.text } : anthropicImage(c),
          ),
  isError: block.is_error ?? false,
})

/**
 * A content block that is not a tool result. Misplaced tool blocks (a
 * `tool_use` in a user message, a `tool_result` in an assistant message) are
 * kept as opaque parts; the renderers drop them.
 */
const anthropicPart = (block: Anthropic.ContentBlock, role: "user" | "assistant"): Conversation.Part => {
  switch (block.type) {
    case "text":
      return { type: "text", text: (block as Anthropic.TextBlock).text }
    case "image":
      return anthropicImage(block as Anthropic.ImageBlock)
    case "tool_use": {
      if (role === "assistant") {
        const b = block as Anthropic.ToolUseBlock
        return { type: "tool_call", id: b.id, name: b.name, input: b.input }
      }
      return Common.opaque("anthropic", block as Record<string, unknown>)
    }
    default:
      return Common.opaque("anthropic", block as Record<string, unknown>)
  }
}

/** {@link fromAnthropic} with the source index of every neutral message. */
export const fromAnthropicIndexed = (messages: ReadonlyArray<Anthropic.Message>): Array<Common.NormalizedMessage> => {
  const out: Array<Common.NormalizedMessage> = []
  messages.forEach((m, sourceIndex) => {
    if (m.role === "system") {
      // a mid-conversation system message: its text, sent where it stands (or as user text where the model takes none)
      const parts: Array<Conversation.Part> =
        typeof m.content === "string"
          ? [{ type: "text", text: m.content }]
          : m.content.flatMap((b) => (b.type === "text" ? [{ type: "text" as const, text: (b as Anthropic.TextBlock).text }] : []))
      out.push({ message: { role: "system", parts, midConversation: true }, sourceIndex })
      return
    }
    if (typeof m.content === "string") {
      out.push({ message: { role: m.role, parts: [{ type: "text", text: m.content }] }, sourceIndex })
      return
    }
    if (m.role === "assistant") {
      out.push({ message: { role: "assistant", parts: m.content.map((b) => anthropicPart(b, "assistant")) }, sourceIndex })
      return
    }
    const results: Array<Conversation.ToolResultPart> = []
    const rest: Array<Conversation.Part> = []
    for (const block of m.content) {
      if (block.type === "tool_result") results.push(anthropicResult(block as Anthropic.ToolResultBlock))
      else rest.push(anthropicPart(block, "user"))
    }
    if (results.length > 0) out.push({ message: { role: "tool", parts: results }, sourceIndex })
    if (rest.length > 0 || results.length === 0) out.push({ message: { role: "user", parts: rest }, sourceIndex })
  })
  return out
}

/**
 * Anthropic messages → neutral messages. A user message with `tool_result`
 * blocks becomes a `tool` message (all results, in order) followed by a
 * `user` message with the remaining blocks, if any. Result content: a string
 * becomes one text part, absent becomes `[]`; `is_error` defaults to false.
 * `tool_use` becomes `tool_call`; images keep their source; unknown blocks
 * (thinking, documents, a server-side `compaction` block, ...) become opaque
 * parts, kept verbatim but for `cache_control`, which is dropped.
 */
export const fromAnthropic = (messages: ReadonlyArray<Anthropic.Message>): Array<Conversation.Message> =>
  fromAnthropicIndexed(messages).map((n) => n.message)

/** Anthropic tools → neutral tools (`cache_control` dropped). */
export const tools = (defs: ReadonlyArray<Anthropic.Tool> | undefined): Array<Conversation.Tool> =>
  (defs ?? []).map((t) => ({
    name: t.name,
    ...(t.description === undefined ? {} : { description: t.description }),
    inputSchema: t.input_schema,
    ...(t.toolset === undefined ? {} : { toolset: t.toolset }),
    ...Common.readOnlyOf(t.annotations),
  }))

/** A whole Anthropic turn request in neutral form. */
export const request = (
  req: Extract<Turn.TurnRequest, { readonly format: "anthropic" }>,
  workspace?: ReadonlyArray<Conversation.SystemSection>,
): Common.NormalizedRequest => ({
  messages: fromAnthropicIndexed(req.messages),
  system: Common.system(req.system, workspace),
  tools: tools(req.tools),
})
