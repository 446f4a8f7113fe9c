/**
 * Normalization: Anthropic Messages, OpenAI Chat Completions, OpenAI
 * Responses and Gemini input into the provider-neutral {@link Conversation} model, plus the pairing check a
 * turn's new messages must pass before they are stored.
 *
 * Every normalized message remembers the index of the request message it came
 * from (`sourceIndex`), so errors can name `messages[i]` of the request even
 * when one source message became two neutral ones (an Anthropic user message
 * with tool results and text becomes a `tool` message and a `user` message).
 */
import type { Anthropic, Conversation, Gemini, OpenAI, OpenAIResponses, Turn } from "@ctxd/contracts"

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

// ------------------------------------------------------------------- Gemini

/** An open (not yet answered) tool call, for answering Gemini function responses that carry no id. */
export interface OpenCall {
  readonly id: string
  readonly name: string
  /** The order of the message that made the call: a larger step is more recent. */
  readonly step: number
}

/** Options of {@link fromGeminiIndexed}. */
export interface GeminiOptions {
  /**
   * Mixed into the ids made up for calls without one (the turn id), so ids
   * of different requests differ. Default `""`.
   */
  readonly seed?: string | undefined
  /**
   * The session's open calls before these contents (steps below 0), read
   * only when a function response without id answers no call of these
   * contents ({@link openCalls}).
   */
  readonly open?: (() => ReadonlyArray<OpenCall>) | undefined
}

/** 64-bit FNV-1a of `text`, as 16 hex digits. */
const fnv64 = (text: string): string => {
  let h = 0xcbf29ce484222325n
  for (let i = 0; i < text.length; i++) {
    h ^= BigInt(text.charCodeAt(i))
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn
  }
  return h.toString(16).padStart(16, "0")
}

/**
 * The id made up for a Gemini function call without one: `gc_` and a hash of
 * the seed (the turn id), the content's index and the part's index. Valid as
 * an Anthropic `tool_use` id and an OpenAI call id.
 */
export const geminiCallId = (seed: string, sourceIndex: number, partIndex: number): string =>
  `gc_${fnv64(`${seed}\u0000${sourceIndex}\u0000${partIndex}`)}`

const onlyKeys = (value: Record<string, unknown>, allowed: ReadonlyArray<string>): boolean =>
  Object.keys(value).every((k) => allowed.includes(k) && value[k] !== undefined)

/** A JSON text that is an object, written as `JSON.stringify` writes it (so it parses back to the same text). */
const canonicalObject = (text: string): Record<string, unknown> | undefined => {
  if (!text.startsWith("{")) return undefined
  try {
    const parsed: unknown = JSON.parse(text)
    return isRecord(parsed) && JSON.stringify(parsed) === text ? parsed : undefined
  } catch {
    return undefined
  }
}

/**
 * A function response's content: `{output: "<text>"}` becomes that text,
 * `{error: "<text>"}` that text as an error, any other object its JSON text
 * (also an `output` text that is itself a JSON object's text, so the renderer
 * gives back the same object). Images in `parts` (`inlineData`) become images.
 */
const geminiResult = (fr: Gemini.FunctionResponse, callId: string): Conversation.ToolResultPart => {
  const response = fr.response
  const keys = Object.keys(response)
  const only = keys.length === 1 ? keys[0]! : undefined
  const value = only === undefined ? undefined : response[only]
  let isError = false
  let text: string
  if (only === "output" && typeof value === "string" && canonicalObject(value) === undefined) text = value
  else if (only === "error" && typeof value === "string") {
    isError = true
    text = value
  } else text = JSON.stringify(response)
  const content: Array<Conversation.ToolResultContent> = [{ type: "text", text }]
  const parts = fr["parts"]
  if (Array.isArray(parts)) {
    for (const p of parts) {
      const blob = isRecord(p) ? p["inlineData"] : undefined
      if (isRecord(blob) && typeof blob["mimeType"] === "string" && typeof blob["data"] === "string") {
        content.push({ type: "image", source: { kind: "base64", mediaType: blob["mimeType"], data: blob["data"] } })
      }
    }
  }
  return { type: "tool_result", callId, content, isError }
}

/**
 * A Gemini part that is neither a function call nor a function response: a
 * plain `text` (with its signature), an image `inlineData`, or, for anything
 * else (thoughts, `fileData`, code execution, signed media, extra fields), an
 * opaque `gemini` part kept verbatim.
 */
const geminiPart = (part: Gemini.Part): Conversation.Part => {
  const p = part as Record<string, unknown>
  const signature = part.thoughtSignature
  if (typeof part.text === "string" && onlyKeys(p, ["text", "thoughtSignature"]) && part.text !== "") {
    return signature === undefined ? { type: "text", text: part.text } : { type: "text", text: part.text, signature }
  }
  const blob = part.inlineData
  if (blob !== undefined && onlyKeys(p, ["inlineData"]) && onlyKeys(blob, ["mimeType", "data"]) && blob.mimeType.startsWith("image/")) {
    return { type: "image", source: { kind: "base64", mediaType: blob.mimeType, data: blob.data } }
  }
  return opaque("gemini", p)
}

