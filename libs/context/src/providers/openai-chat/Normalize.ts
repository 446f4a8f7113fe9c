/**
 * OpenAI Chat Completions input → the neutral model: messages (one per
 * request message), tools, and a whole turn request.
 */
import type { Conversation, OpenAI, Turn } from "@ctxd/contracts"
import * as Common from "../Common.ts"

/** An `image_url` part; `data:` URLs become base64 sources (so Anthropic can render them). */
const openaiImage = (part: OpenAI.ImagePart): Conversation.ImagePart => {
  const match = Common.DATA_URL.exec(part.image_url.url)
  const source: Conversation.ImageSource =
    match === null ? { kind: "url", url: part.image_url.url } : { kind: "base64", mediaType: match[1]!, data: match[2]! }
  return part.image_url.detail === undefined ? { type: "image", source } : { type: "image", source, detail: part.image_url.detail }
}

const openaiContent = (content: string | ReadonlyArray<OpenAI.ContentPart>): Array<Conversation.Part> =>
  typeof content === "string"
    ? [{ type: "text", text: content }]
    : content.map((p): Conversation.Part => {
        if (p.type === "text") return { type: "text", text: (p as OpenAI.TextPart).text }
        if (p.type === "image_url") return openaiImage(p as OpenAI.ImagePart)
        return Common.opaque("openai", p as Record<string, unknown>)
      })

const textOnly = (content: string | ReadonlyArray<OpenAI.TextPart>): Array<Conversation.TextPart> =>
  typeof content === "string" ? [{ type: "text", text: content }] : content.map((p) => ({ type: "text", text: p.text }))

const withName = (message: Conversation.Message, name: string | undefined): Conversation.Message =>
  name === undefined ? message : { ...message, name }

const openaiMessage = (m: OpenAI.Message): Conversation.Message => {
  switch (m.role) {
    case "system":
    case "developer": {
      const base: Conversation.Message = { role: "system", parts: textOnly(m.content) }
      return withName(m.role === "developer" ? { ...base, developer: true } : base, m.name)
    }
    case "user":
      return withName({ role: "user", parts: openaiContent(m.content) }, m.name)
    case "assistant": {
      const parts: Array<Conversation.Part> = m.content == null ? [] : openaiContent(m.content)
      if (m.refusal != null) parts.push(Common.opaque("openai", { type: "refusal", refusal: m.refusal }))
      for (const call of m.tool_calls ?? []) {
        parts.push({
          type: "tool_call",
          id: call.id,
          name: call.function.name,
          input: Common.parseArguments(call.function.arguments),
          arguments: call.function.arguments,
        })
      }
      return withName({ role: "assistant", parts }, m.name)
    }
    case "tool":
      return {
        role: "tool",
        parts: [{ type: "tool_result", callId: m.tool_call_id, content: textOnly(m.content), isError: false }],
      }
  }
}

/** {@link fromOpenAI} with the source index of every neutral message (one per source message). */
export const fromOpenAIIndexed = (messages: ReadonlyArray<OpenAI.Message>): Array<Common.NormalizedMessage> =>
  messages.map((m, sourceIndex) => ({ message: openaiMessage(m), sourceIndex }))

/**
 * OpenAI messages → neutral messages. `system`/`developer` become pinned
 * `system` messages (`developer: true` for the latter); assistant content
 * becomes text parts, a refusal an opaque part, and tool calls `tool_call`
 * parts whose `input` is the parsed `arguments` when they parse to an object
 * (else `{}`), keeping the raw string. Each `tool` message becomes a `tool`
 * message with one result (`isError` false). `data:` image URLs become base64
 * sources; other unknown content parts become opaque parts.
 */
export const fromOpenAI = (messages: ReadonlyArray<OpenAI.Message>): Array<Conversation.Message> => messages.map(openaiMessage)

/** Chat Completions tools → neutral tools (`strict` kept in `extra`; a missing `parameters` an empty object schema). */
export const tools = (defs: ReadonlyArray<OpenAI.Tool> | undefined): Array<Conversation.Tool> =>
  (defs ?? []).map((t) => ({
    name: t.function.name,
    ...(t.function.description === undefined ? {} : { description: t.function.description }),
    inputSchema: t.function.parameters ?? { type: "object", properties: {} },
    ...(t.toolset === undefined ? {} : { toolset: t.toolset }),
    ...Common.readOnlyOf(t.annotations),
    ...(t.function.strict === undefined ? {} : { extra: { strict: t.function.strict } }),
  }))

/** A whole Chat Completions turn request in neutral form. */
export const request = (
  req: Extract<Turn.TurnRequest, { readonly format: "openai" }>,
  workspace?: ReadonlyArray<Conversation.SystemSection>,
): Common.NormalizedRequest => ({
  messages: fromOpenAIIndexed(req.messages),
  system: Common.system(req.system, workspace),
  tools: tools(req.tools),
})
