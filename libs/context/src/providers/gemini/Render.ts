/**
 * Rendering a view into the parameters of a Gemini `generateContent` call,
 * in the shape `@google/genai` takes them:
 * `{model, contents, config: {systemInstruction?, tools?, maxOutputTokens}}`,
 * so `ai.models.generateContent(body)` sends it as it is. (The REST API
 * wants `systemInstruction` and `tools` at the top level and
 * `maxOutputTokens` in `generationConfig`: the SDK moves them; see
 * {@link toRest}.)
 *
 * - The system sections become `config.systemInstruction`: one text part per
 *   non-blank section, in order. Pinned `system` messages stay in place as
 *   `user` text (Gemini has no system role in `contents`).
 * - Roles `user` and `model`; consecutive contents of one role are merged
 *   (a tool message and the user message after it become one `user`
 *   content), and a message with nothing to send is left out.
 * - An assistant tool call becomes `functionCall {name, args, id?}` with its
 *   `thoughtSignature`; an id ctxd made up (`generatedId`) is not sent, and
 *   neither is it on the result. For `gemini-3*` models, the first call of a
 *   model content that has no signature (it came from another format) gets
 *   Gemini's documented placeholder `skip_thought_signature_validator`.
 * - Every tool result becomes `functionResponse {name, response, id?}` in a
 *   `user` content: an error `{error: text}`; a text that is a JSON object
 *   (as `JSON.stringify` writes it) that object; any other text `{output:
 *   text}` (texts joined by newlines). Images of a result follow the
 *   function responses of their content as `inlineData` parts. Masked
 *   results are texts like any other.
 * - Text parts carry their `thoughtSignature` (model contents only); images
 *   with inline data become `inlineData`; URL images become `fileData` when
 *   the URL is a Gemini Files API or `gs://` URI, else a text note
 *   `[image: <url>]` (Gemini does not fetch arbitrary URLs for every model).
 * - Opaque Gemini parts (thoughts, `fileData`, code execution, ...) go back
 *   verbatim (a function call in a user content is dropped); opaque parts of
 *   other formats become text notes (thinking and reasoning dropped, see
 *   `internal/foreign.ts`).
 * - Function declarations are sorted by name (or kept in order, see
 *   `toolOrder`) in one `{functionDeclarations}` tool, the argument schema
 *   under the key it came with (`parameters` for a Gemini OpenAPI schema,
 *   else `parametersJsonSchema`); Gemini built-in tools (`googleSearch`,
 *   ...) follow as they came, ordered like the declarations; Responses
 *   hosted tools are not sent.
 *
 * Gemini caches a repeated prompt prefix implicitly: nothing here depends on
 * the turn but the messages, so an unchanged prefix renders byte-identical.
 */
import type { Conversation } from "@ctxd/contracts"
import * as CacheLayout from "../../CacheLayout.ts"
import * as Foreign from "../../internal/foreign.ts"
import type * as RenderAnthropic from "../anthropic/Render.ts"

export type RenderInput = RenderAnthropic.RenderInput

/** A rendered body. */
export interface Rendered {
  readonly body: Record<string, unknown>
}

type Json = Record<string, unknown>

/** The signature Gemini documents for function calls that did not come from a Gemini model. */
export const PLACEHOLDER_SIGNATURE = "skip_thought_signature_validator"

/** Models that refuse a function call step without a thought signature. */
export const requiresSignatures = (model: string): boolean => /^gemini-3/i.test(model)

const GOOGLE_FILE = /^(?:gs:\/\/|https:\/\/generativelanguage\.googleapis\.com\/)/

const image = (part: Conversation.ImagePart): Json => {
  if (part.source.kind === "base64") return { inlineData: { mimeType: part.source.mediaType, data: part.source.data } }
  if (GOOGLE_FILE.test(part.source.url)) return { fileData: { fileUri: part.source.url } }
  return { text: `[image: ${part.source.url}]` }
}

const note = (part: Conversation.OpaquePart): Json | undefined => {
  if (part.format === "gemini") {
    const block = Foreign.copyBlock(part)
    // a call or response that arrived in the wrong role would break Gemini's pairing: not sent
    return block["functionCall"] !== undefined || block["functionResponse"] !== undefined ? undefined : block
  }
  const text = Foreign.note(part)
  return text === undefined ? undefined : { text }
}

const textPart = (part: Conversation.TextPart, signed: boolean): Json | undefined => {
  if (signed && part.signature !== undefined) return { text: part.text, thoughtSignature: part.signature }
  return part.text === "" ? undefined : { text: part.text }
}

/** A text that is a JSON object exactly as `JSON.stringify` writes it. */
const asObject = (text: string): Json | undefined => {
  if (!text.startsWith("{")) return undefined
  try {
    const parsed: unknown = JSON.parse(text)
    return Foreign.isRecord(parsed) && JSON.stringify(parsed) === text ? parsed : undefined
  } catch {
    return undefined
  }
}

/** A result's `response` object (see the module doc). */
export const response = (part: Conversation.ToolResultPart): Json => {
  const text = part.content.flatMap((c) => (c.type === "text" ? [c.text] : [])).join("\n")
  if (part.isError) return { error: text }
  return asObject(text) ?? { output: text }
}

/** The calls sent so far: name and whether the id goes to Gemini. */
type Calls = Map<string, { readonly name: string; readonly sendId: boolean }>