/**
 * {@link fromGemini} with the source index of every neutral message (the
 * index of the content it came from).
 */
export const fromGeminiIndexed = (contents: ReadonlyArray<Gemini.Content>, options: GeminiOptions = {}): Array<NormalizedMessage> => {
  const seed = options.seed ?? ""
  const out: Array<NormalizedMessage> = []
  // the calls of these contents not answered yet, oldest first; the session's own are read lazily
  const open: Array<OpenCall> = []
  let session: Array<OpenCall> | undefined
  const answer = (fr: Gemini.FunctionResponse): string => {
    if (fr.id !== undefined && fr.id !== "") {
      const at = open.findIndex((c) => c.id === fr.id)
      if (at >= 0) open.splice(at, 1)
      return fr.id
    }
    const pick = (calls: Array<OpenCall>): string | undefined => {
      let best = -1
      for (let i = 0; i < calls.length; i++) {
        if (calls[i]!.name === fr.name && (best < 0 || calls[i]!.step > calls[best]!.step)) best = i
      }
      if (best < 0) return undefined
      return calls.splice(best, 1)[0]!.id
    }
    const local = pick(open)
    if (local !== undefined) return local
    session ??= [...(options.open?.() ?? [])]
    // unanswerable: the function's name stands as the id, so the pairing check names it
    return pick(session) ?? fr.name
  }
  contents.forEach((content, sourceIndex) => {
    if (content.role === "model") {
      const parts = content.parts.map((part, partIndex): Conversation.Part => {
        const call = part.functionCall
        // a call is always a call (fields of the part beside its signature are not kept): it must pair
        if (call === undefined) return geminiPart(part)
        const given = call.id !== undefined && call.id !== ""
        const id = given ? call.id! : geminiCallId(seed, sourceIndex, partIndex)
        open.push({ id, name: call.name, step: sourceIndex })
        return {
          type: "tool_call",
          id,
          name: call.name,
          input: call.args ?? {},
          ...(part.thoughtSignature === undefined ? {} : { signature: part.thoughtSignature }),
          ...(given ? {} : { generatedId: true }),
        }
      })
      out.push({ message: { role: "assistant", parts }, sourceIndex })
      return
    }
    const results: Array<Conversation.ToolResultPart> = []
    const rest: Array<Conversation.Part> = []
    for (const part of content.parts) {
      const fr = part.functionResponse
      if (fr !== undefined) results.push(geminiResult(fr, answer(fr)))
      else if (part.functionCall !== undefined) rest.push(opaque("gemini", part as Record<string, unknown>))
      else rest.push(geminiPart(part))
    }
    if (results.length > 0) out.push({ message: { role: "tool", parts: results }, sourceIndex })
    if (rest.length > 0 || results.length === 0) out.push({ message: { role: "user", parts: rest }, sourceIndex })
  })
  return out
}

/**
 * Gemini contents → neutral messages. A `model` content becomes an
 * `assistant` message; a `user` content (or one without a role) a `tool`
 * message with its `functionResponse`s (in order) followed by a `user`
 * message with its other parts, if any.
 *
 * - `text` becomes a text part (its `thoughtSignature` kept as `signature`);
 *   an image `inlineData` an image; thoughts (`thought: true`), empty signed
 *   texts, `fileData`, code execution and anything with extra fields become
 *   opaque `gemini` parts kept verbatim.
 * - `functionCall` becomes a `tool_call` (`input` its `args`, `{}` when
 *   absent; its `thoughtSignature` as `signature`; other fields of the call
 *   or its part are not kept). A call without `id` gets
 *   one made up ({@link geminiCallId}, `generatedId: true`): the Gemini
 *   renderer never sends it.
 * - `functionResponse` becomes a `tool_result`: with an `id`, for that call;
 *   without, for the open call of that name in the most recent content that
 *   has one (oldest first) — in these contents, else among the session's
 *   open calls (`options.open`); with none, the function's name stands as the
 *   id (and the pairing check reports it). `{output: text}` gives that text,
 *   `{error: text}` that text with `isError`, any other response object its
 *   JSON text.
 */
export const fromGemini = (contents: ReadonlyArray<Gemini.Content>, options: GeminiOptions = {}): Array<Conversation.Message> =>
  fromGeminiIndexed(contents, options).map((n) => n.message)

/**
 * The open calls of a stored history (`step` negative, the most recent
 * message −1): every call whose id is in `known` and not in `answered`, at
 * its latest occurrence.
 */
