/**
 * Rendering a view into an OpenAI Chat Completions request body:
 * `{model, messages, tools?, prompt_cache_key, max_completion_tokens}`.
 *
 * - The system sections are joined (in order, blank ones skipped, separated
 *   by a blank line) into one leading `system` message; pinned `system`
 *   messages stay in place (`developer` when they arrived as such).
 * - Assistant tool calls carry the raw `arguments` string when it was kept,
 *   else `JSON.stringify(input)`. Every tool result becomes its own `tool`
 *   message; its text parts are joined with newlines, images (not allowed in
 *   tool messages) become `[image omitted]`, and an error result is prefixed
 *   with `[error] `.
 * - An assistant message with one text part gets a string `content`, with
 *   several an array of text parts, with none `null` (when it calls tools) or
 *   `""`. A refusal goes back to `refusal`.
 * - Opaque OpenAI parts pass through in user messages; opaque parts of the
 *   other formats become text notes (Anthropic thinking, Responses reasoning
 *   and Gemini thoughts are dropped; Gemini `thoughtSignature`s are not sent).
 * - Tools are sorted by name (or kept in the given order, see `toolOrder`);
 *   `prompt_cache_key` is stable per tenant and session.
 * - Models that take explicit breakpoints (GPT-5.6+, `ExplicitCache`): the
 *   system message, the frontier and the newest non-assistant message carry
 *   `prompt_cache_breakpoint` on their last content part, with
 *   `prompt_cache_options: {mode: "explicit", ttl}`; other models' bodies
 *   are unchanged.
 */
import type { Conversation } from "@ctxd/contracts"
import * as CacheLayout from "../../CacheLayout.ts"
import * as ExplicitCache from "./ExplicitCache.ts"
import * as CostModel from "../../CostModel.ts"
import * as Foreign from "../../internal/foreign.ts"
import type * as RenderAnthropic from "../anthropic/Render.ts"
import * as RenderedJson from "../../RenderedJson.ts"

/** What to render: the Anthropic renderer's input plus the session (for `prompt_cache_key`). */
export interface RenderInput extends RenderAnthropic.RenderInput {
  readonly tenant: string
  readonly session: string
  /** The cache tier the planner chose (explicit-breakpoint models: the `ttl` when the API can say it). */
  readonly cacheTier?: string | undefined
}

/** A rendered body and its prompt cache key. */
export interface Rendered {
  readonly body: Record<string, unknown>
  readonly promptCacheKey: string
}

type Json = Record<string, unknown>

const imageUrl = (part: Conversation.ImagePart): Json => {
  const url = part.source.kind === "url" ? part.source.url : `data:${part.source.mediaType};base64,${part.source.data}`
  return { type: "image_url", image_url: part.detail === undefined ? { url } : { url, detail: part.detail } }
}

const texts = (parts: ReadonlyArray<Json>): string | Array<Json> => {
  if (parts.length === 0) return ""
  const only = parts[0]!
  return parts.length === 1 && only["type"] === "text" ? (only["text"] as string) : [...parts]
}

const named = (message: Conversation.Message, out: Json): Json => {
  if (message.name !== undefined) out["name"] = message.name
  return out
}

const userMessage = (message: Conversation.Message): Json => {
  const parts: Array<Json> = []
  for (const p of message.parts) {
    if (p.type === "text") parts.push({ type: "text", text: p.text })
    else if (p.type === "image") parts.push(imageUrl(p))
    else if (p.type === "opaque") {
      if (p.format === "openai") parts.push(Foreign.copyBlock(p))
      else {
        const note = Foreign.note(p)
        if (note !== undefined) parts.push({ type: "text", text: note })
      }
    }
  }
  return named(message, { role: "user", content: texts(parts) })
}

const systemMessage = (message: Conversation.Message): Json => {
  const parts: Array<Json> = []
  for (const p of message.parts) if (p.type === "text") parts.push({ type: "text", text: p.text })
  return named(message, { role: message.developer === true ? "developer" : "system", content: texts(parts) })
}

const assistantMessage = (message: Conversation.Message): Json => {
  const parts: Array<Json> = []
  const calls: Array<Json> = []
  let refusal: string | undefined
  for (const p of message.parts) {
    switch (p.type) {
      case "text":
        parts.push({ type: "text", text: p.text })
        break
      case "image":
        parts.push({ type: "text", text: "[image omitted]" })
        break
      case "tool_call":
        calls.push({
          id: p.id,
          type: "function",
          function: {
            name: p.name,
            arguments: p.custom !== true && p.arguments !== undefined ? p.arguments : JSON.stringify(p.input ?? {}),
          },
        })
        break
      case "opaque": {
        if (p.format === "openai" && Foreign.blockType(p) === "refusal") {
          const text = Foreign.note(p) ?? ""
          refusal = refusal === undefined ? text : `${refusal}\n${text}`
          break
        }
        const note = Foreign.note(p)
        if (note !== undefined) parts.push({ type: "text", text: note })
        break
      }
      case "tool_result":
        break
    }
  }
  const out: Json = { role: "assistant", content: parts.length === 0 && calls.length > 0 ? null : texts(parts) }
  if (refusal !== undefined) out["refusal"] = refusal
  if (calls.length > 0) out["tool_calls"] = calls
  return named(message, out)
}

