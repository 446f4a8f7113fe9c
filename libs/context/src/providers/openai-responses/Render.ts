/**
 * Rendering a view into an OpenAI Responses API request body:
 * `{model, instructions?, input, tools?, prompt_cache_key, store: false,
 * max_output_tokens, prompt_cache_retention?}`.
 *
 * - The system sections are joined (in order, blank ones skipped, separated
 *   by a blank line, as the Chat Completions renderer does) into
 *   `instructions`; pinned `system` messages stay in place as `message` items
 *   (role `developer` when they arrived as such).
 * - A user message becomes one `message` item (`content` a string when it is
 *   one text, else `input_text` / `input_image` parts; opaque Responses parts
 *   pass through, other formats' opaque parts become text notes).
 * - An assistant message becomes its items in part order: runs of text (and
 *   opaque Responses content parts such as `refusal`) one `message` item
 *   (`content` a string when it is one text, else `output_text` parts), a
 *   reasoning part its `reasoning` item verbatim (`encrypted_content`
 *   included), a hosted tool's call item (`web_search_call`, ...) verbatim,
 *   a tool call a `function_call` (the raw `arguments` string when
 *   it was kept, else `JSON.stringify(input)`), a custom tool call a
 *   `custom_tool_call` (its result then a `custom_tool_call_output`), a
 *   `compaction` part its `compaction` item verbatim. Anthropic thinking (and an Anthropic compaction) is dropped,
 *   and so are reasoning items left with nothing after them in their turn (the
 *   API refuses a reasoning item without its following item) and reasoning
 *   items without `encrypted_content` (under `store: false` the API looks
 *   their `id` up and answers 404 "Item with id 'rs_…' not found. Items are
 *   not persisted when `store` is set to false").
 * - Every tool result becomes a `function_call_output`: `output` a string
 *   (one text part or none), else `input_text` / `input_image` parts; an
 *   error result is prefixed with `[error] `.
 * - Function tools are sorted by name (or kept in order, see `toolOrder`);
 *   hosted tools (`web_search`, ...) go back as they came; Gemini built-in
 *   tools are not sent.
 * - `store: false` (ctxd owns the history); `prompt_cache_key` as for Chat
 *   Completions; `prompt_cache_retention: "24h"` when the model's price row
 *   ({@link CostModel.lookup}) lists a `24h` cache tier.
 * - Models that take explicit breakpoints (GPT-5.6+, `ExplicitCache`): the
 *   first input item (after `instructions` and the tools, which take no
 *   mark), the frontier and the newest input item carry
 *   `prompt_cache_breakpoint` on their last content part, with
 *   `prompt_cache_options: {mode: "explicit", ttl, comparison_response_id?}`
 *   (the latter with `previousResponseId`) instead of the deprecated
 *   `prompt_cache_retention`.
 */
import { type Conversation, OpenAIResponses } from "@ctxd/contracts"
import * as CacheLayout from "../../CacheLayout.ts"
import * as CostModel from "../../CostModel.ts"
import * as Foreign from "../../internal/foreign.ts"
import * as ProviderCompaction from "../../ProviderCompaction.ts"
import * as Reasoning from "../../Reasoning.ts"
import * as ExplicitCache from "../openai-chat/ExplicitCache.ts"
import * as ToolSearch from "../../ToolSearch.ts"
import type * as RenderOpenAI from "../openai-chat/Render.ts"

export interface RenderInput extends RenderOpenAI.RenderInput {
  /**
   * Ask for the 24-hour prompt cache (`prompt_cache_retention: "24h"`): the
   * cache planner's tier when it planned one; default: when the model's
   * built-in price row lists a `24h` tier ({@link extendedRetention}).
   */
  readonly retention24h?: boolean | undefined
  /** A `resp_…` id to compare this request's prompt with (explicit-breakpoint models: `comparison_response_id`). */
  readonly previousResponseId?: string | undefined
}
export type Rendered = RenderOpenAI.Rendered

type Json = Record<string, unknown>

const inputImage = (part: Conversation.ImagePart): Json => {
  const url = part.source.kind === "url" ? part.source.url : `data:${part.source.mediaType};base64,${part.source.data}`
  return { type: "input_image", image_url: url, detail: part.detail ?? "auto" }
}

/** A string when the parts are one text part of type `textType`, else the parts. */
const content = (parts: ReadonlyArray<Json>, textType: string): string | Array<Json> => {
  if (parts.length === 0) return ""
  const only = parts[0]!
  return parts.length === 1 && only["type"] === textType ? (only["text"] as string) : [...parts]
}

const message = (role: string, parts: ReadonlyArray<Json>, textType: string): Json => ({
  type: "message",
  role,
  content: content(parts, textType),
})