export const openCalls = (
  messages: ReadonlyArray<Conversation.Message>,
  known: ReadonlySet<string>,
  answered: ReadonlySet<string>,
): Array<OpenCall> => {
  const out: Array<OpenCall> = []
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

/** The system instruction's text parts, joined by a blank line. */
const systemInstructionText = (value: Gemini.SystemInstruction | undefined): string => {
  if (value === undefined) return ""
  if (typeof value === "string") return value
  return value.parts
    .flatMap((p) => (typeof p.text === "string" && p.thought !== true ? [p.text] : []))
    .join("\n\n")
}

/**
 * Gemini tools → neutral tools: each function declaration one tool (the
 * schema from `parametersJsonSchema`, else `parameters`, remembered in
 * `extra.geminiSchema`; other declaration fields such as `response` or
 * `behavior` in `extra.gemini`); the other fields of a tool object (built-in
 * tools: `googleSearch`, `codeExecution`, ...) one hosted tool in
 * `extra.hosted`, named by its keys.
 */
const geminiTools = (defs: ReadonlyArray<Gemini.Tool>): Array<Conversation.Tool> =>
  defs.flatMap((t): Array<Conversation.Tool> => {
    const { functionDeclarations, ...hosted } = t as Gemini.Tool & Record<string, unknown>
    const out: Array<Conversation.Tool> = (functionDeclarations ?? []).map((d): Conversation.Tool => {
      const { name, description, parameters, parametersJsonSchema, toolset, annotations, ...more } = d as Gemini.FunctionDeclaration &
        Record<string, unknown>
      const json = parametersJsonSchema !== undefined
      const extra: Record<string, unknown> = { geminiSchema: json ? "parametersJsonSchema" : parameters !== undefined ? "parameters" : "none" }
      if (Object.keys(more).length > 0) extra["gemini"] = more
      return {
        name,
        ...(description === undefined ? {} : { description }),
        inputSchema: json ? parametersJsonSchema : (parameters ?? { type: "object", properties: {} }),
        ...(toolset === undefined ? {} : { toolset }),
        ...readOnlyOf(annotations),
        extra,
      }
    })
    const keys = Object.keys(hosted)
    if (keys.length > 0) out.push({ name: keys.join("+"), inputSchema: {}, extra: { hosted } })
    return out
  })

/** A history in any request format (the loop check's and the summarizer's requests carry one). */
export type History =
  | { readonly format: "anthropic"; readonly messages: ReadonlyArray<Anthropic.Message> }
  | { readonly format: "openai"; readonly messages: ReadonlyArray<OpenAI.Message> }
  | { readonly format: "openai-responses"; readonly input: ReadonlyArray<OpenAIResponses.Item> }
  | { readonly format: "gemini"; readonly contents: ReadonlyArray<Gemini.Content> }

/** `history` in the neutral model, by its format. */
export const fromHistory = (history: History): Array<Conversation.Message> => {
  switch (history.format) {
    case "anthropic":
      return fromAnthropic(history.messages)
    case "openai":
      return fromOpenAI(history.messages)
    case "openai-responses":
      return fromResponses(history.input)
    case "gemini":
      return fromGemini(history.contents)
  }
}

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
  defs:
    | ReadonlyArray<Anthropic.Tool>
    | ReadonlyArray<OpenAI.Tool>
    | ReadonlyArray<OpenAIResponses.Tool>
    | ReadonlyArray<Gemini.Tool>
    | undefined,
): Array<Conversation.Tool> => {
  if (defs === undefined) return []
  if (format === "gemini") return geminiTools(defs as ReadonlyArray<Gemini.Tool>)
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
 * sections; list items keep their order and default to `cache: "5m"`. A
 * workspace reference gives `workspace`: the bundle's sections the shell read
 * (none when it read none).
 */
export const system = (
  value: Turn.System | undefined,
  workspace?: ReadonlyArray<Conversation.SystemSection>,
): Array<Conversation.SystemSection> => {
  if (value === undefined || value === "") return []
  if (typeof value === "string") return [{ id: "system", text: value, cache: "5m" }]
  if ("workspace" in value) return [...(workspace ?? [])]
  return value.map((s) => ({ id: s.id, text: s.text, cache: s.cache ?? "5m" }))
}

/**
 * A whole decoded turn request → messages (with source indices), system
 * sections and tools. `openCalls`: the session's open calls, read when a
 * Gemini function response without id answers no call of the request.
 */
export const request = (
  req: Turn.TurnRequest,
  openCalls?: () => ReadonlyArray<OpenCall>,
  workspace?: ReadonlyArray<Conversation.SystemSection>,
): NormalizedRequest => {
  switch (req.format) {
    case "anthropic":
      return { messages: fromAnthropicIndexed(req.messages), system: system(req.system, workspace), tools: tools("anthropic", req.tools) }
    case "openai":
      return { messages: fromOpenAIIndexed(req.messages), system: system(req.system, workspace), tools: tools("openai", req.tools) }
    case "openai-responses": {
      const sections = system(req.system, workspace)
      const instructions: Array<Conversation.SystemSection> =
        req.instructions === undefined || req.instructions === "" ? [] : [{ id: "instructions", text: req.instructions, cache: "5m" }]
      return { messages: fromResponsesIndexed(req.input), system: [...sections, ...instructions], tools: tools("openai-responses", req.tools) }
    }
    case "gemini": {
      const text = systemInstructionText(req.systemInstruction)
      const instruction: Array<Conversation.SystemSection> = text === "" ? [] : [{ id: "systemInstruction", text, cache: "5m" }]
      return {
        messages: fromGeminiIndexed(req.contents, { seed: req.turnId, open: openCalls }),
        system: [...system(req.system, workspace), ...instruction],
        tools: tools("gemini", req.tools),
      }
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