const resultContent = (part: Conversation.ToolResultPart): string => {
  const text = part.content.map((c) => (c.type === "text" ? c.text : "[image omitted]")).join("\n")
  return part.isError ? `[error] ${text}` : text
}

const tool = (t: Conversation.Tool): Json => {
  const fn: Json = { name: t.name }
  if (t.description !== undefined) fn["description"] = t.description
  fn["parameters"] = Foreign.isRecord(t.inputSchema) ? t.inputSchema : { type: "object", properties: {} }
  if (t.extra !== undefined && "strict" in t.extra) fn["strict"] = t.extra["strict"]
  return { type: "function", function: fn }
}

// messages, tool results and tools rendered once per source object (`RenderedJson`)
const messagesOnce = RenderedJson.memo()
const toolsOnce = RenderedJson.memo()

/** A content message the API takes a breakpoint on (not an assistant's output; some content to mark). */
const markable = (m: Json): boolean => {
  const content = m["content"]
  return m["role"] !== "assistant" && (typeof content === "string" ? content !== "" : Array.isArray(content) && content.length > 0)
}

/** Marks `messages` in place (copies of the marked ones) by the explicit layout; the breakpoints placed. */
const placeBreakpoints = (messages: Array<Json>, system: boolean, frontierAt: number, notes: number, max: number): number => {
  const lastOf = (end: number): number => {
    for (let i = end; i >= 0; i--) if (markable(messages[i]!)) return i
    return -1
  }
  const picked = ExplicitCache.layout(
    { system: system ? 0 : -1, frontier: frontierAt < 0 ? -1 : lastOf(frontierAt), last: lastOf(messages.length - 1 - notes) },
    max,
  )
  for (const i of picked) messages[i] = { ...messages[i]!, content: ExplicitCache.markParts(messages[i]!["content"], "text") }
  return picked.length
}

/** Renders `input` into an OpenAI Chat Completions request body. */
export const render = (input: RenderInput): Rendered & { readonly breakpoints: number } => {
  const messages: Array<Json> = []
  let frontierAt = -1
  const system = RenderedJson.once(messagesOnce, input.system, () => ({
    role: "system",
    content: input.system
      .filter((s) => s.text.trim() !== "")
      .map((s) => s.text)
      .join("\n\n"),
  }))
  if (system["content"] !== "") messages.push(system)
  for (const [k, message] of input.messages.entries()) {
    if (k === (input.stable ?? 0)) frontierAt = messages.length - 1
    switch (message.role) {
      case "system":
        messages.push(RenderedJson.once(messagesOnce, message, () => systemMessage(message)))
        break
      case "user":
        messages.push(RenderedJson.once(messagesOnce, message, () => userMessage(message)))
        break
      case "assistant":
        messages.push(RenderedJson.once(messagesOnce, message, () => assistantMessage(message)))
        break
      case "tool":
        for (const p of message.parts) {
          if (p.type === "tool_result")
            messages.push(RenderedJson.once(messagesOnce, p, () => ({ role: "tool", tool_call_id: p.callId, content: resultContent(p) })))
        }
        break
    }
  }
  if (input.messages.length === (input.stable ?? 0)) frontierAt = messages.length - 1
  const notes = CacheLayout.tailNotes(input)
  for (const text of notes) messages.push({ role: "user", content: text })
  const prices = CostModel.lookup(input.model.name)
  const explicit = prices.capabilities.explicitCacheBreakpoints
  const breakpoints = explicit
    ? placeBreakpoints(messages, system["content"] !== "", (input.stable ?? 0) > 0 ? frontierAt : -1, notes.length, prices.maxBreakpoints)
    : 0
  const key = CacheLayout.promptCacheKey(input.tenant, input.session)
  const body: Json = { model: input.model.name, messages }
  const functions = input.tools.filter((t) => !Foreign.isHosted(t))
  if (functions.length > 0) {
    body["tools"] = CacheLayout.orderTools(functions, input.toolOrder).map((t) =>
      RenderedJson.once(toolsOnce, t, () => tool(t), t.inputSchema),
    )
  }
  body["prompt_cache_key"] = key
  if (explicit) body["prompt_cache_options"] = ExplicitCache.options(ExplicitCache.ttlOf("chat", input.cacheTier))
  body["max_completion_tokens"] = input.model.maxOutputTokens
  return { body, promptCacheKey: key, breakpoints }
}