/** A Responses reasoning item (other formats' reasoning goes as {@link Foreign.note} says: dropped). */
const isReasoning = (p: Conversation.OpaquePart): boolean => p.format === "openai-responses" && Reasoning.isReasoning(p)

const HOSTED_CALLS: ReadonlySet<string> = new Set(OpenAIResponses.HOSTED_CALL_TYPES)

/** An opaque Responses part that is a whole input item (reasoning, a hosted tool's call), not a content part. */
const isItem = (p: Conversation.OpaquePart): boolean =>
  p.format === "openai-responses" && (isReasoning(p) || HOSTED_CALLS.has(Foreign.blockType(p)))

const userItem = (m: Conversation.Message): Json => {
  const parts: Array<Json> = []
  for (const p of m.parts) {
    if (p.type === "text") parts.push({ type: "input_text", text: p.text })
    else if (p.type === "image") parts.push(inputImage(p))
    else if (p.type === "opaque") {
      // reasoning goes only with the assistant output it led to
      if (p.format === "openai-responses") {
        if (!isReasoning(p)) parts.push(Foreign.copyBlock(p))
      } else {
        const note = Foreign.note(p)
        if (note !== undefined) parts.push({ type: "input_text", text: note })
      }
    }
  }
  return message("user", parts, "input_text")
}

const systemItem = (m: Conversation.Message): Json => {
  const parts: Array<Json> = []
  for (const p of m.parts) if (p.type === "text") parts.push({ type: "input_text", text: p.text })
  return message(m.developer === true ? "developer" : "system", parts, "input_text")
}

const assistantItems = (m: Conversation.Message, out: Array<Json>, custom: Set<string>): void => {
  const start = out.length
  let pending: Array<Json> = []
  const flush = () => {
    if (pending.length > 0) out.push(message("assistant", pending, "output_text"))
    pending = []
  }
  for (const p of m.parts) {
    switch (p.type) {
      case "text":
        pending.push({ type: "output_text", text: p.text })
        break
      case "image":
        pending.push({ type: "output_text", text: "[image omitted]" })
        break
      case "tool_call":
        flush()
        if (p.custom === true) {
          custom.add(p.id)
          out.push({ type: "custom_tool_call", call_id: p.id, name: p.name, input: p.arguments ?? "" })
        } else out.push({ type: "function_call", call_id: p.id, name: p.name, arguments: p.arguments ?? JSON.stringify(p.input ?? {}) })
        break
      case "opaque": {
        // under store: false the API can only use a reasoning item by its encrypted_content (without it: 404 on its id)
        if (isReasoning(p) && (!Foreign.isRecord(p.block) || typeof p.block["encrypted_content"] !== "string")) break
        if (isItem(p) || ProviderCompaction.isCompaction(p, "openai-responses")) {
          flush()
          out.push(Foreign.copyBlock(p))
        } else if (p.format === "openai-responses") pending.push(Foreign.copyBlock(p))
        else {
          const note = Foreign.note(p)
          if (note !== undefined) pending.push({ type: "output_text", text: note })
        }
        break
      }
      case "tool_result":
        break
    }
  }
  flush()
  // a reasoning item must be followed by the output it led to: trailing ones (their call removed as an orphan) go
  while (out.length > start && out[out.length - 1]!["type"] === "reasoning") out.pop()
}

const output = (part: Conversation.ToolResultPart): string | Array<Json> => {
  const parts: Array<Json> = part.content.map((c) => (c.type === "text" ? { type: "input_text", text: c.text } : inputImage(c)))
  if (part.isError) {
    const first = parts[0]
    if (first?.["type"] === "input_text") parts[0] = { type: "input_text", text: `[error] ${first["text"] as string}` }
    else parts.unshift({ type: "input_text", text: "[error]" })
  }
  return content(parts, "input_text")
}

const tool = (t: Conversation.Tool): Json => {
  const hosted = t.extra?.["hosted"]
  if (Foreign.isRecord(hosted)) return { ...hosted }
  const out: Json = { type: "function", name: t.name }
  if (t.description !== undefined) out["description"] = t.description
  out["parameters"] = Foreign.isRecord(t.inputSchema) ? t.inputSchema : { type: "object", properties: {} }
  if (t.extra !== undefined && "strict" in t.extra) out["strict"] = t.extra["strict"]
  if (ToolSearch.isDeferred(t)) out["defer_loading"] = true
  return out
}

/**
 * The hosted tool search ctxd adds on models with `toolSearch`: "Add
 * tool_search as a tool in your tools array" and mark deferred functions
 * `defer_loading: true`
 * (https://developers.openai.com/api/docs/guides/tools-tool-search).
 */
