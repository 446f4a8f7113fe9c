/**
 * Normalization: Anthropic Messages and OpenAI Chat Completions input into
 * the provider-neutral {@link Conversation} model, plus the pairing check a
 * turn's new messages must pass before they are stored.
 *
 * Every normalized message remembers the index of the request message it came
 * from (`sourceIndex`), so errors can name `messages[i]` of the request even
 * when one source message became two neutral ones (an Anthropic user message
 * with tool results and text becomes a `tool` message and a `user` message).
 */
import type { Anthropic, Conversation, OpenAI, OpenAIResponses, Turn } from "@ctxd/contracts"

/** A neutral message and the index of the request message it came from. */
export interface NormalizedMessage {
  readonly message: Conversation.Message
  readonly sourceIndex: number
}

/** A whole turn request in neutral form. */
export interface NormalizedRequest {
  readonly messages: ReadonlyArray<NormalizedMessage>
  readonly system: ReadonlyArray<Conversation.SystemSection>
  readonly tools: ReadonlyArray<Conversation.Tool>
}

/** A pairing violation: `message` already names `messages[sourceIndex]`. */
export interface PairingError {
  /** Index of the offending message in the request's `messages`. */
  readonly sourceIndex: number
  /** Index of the offending message in the normalized list. */
  readonly index: number
  readonly message: string
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A copy of an uninterpreted block without `cache_control` (ctxd places breakpoints itself). */
const stripCache = (block: Record<string, unknown>): Record<string, unknown> => {
  if (!("cache_control" in block)) return block
  const { cache_control: _drop, ...rest } = block
  return rest
}

// ---------------------------------------------------------------- Anthropic

const anthropicImage = (block: Anthropic.ImageBlock): Conversation.ImagePart => ({
  type: "image",
  source:
    block.source.type === "base64"
      ? { kind: "base64", mediaType: block.source.media_type, data: block.source.data }
      : { kind: "url", url: block.source.url },
})

const opaque = (format: Conversation.OpaquePart["format"], block: Record<string, unknown>): Conversation.OpaquePart => ({
  type: "opaque",
  format,
  block: stripCache(block),
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
      return opaque("anthropic", block as Record<string, unknown>)
    }
    default:
      return opaque("anthropic", block as Record<string, unknown>)
  }
}

