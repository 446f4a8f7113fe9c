/**
 * OpenAI Responses input → the neutral model: `input` items grouped into
 * messages (with the index of the first item each came from), tools, and a
 * whole turn request (`instructions` one more system section).
 */
import type { Conversation, OpenAIResponses, Turn } from "@ctxd/contracts"
import * as Common from "../Common.ts"

const responsesImage = (part: OpenAIResponses.InputImage): Conversation.Part => {
  if (typeof part.image_url !== "string") return Common.opaque("openai-responses", part as Record<string, unknown>)
  const match = Common.DATA_URL.exec(part.image_url)
  const source: Conversation.ImageSource =
    match === null ? { kind: "url", url: part.image_url } : { kind: "base64", mediaType: match[1]!, data: match[2]! }
  return part.detail === undefined ? { type: "image", source } : { type: "image", source, detail: part.detail }
}

const responsesContent = (content: string | ReadonlyArray<OpenAIResponses.ContentPart>): Array<Conversation.Part> =>
  typeof content === "string"
    ? [{ type: "text", text: content }]
    : content.map((p): Conversation.Part => {
        if (p.type === "input_text" || p.type === "output_text") return { type: "text", text: (p as OpenAIResponses.InputText).text }
        if (p.type === "input_image") return responsesImage(p as OpenAIResponses.InputImage)
        return Common.opaque("openai-responses", p as Record<string, unknown>)
      })

const responsesOutput = (output: string | ReadonlyArray<OpenAIResponses.ContentPart>): Array<Conversation.ToolResultContent> =>
  responsesContent(output).map((p): Conversation.ToolResultContent => {
    if (p.type === "text" || p.type === "image") return p
    const block = p.type === "opaque" && Common.isRecord(p.block) ? p.block : {}
    return { type: "text", text: `[openai-responses ${typeof block["type"] === "string" ? block["type"] : "unknown"} block omitted]` }
  })

/**
 * {@link fromResponses} with the source index of every neutral message (the
 * index of the first `input` item it came from).
 */
export const fromResponsesIndexed = (items: ReadonlyArray<OpenAIResponses.Item>): Array<Common.NormalizedMessage> => {
  const out: Array<Common.NormalizedMessage> = []
  // the open assistant or tool group, extended by the items that follow it
  let group: { role: "assistant" | "tool"; parts: Array<Conversation.Part>; sourceIndex: number } | undefined
  const close = () => {
    if (group !== undefined) out.push({ message: { role: group.role, parts: group.parts }, sourceIndex: group.sourceIndex })
    group = undefined
  }
  const open = (role: "assistant" | "tool", sourceIndex: number): Array<Conversation.Part> => {
    if (group?.role !== role) {
      close()
      group = { role, parts: [], sourceIndex }
    }
    return group.parts
  }
  items.forEach((item, sourceIndex) => {
    switch (item.type) {
      case "function_call":
        open("assistant", sourceIndex).push({
          type: "tool_call",
          id: item.call_id,
          name: item.name,
          input: Common.parseArguments(item.arguments),
          arguments: item.arguments,
        })
        return
      case "custom_tool_call":
        open("assistant", sourceIndex).push({
          type: "tool_call",
          id: item.call_id,
          name: item.name,
          input: { input: item.input },
          arguments: item.input,
          custom: true,
        })
        return
      case "reasoning":
      case "web_search_call":
      case "file_search_call":
      case "code_interpreter_call":
      case "image_generation_call":
      case "mcp_call":
      case "mcp_list_tools":
      case "tool_search_call":
      case "tool_search_output":
      case "compaction":
        open("assistant", sourceIndex).push(Common.opaque("openai-responses", item as Record<string, unknown>))
        return
      case "function_call_output":
      case "custom_tool_call_output":
        open("tool", sourceIndex).push({ type: "tool_result", callId: item.call_id, content: responsesOutput(item.output), isError: false })
        return
      default: {
        const m = item as OpenAIResponses.MessageItem
        if (m.role === "assistant") {
          open("assistant", sourceIndex).push(...responsesContent(m.content))
          return
        }
        close()
        if (m.role === "user") {
          out.push({ message: { role: "user", parts: responsesContent(m.content) }, sourceIndex })
          return
        }
        const base: Conversation.Message = { role: "system", parts: responsesContent(m.content).filter((p) => p.type === "text") }
        out.push({ message: m.role === "developer" ? { ...base, developer: true } : base, sourceIndex })
      }
    }
  })
  close()
  return out
}

/**
 * OpenAI Responses input items → neutral messages. A run of consecutive
 * assistant-side items (assistant `message`s, `reasoning`, `function_call`)
 * becomes one `assistant` message with their parts in order (a reasoning item
 * an opaque `openai-responses` part, kept verbatim with its
 * `encrypted_content`, so it travels with the calls after it; a hosted
 * tool's call item and a `compaction` item likewise, verbatim, in place:
 * see `ProviderCompaction`); a run of
 * `function_call_output` items becomes one `tool` message. A `custom_tool_call`
 * becomes a `tool_call` with `custom: true` (`arguments` its free-form input,
 * `input` `{input}`); its output a tool result like a function call's. `user` messages
 * become user messages, `system`/`developer` pinned `system` messages (text
 * only). `input_text`/`output_text` become text parts, `input_image` with a URL
 * an image (a `data:` URL a base64 source); other parts are kept opaque. Item
 * `id`s and `status`es are not kept.
 */
export const fromResponses = (items: ReadonlyArray<OpenAIResponses.Item>): Array<Conversation.Message> =>
  fromResponsesIndexed(items).map((n) => n.message)

/** Responses tools → neutral tools; a hosted tool keeps its whole definition in `extra.hosted` (named by its type). */
export const tools = (defs: ReadonlyArray<OpenAIResponses.Tool> | undefined): Array<Conversation.Tool> =>
  (defs ?? []).map((t): Conversation.Tool => {
    if (t.type !== "function") return { name: typeof t["name"] === "string" ? t["name"] : t.type, inputSchema: {}, extra: { hosted: t } }
    const f = t as OpenAIResponses.FunctionTool
    return {
      name: f.name,
      ...(typeof f.description === "string" ? { description: f.description } : {}),
      inputSchema: f.parameters ?? { type: "object", properties: {} },
      ...(f.toolset === undefined ? {} : { toolset: f.toolset }),
      ...Common.readOnlyOf(f.annotations),
      ...(f.strict === undefined ? {} : { extra: { strict: f.strict } }),
    }
  })

/** A whole Responses turn request in neutral form. */
export const request = (
  req: Extract<Turn.TurnRequest, { readonly format: "openai-responses" }>,
  workspace?: ReadonlyArray<Conversation.SystemSection>,
): Common.NormalizedRequest => {
  const sections = Common.system(req.system, workspace)
  const instructions: Array<Conversation.SystemSection> =
    req.instructions === undefined || req.instructions === "" ? [] : [{ id: "instructions", text: req.instructions, cache: "5m" }]
  return { messages: fromResponsesIndexed(req.input), system: [...sections, ...instructions], tools: tools(req.tools) }
}