export const searchTool: Conversation.Tool = {
  name: "tool_search",
  inputSchema: undefined,
  extra: { ctxd: "virtual", hosted: { type: "tool_search" }, [ToolSearch.SEARCH]: "tool_search" },
}

/** True when the model's price row lists the `24h` cache tier (OpenAI extended prompt caching). */
export const extendedRetention = (modelName: string): boolean => CostModel.lookup(modelName).tiers.some((t) => t.name === "24h")

const MARKABLE_ROLES = new Set(["user", "system", "developer"])
const MARKABLE_PARTS = new Set(["input_text", "input_image", "input_file"])

/** The field of an input item a breakpoint goes in (its content), or undefined when it takes none. */
const markField = (item: Json): "content" | "output" | undefined => {
  const type = item["type"] ?? "message"
  const field =
    type === "message" && MARKABLE_ROLES.has(String(item["role"]))
      ? "content"
      : type === "function_call_output" || type === "custom_tool_call_output"
        ? "output"
        : undefined
  if (field === undefined) return undefined
  const value = item[field]
  if (typeof value === "string") return value === "" ? undefined : field
  const last = Array.isArray(value) ? (value.at(-1) as Json | undefined) : undefined
  return last !== undefined && MARKABLE_PARTS.has(String(last["type"])) ? field : undefined
}

/** Marks `items` in place (copies of the marked ones) by the explicit layout; the breakpoints placed. */
const placeBreakpoints = (items: Array<Json>, frontierAt: number, notes: number, max: number): number => {
  const lastOf = (end: number): number => {
    for (let i = end; i >= 0; i--) if (markField(items[i]!) !== undefined) return i
    return -1
  }
  const first = items.findIndex((i) => markField(i) !== undefined)
  const picked = ExplicitCache.layout(
    { system: first, frontier: frontierAt < 0 ? -1 : lastOf(frontierAt), last: lastOf(items.length - 1 - notes) },
    max,
  )
  for (const i of picked) {
    const field = markField(items[i]!)!
    items[i] = { ...items[i]!, [field]: ExplicitCache.markParts(items[i]![field], "input_text") }
  }
  return picked.length
}

/** Renders `input` into an OpenAI Responses API request body. */
export const render = (input: RenderInput): Rendered & { readonly breakpoints: number } => {
  const items: Array<Json> = []
  let frontierAt = -1
  // ids of the custom tool calls sent: their results go back as custom_tool_call_output
  const custom = new Set<string>()
  const instructions = input.system
    .filter((s) => s.text.trim() !== "")
    .map((s) => s.text)
    .join("\n\n")
  for (const [k, m] of input.messages.entries()) {
    if (k === (input.stable ?? 0)) frontierAt = items.length - 1
    switch (m.role) {
      case "system":
        items.push(systemItem(m))
        break
      case "user":
        items.push(userItem(m))
        break
      case "assistant":
        assistantItems(m, items, custom)
        break
      case "tool":
        for (const p of m.parts) {
          if (p.type !== "tool_result") continue
          const type = custom.has(p.callId) ? "custom_tool_call_output" : "function_call_output"
          items.push({ type, call_id: p.callId, output: output(p) })
        }
        break
    }
  }
  if (input.messages.length === (input.stable ?? 0)) frontierAt = items.length - 1
  const notes = CacheLayout.tailNotes(input)
  for (const text of notes) items.push({ type: "message", role: "user", content: text })
  const prices = CostModel.lookup(input.model.name)
  const explicit = prices.capabilities.explicitCacheBreakpoints
  const breakpoints = explicit ? placeBreakpoints(items, (input.stable ?? 0) > 0 ? frontierAt : -1, notes.length, prices.maxBreakpoints) : 0
  const key = CacheLayout.promptCacheKey(input.tenant, input.session)
  const body: Json = { model: input.model.name }
  if (instructions !== "") body["instructions"] = instructions
  body["input"] = items
  // Gemini built-in tools (googleSearch, ...) mean nothing to Responses
  const sent = input.tools.filter((t) => Foreign.hostedFormat(t) !== "gemini")
  if (sent.length > 0) body["tools"] = CacheLayout.orderTools(sent, input.toolOrder).map(tool)
  body["prompt_cache_key"] = key
  body["store"] = false
  body["max_output_tokens"] = input.model.maxOutputTokens
  if (explicit)
    body["prompt_cache_options"] = ExplicitCache.options(ExplicitCache.ttlOf("responses", input.cacheTier), input.previousResponseId)
  else if (input.retention24h ?? extendedRetention(input.model.name)) body["prompt_cache_retention"] = "24h"
  return { body, promptCacheKey: key, breakpoints }
}