/** {@link fromAnthropic} with the source index of every neutral message. */
export const fromAnthropicIndexed = (messages: ReadonlyArray<Anthropic.Message>): Array<NormalizedMessage> => {
  const out: Array<NormalizedMessage> = []
  messages.forEach((m, sourceIndex) => {
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

// ------------------------------------------------------------------- OpenAI

const DATA_URL = /^data:([^;,]+);base64,(.*)$/s

/** An `image_url` part; `data:` URLs become base64 sources (so Anthropic can render them). */
const openaiImage = (part: OpenAI.ImagePart): Conversation.ImagePart => {
  const match = DATA_URL.exec(part.image_url.url)
  const source: Conversation.ImageSource =
    match === null
      ? { kind: "url", url: part.image_url.url }
      : { kind: "base64", mediaType: match[1]!, data: match[2]! }
  return part.image_url.detail === undefined ? { type: "image", source } : { type: "image", source, detail: part.image_url.detail }
}

const openaiContent = (content: string | ReadonlyArray<OpenAI.ContentPart>): Array<Conversation.Part> =>
  typeof content === "string"
    ? [{ type: "text", text: content }]
    : content.map((p): Conversation.Part => {
        if (p.type === "text") return { type: "text", text: (p as OpenAI.TextPart).text }
        if (p.type === "image_url") return openaiImage(p as OpenAI.ImagePart)
        return opaque("openai", p as Record<string, unknown>)
      })

const textOnly = (content: string | ReadonlyArray<OpenAI.TextPart>): Array<Conversation.TextPart> =>
  typeof content === "string" ? [{ type: "text", text: content }] : content.map((p) => ({ type: "text", text: p.text }))

const parseArguments = (raw: string): unknown => {
  try {
    const parsed: unknown = JSON.parse(raw)
    return isRecord(parsed) ? parsed : {}
  } catch {
    return {}
  }
}

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
      if (m.refusal != null) parts.push(opaque("openai", { type: "refusal", refusal: m.refusal }))
      for (const call of m.tool_calls ?? []) {
        parts.push({
          type: "tool_call",
          id: call.id,
          name: call.function.name,
          input: parseArguments(call.function.arguments),
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
export const fromOpenAIIndexed = (messages: ReadonlyArray<OpenAI.Message>): Array<NormalizedMessage> =>
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
export const fromOpenAI = (messages: ReadonlyArray<OpenAI.Message>): Array<Conversation.Message> =>
  messages.map(openaiMessage)

// --------------------------------------------------------- OpenAI Responses

const responsesImage = (part: OpenAIResponses.InputImage): Conversation.Part => {
  if (typeof part.image_url !== "string") return opaque("openai-responses", part as Record<string, unknown>)
  const match = DATA_URL.exec(part.image_url)
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
        return opaque("openai-responses", p as Record<string, unknown>)
      })

const responsesOutput = (output: string | ReadonlyArray<OpenAIResponses.ContentPart>): Array<Conversation.ToolResultContent> =>
  responsesContent(output).map((p): Conversation.ToolResultContent => {
    if (p.type === "text" || p.type === "image") return p
    const block = p.type === "opaque" && isRecord(p.block) ? p.block : {}
    return { type: "text", text: `[openai-responses ${typeof block["type"] === "string" ? block["type"] : "unknown"} block omitted]` }
  })

/**
 * {@link fromResponses} with the source index of every neutral message (the
 * index of the first `input` item it came from).
 */
export const fromResponsesIndexed = (items: ReadonlyArray<OpenAIResponses.Item>): Array<NormalizedMessage> => {
  const out: Array<NormalizedMessage> = []
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
          input: parseArguments(item.arguments),
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
      case "compaction":
        open("assistant", sourceIndex).push(opaque("openai-responses", item as Record<string, unknown>))
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

/** A history in any request format (the loop check's and the summarizer's requests carry one). */
export type History =
  | { readonly format: "anthropic"; readonly messages: ReadonlyArray<Anthropic.Message> }
  | { readonly format: "openai"; readonly messages: ReadonlyArray<OpenAI.Message> }
  | { readonly format: "openai-responses"; readonly input: ReadonlyArray<OpenAIResponses.Item> }

/** `history` in the neutral model, by its format. */
export const fromHistory = (history: History): Array<Conversation.Message> =>
  history.format === "anthropic"
    ? fromAnthropic(history.messages)
    : history.format === "openai"
      ? fromOpenAI(history.messages)
      : fromResponses(history.input)

/** Responses tools → neutral tools; a hosted tool keeps its whole definition in `extra.hosted` (named by its type). */
const responsesTools = (defs: ReadonlyArray<OpenAIResponses.Tool>): Array<Conversation.Tool> =>
  defs.map((t): Conversation.Tool => {
    if (t.type !== "function") return { name: typeof t["name"] === "string" ? t["name"] : t.type, inputSchema: {}, extra: { hosted: t } }
    const f = t as OpenAIResponses.FunctionTool
    return {
      name: f.name,
      ...(typeof f.description === "string" ? { description: f.description } : {}),
      inputSchema: f.parameters ?? { type: "object", properties: {} },
      ...(f.toolset === undefined ? {} : { toolset: f.toolset }),
      ...readOnlyOf(f.annotations),
      ...(f.strict === undefined ? {} : { extra: { strict: f.strict } }),
    }
  })

// -------------------------------------------------------------- tools, system

const readOnlyOf = (annotations: { readonly readOnlyHint?: boolean | undefined } | undefined) =>
  annotations?.readOnlyHint === undefined ? {} : { readOnly: annotations.readOnlyHint }

/**
 * Tool definitions → neutral tools: name, description, argument schema,
 * `toolset`, `readOnly` from `annotations.readOnlyHint`. OpenAI `strict` is
 * kept in `extra`; a missing OpenAI `parameters` becomes an empty object
 * schema. Anthropic `cache_control` is dropped.
 */
export const tools = (
  format: Turn.Format,
  defs: ReadonlyArray<Anthropic.Tool> | ReadonlyArray<OpenAI.Tool> | ReadonlyArray<OpenAIResponses.Tool> | undefined,
): Array<Conversation.Tool> => {
  if (defs === undefined) return []
  if (format === "openai-responses") return responsesTools(defs as ReadonlyArray<OpenAIResponses.Tool>)
  if (format === "anthropic") {
    return (defs as ReadonlyArray<Anthropic.Tool>).map((t) => ({
      name: t.name,
      ...(t.description === undefined ? {} : { description: t.description }),
      inputSchema: t.input_schema,
      ...(t.toolset === undefined ? {} : { toolset: t.toolset }),
      ...readOnlyOf(t.annotations),
    }))
  }
  return (defs as ReadonlyArray<OpenAI.Tool>).map((t) => ({
    name: t.function.name,
    ...(t.function.description === undefined ? {} : { description: t.function.description }),
    inputSchema: t.function.parameters ?? { type: "object", properties: {} },
    ...(t.toolset === undefined ? {} : { toolset: t.toolset }),
    ...readOnlyOf(t.annotations),
    ...(t.function.strict === undefined ? {} : { extra: { strict: t.function.strict } }),
  }))
}

/**
 * The request's `system` field → sections. A string becomes one section
 * `{id: "system", cache: "5m"}`; an empty string or an absent field gives no
 * sections; list items keep their order and default to `cache: "5m"`.
 */
export const system = (value: Turn.System | undefined): Array<Conversation.SystemSection> => {
  if (value === undefined || value === "") return []
  if (typeof value === "string") return [{ id: "system", text: value, cache: "5m" }]
  return value.map((s) => ({ id: s.id, text: s.text, cache: s.cache ?? "5m" }))
}

/** A whole decoded turn request → messages (with source indices), system sections and tools. */
export const request = (req: Turn.TurnRequest): NormalizedRequest => {
  switch (req.format) {
    case "anthropic":
      return { messages: fromAnthropicIndexed(req.messages), system: system(req.system), tools: tools("anthropic", req.tools) }
    case "openai":
      return { messages: fromOpenAIIndexed(req.messages), system: system(req.system), tools: tools("openai", req.tools) }
    case "openai-responses": {
      const sections = system(req.system)
      const instructions: Array<Conversation.SystemSection> =
        req.instructions === undefined || req.instructions === "" ? [] : [{ id: "instructions", text: req.instructions, cache: "5m" }]
      return { messages: fromResponsesIndexed(req.input), system: [...sections, ...instructions], tools: tools("openai-responses", req.tools) }
    }
  }
}

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
  incoming: ReadonlyArray<NormalizedMessage | Conversation.Message>,
  field = "messages",
): PairingError | undefined => {
  // Ids whose open/answered state changed in this turn: true = waiting for a result.
  const open = new Map<string, boolean>()
  const isOpen = (id: string): boolean => open.get(id) ?? (knownCallIds.has(id) && !answeredCallIds.has(id))
  for (let index = 0; index < incoming.length; index++) {
    const item = incoming[index]!
    const { message, sourceIndex } = "sourceIndex" in item ? item : { message: item, sourceIndex: index }
    const fail = (text: string): PairingError => ({ index, sourceIndex, message: `${field}[${sourceIndex}]: ${text}` })
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
export const recordPairing = (
  knownCallIds: Set<string>,
  answeredCallIds: Set<string>,
  message: Conversation.Message,
): void => {
  for (const part of message.parts) {
    if (part.type === "tool_call") {
      knownCallIds.add(part.id)
      answeredCallIds.delete(part.id)
    } else if (part.type === "tool_result") {
      answeredCallIds.add(part.callId)
    }
  }
}