const modelParts = (m: Conversation.Message, calls: Calls, placeholder: boolean): Array<Json> => {
  const parts: Array<Json> = []
  let first = true
  for (const p of m.parts) {
    switch (p.type) {
      case "text": {
        const t = textPart(p, true)
        if (t !== undefined) parts.push(t)
        break
      }
      case "image":
        parts.push(image(p))
        break
      case "opaque": {
        const n = note(p)
        if (n !== undefined) parts.push(n)
        break
      }
      case "tool_call": {
        const sendId = p.generatedId !== true
        calls.set(p.id, { name: p.name, sendId })
        const call: Json = { name: p.name, args: Foreign.isRecord(p.input) ? p.input : {} }
        if (sendId) call["id"] = p.id
        const out: Json = { functionCall: call }
        const signature = p.signature ?? (first && placeholder ? PLACEHOLDER_SIGNATURE : undefined)
        if (signature !== undefined) out["thoughtSignature"] = signature
        parts.push(out)
        first = false
        break
      }
      case "tool_result":
        break
    }
  }
  return parts
}

const userParts = (m: Conversation.Message): Array<Json> => {
  const parts: Array<Json> = []
  for (const p of m.parts) {
    if (p.type === "text") {
      const t = textPart(p, false)
      if (t !== undefined) parts.push(t)
    } else if (p.type === "image") parts.push(image(p))
    else if (p.type === "opaque") {
      const n = note(p)
      if (n !== undefined) parts.push(n)
    }
  }
  return parts
}

const resultParts = (m: Conversation.Message, calls: Calls): Array<Json> => {
  const responses: Array<Json> = []
  const images: Array<Json> = []
  for (const p of m.parts) {
    if (p.type !== "tool_result") continue
    const call = calls.get(p.callId)
    const fr: Json = { name: call?.name ?? "unknown" }
    fr["response"] = response(p)
    if (call?.sendId ?? true) fr["id"] = p.callId
    responses.push({ functionResponse: fr })
    for (const c of p.content) if (c.type === "image") images.push(image(c))
  }
  return [...responses, ...images]
}

const declaration = (t: Conversation.Tool): Json => {
  const out: Json = { name: t.name }
  if (t.description !== undefined) out["description"] = t.description
  const key = t.extra?.["geminiSchema"]
  const schema = Foreign.isRecord(t.inputSchema) ? t.inputSchema : { type: "object", properties: {} }
  if (key === "parameters") out["parameters"] = schema
  else if (key !== "none") out["parametersJsonSchema"] = schema
  const more = t.extra?.["gemini"]
  if (Foreign.isRecord(more)) Object.assign(out, more)
  return out
}

/** Renders `input` into `generateContent` parameters (`@google/genai` shape). */
export const render = (input: RenderInput): Rendered => {
  const contents: Array<{ role: "user" | "model"; parts: Array<Json> }> = []
  const push = (role: "user" | "model", parts: ReadonlyArray<Json>) => {
    if (parts.length === 0) return
    const last = contents[contents.length - 1]
    if (last !== undefined && last.role === role) last.parts.push(...parts)
    else contents.push({ role, parts: [...parts] })
  }
  const calls: Calls = new Map()
  const placeholder = requiresSignatures(input.model.name)
  for (const m of input.messages) {
    switch (m.role) {
      case "system":
        push(
          "user",
          m.parts.flatMap((p) => (p.type === "text" && p.text !== "" ? [{ text: p.text }] : [])),
        )
        break
      case "user":
        push("user", userParts(m))
        break
      case "assistant":
        push("model", modelParts(m, calls, placeholder))
        break
      case "tool":
        push("user", resultParts(m, calls))
        break
    }
  }
  for (const text of CacheLayout.tailNotes(input)) push("user", [{ text }])
  const config: Json = {}
  const sections = input.system.filter((s) => s.text.trim() !== "")
  if (sections.length > 0) config["systemInstruction"] = { parts: sections.map((s) => ({ text: s.text })) }
  const functions = input.tools.filter((t) => !Foreign.isHosted(t))
  const builtIn = input.tools.filter((t) => Foreign.hostedFormat(t) === "gemini")
  const tools: Array<Json> = []
  if (functions.length > 0) tools.push({ functionDeclarations: CacheLayout.orderTools(functions, input.toolOrder).map(declaration) })
  for (const t of CacheLayout.orderTools(builtIn, input.toolOrder)) tools.push({ ...(t.extra!["hosted"] as Json) })
  if (tools.length > 0) config["tools"] = tools
  config["maxOutputTokens"] = input.model.maxOutputTokens
  return { body: { model: input.model.name, contents, config } }
}

/**
 * The same parameters as the REST body of `POST
 * /v1beta/models/{model}:generateContent` (for callers without the SDK):
 * `systemInstruction` and `tools` at the top level, `maxOutputTokens` in
 * `generationConfig`, no `model`.
 */
export const toRest = (body: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const config = Foreign.isRecord(body["config"]) ? body["config"] : {}
  const { systemInstruction, tools, maxOutputTokens, ...generation } = config
  const out: Json = { contents: body["contents"] }
  if (systemInstruction !== undefined) out["systemInstruction"] = systemInstruction
  if (tools !== undefined) out["tools"] = tools
  const generationConfig: Json = { ...generation }
  if (maxOutputTokens !== undefined) generationConfig["maxOutputTokens"] = maxOutputTokens
  if (Object.keys(generationConfig).length > 0) out["generationConfig"] = generationConfig
  return out
}
