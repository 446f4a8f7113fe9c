/**
 * Anthropic Messages wire format: the prompt as cacheable blocks with their
 * ground-truth token counts, and the assistant reply as a JSON body or as the
 * SSE event sequence the SDK's stream helper accumulates.
 */
import type { PromptBlock, Ttl } from "./cache.ts"
import { excerpt, isRecord, type Json, sampleFromSchema, stableJson, stripCacheControl } from "./json.ts"
import type { ScriptedReply } from "./settings.ts"
import * as Tokens from "./tokens.ts"
import * as ToolSearch from "./toolSearch.ts"

const list = (u: unknown): ReadonlyArray<unknown> => (Array.isArray(u) ? u : [])

const ttlOf = (block: unknown): Ttl | undefined => {
  if (!isRecord(block)) return undefined
  const cc = block["cache_control"]
  if (!isRecord(cc)) return undefined
  return cc["ttl"] === "1h" ? "1h" : "5m"
}

/** A breakpoint on a nested tool_result text block caches the enclosing block. */
const nestedTtl = (block: unknown): Ttl | undefined => {
  const own = ttlOf(block)
  if (own !== undefined || !isRecord(block) || block["type"] !== "tool_result") return own
  const inner = list(block["content"])
    .map(ttlOf)
    .filter((t) => t !== undefined)
  return inner.includes("5m") ? "5m" : inner[0]
}

const contentTokens = (content: unknown): number => {
  if (typeof content === "string") return Tokens.count(content)
  return list(content).reduce<number>((n, block) => n + blockTokens(block), 0)
}

const blockTokens = (block: unknown): number => {
  if (!isRecord(block)) return 0
  switch (block["type"]) {
    case "text":
      return Tokens.count(String(block["text"] ?? ""))
    case "image":
      return Tokens.IMAGE_TOKENS
    case "tool_use":
      return Tokens.count(String(block["name"] ?? "")) + Tokens.count(stableJson(block["input"] ?? {}))
    case "tool_result":
      return contentTokens(block["content"] ?? "")
    case "thinking":
      return Tokens.count(String(block["thinking"] ?? ""))
    case "compaction":
      return Tokens.count(String(block["content"] ?? ""))
    default:
      return Tokens.count(stableJson(stripCacheControl(block)))
  }
}

/**
 * Where the prompt's messages start: the latest `compaction` block (message
 * index and block index), or the first message. The API drops every message
 * block before it: they are neither read nor billed.
 */
export const compactedFrom = (messages: ReadonlyArray<unknown>): { readonly message: number; readonly block: number } => {
  for (let m = messages.length - 1; m >= 0; m--) {
    const message = messages[m]
    const content = isRecord(message) ? message["content"] : undefined
    const blocks = list(content)
    for (let k = blocks.length - 1; k >= 0; k--) {
      const block = blocks[k]
      if (isRecord(block) && block["type"] === "compaction") return { message: m, block: k }
    }
  }
  return { message: 0, block: 0 }
}

/**
 * The prompt as blocks in processing order (tools, system, messages from
 * the latest compaction block on), each with its tokens: the text's
 * Claude-BPE count plus fixed framing overheads (per request, per message,
 * per tool). A compaction block counts as its summary (`content`). A
 * deferred tool (`defer_loading`) is no part of the prompt: its definition
 * counts where a tool search result references it.
 */
export const promptBlocks = (body: Json): Array<PromptBlock> => {
  const blocks: Array<{ key: string; tokens: number; ttl: Ttl | undefined }> = []
  const deferred = new Map<string, unknown>()
  for (const tool of list(body["tools"])) {
    if (isRecord(tool) && tool["defer_loading"] === true) {
      deferred.set(String(tool["name"]), tool)
      continue
    }
    blocks.push({ key: stableJson(["tool", stripCacheControl(tool)]), tokens: ToolSearch.toolTokens(tool), ttl: ttlOf(tool) })
  }
  const system = body["system"]
  if (typeof system === "string" && system.length > 0) {
    blocks.push({ key: stableJson(["system", system]), tokens: Tokens.count(system), ttl: undefined })
  }
  for (const block of list(system)) {
    blocks.push({ key: stableJson(["system", stripCacheControl(block)]), tokens: blockTokens(block), ttl: ttlOf(block) })
  }
  const messages = list(body["messages"])
  const from = compactedFrom(messages)
  for (const [m, message] of messages.entries()) {
    if (!isRecord(message) || m < from.message) continue
    const role = String(message["role"])
    const content = message["content"]
    const all = typeof content === "string" ? [{ type: "text", text: content }] : list(content)
    const parts = m === from.message ? all.slice(from.block) : all
    if (parts.length === 0) blocks.push({ key: stableJson([role, "empty"]), tokens: Tokens.MESSAGE_OVERHEAD, ttl: undefined })
    parts.forEach((block, k) => {
      blocks.push({
        key: stableJson([role, k === 0, stripCacheControl(block)]),
        tokens: blockTokens(block) + ToolSearch.loadedTokens(block, deferred) + (k === 0 ? Tokens.MESSAGE_OVERHEAD : 0),
        ttl: nestedTtl(block),
      })
    })
  }
  const first = blocks[0]
  if (first !== undefined) first.tokens += Tokens.REQUEST_OVERHEAD
  const last = blocks[blocks.length - 1]
  if (last !== undefined && isRecord(body["cache_control"])) last.ttl = ttlOf(body) ?? last.ttl
  return blocks
}

const lastUserText = (body: Json): string => {
  const messages = list(body["messages"]).filter(isRecord)
  const user = messages.filter((m) => m["role"] === "user").at(-1)
  const texts = (content: unknown): Array<string> =>
    typeof content === "string"
      ? [content]
      : list(content).flatMap((b) =>
          !isRecord(b) ? [] : b["type"] === "text" ? [String(b["text"])] : b["type"] === "tool_result" ? texts(b["content"]) : [],
        )
  return texts(user?.["content"]).join(" ")
}

/** The deterministic default reply: a summary-like line about the request. */
export const defaultText = (messageCount: number, inputTokens: number, lastUser: string): string =>
  `Summary of ${messageCount} messages (${inputTokens} input tokens). Last user message: "${excerpt(lastUser, 160)}"`

/** What the assistant answers, before it is put on the wire. */
export interface Answer {
  readonly content: ReadonlyArray<Json>
  readonly stopReason: string
  readonly outputTokens: number
}

const forcedTool = (body: Json): Json | undefined => {
  const choice = body["tool_choice"]
  if (!isRecord(choice)) return undefined
  const tools = list(body["tools"]).filter(isRecord)
  if (choice["type"] === "tool") return tools.find((t) => t["name"] === choice["name"])
  if (choice["type"] === "any") return tools[0]
  return undefined
}

/** The answer to `body`: the scripted reply if any, else the default text (or a forced tool call). */
export const answer = (body: Json, reply: ScriptedReply | undefined, inputTokens: number, nextId: () => string): Answer => {
  const content: Array<Json> = reply?.toolSearch === undefined ? [] : ToolSearch.searchBlocks(body, reply.toolSearch, nextId)
  const forced = reply === undefined ? forcedTool(body) : undefined
  if (forced !== undefined) {
    content.push({ type: "tool_use", id: `toolu_${nextId()}`, name: forced["name"], input: sampleFromSchema(forced["input_schema"]) ?? {} })
  } else {
    const text = reply === undefined ? defaultText(list(body["messages"]).length, inputTokens, lastUserText(body)) : reply.text
    if (text !== undefined && text.length > 0) content.push({ type: "text", text, citations: null })
    for (const call of reply?.toolCalls ?? []) {
      content.push({ type: "tool_use", id: call.id ?? `toolu_${nextId()}`, name: call.name, input: call.input ?? {} })
    }
  }
  const hasTool = content.some((b) => b["type"] === "tool_use")
  return {
    content,
    stopReason: reply?.stopReason ?? (hasTool ? "tool_use" : "end_turn"),
    outputTokens: Math.max(1, contentTokens(content)),
  }
}

/**
 * `a` led by a thinking block when the body enables thinking on a model that
 * binds reasoning (its signature is set by `binding.ts`), or on any model when
 * the answer calls a tool: the continuation of a tool call must then start with
 * the model's thinking (the validator's rule), so a model that thought has to
 * give it (an agent CLI with adaptive thinking echoes it back). A text answer
 * on other models is unchanged, as before.
 */
export const withThinking = (body: Json, a: Answer, binds: boolean): Answer => {
  const thinking = body["thinking"]
  const enabled = isRecord(thinking) && (thinking["type"] === "enabled" || thinking["type"] === "adaptive")
  const callsTool = a.content.some((b) => b["type"] === "tool_use")
  if (!enabled || !(binds || callsTool)) return a
  const text = `Thinking about ${list(body["messages"]).length} messages.`
  // bound models' signatures are set by `binding.ts`; others get an opaque one, as the API always signs
  const signature = binds ? "" : Buffer.from(`fake-thinking-${list(body["messages"]).length}`).toString("base64")
  return {
    ...a,
    content: [{ type: "thinking", thinking: text, signature }, ...a.content],
    outputTokens: a.outputTokens + Tokens.count(text),
  }
}

/** The `usage` object of a response. */
export const usage = (
  split: { readonly input: number; readonly read: number; readonly creation5m: number; readonly creation1h: number },
  outputTokens: number,
): Json => ({
  input_tokens: split.input,
  output_tokens: outputTokens,
  cache_creation_input_tokens: split.creation5m + split.creation1h,
  cache_read_input_tokens: split.read,
  cache_creation: { ephemeral_5m_input_tokens: split.creation5m, ephemeral_1h_input_tokens: split.creation1h },
  server_tool_use: null,
  service_tier: "standard",
  inference_geo: null,
})

/** A non-streaming `Message` body. */
export const message = (id: string, model: string, a: Answer, u: Json): Json => ({
  id,
  type: "message",
  role: "assistant",
  model,
  content: a.content,
  stop_reason: a.stopReason,
  stop_sequence: null,
  stop_details: null,
  container: null,
  usage: u,
})

const chunks = (text: string, size: number): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out.length === 0 ? [""] : out
}

/** The SSE events (name, data) of a streamed `Message`. */
export const streamEvents = (id: string, model: string, a: Answer, u: Json, extra: Json = {}): Array<[string, Json]> => {
  const events: Array<[string, Json]> = []
  const start = { ...message(id, model, { ...a, content: [] }, { ...u, output_tokens: 1 }), stop_reason: null, ...extra }
  events.push(["message_start", { type: "message_start", message: start }])
  events.push(["ping", { type: "ping" }])
  a.content.forEach((block, index) => {
    if (block["type"] === "tool_use" || block["type"] === "server_tool_use") {
      events.push(["content_block_start", { type: "content_block_start", index, content_block: { ...block, input: {} } }])
      for (const part of chunks(JSON.stringify(block["input"]), 24)) {
        events.push([
          "content_block_delta",
          { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: part } },
        ])
      }
    } else if (block["type"] === "thinking") {
      events.push(["content_block_start", { type: "content_block_start", index, content_block: { ...block, thinking: "", signature: "" } }])
      const deltas = [
        { type: "thinking_delta", thinking: String(block["thinking"]), estimated_tokens: null },
        { type: "signature_delta", signature: String(block["signature"]) },
      ]
      for (const delta of deltas) events.push(["content_block_delta", { type: "content_block_delta", index, delta }])
    } else if (block["type"] !== "text") {
      // a server tool's result arrives whole in its start event
      events.push(["content_block_start", { type: "content_block_start", index, content_block: block }])
    } else {
      events.push([
        "content_block_start",
        { type: "content_block_start", index, content_block: { type: "text", text: "", citations: null } },
      ])
      for (const part of chunks(String(block["text"]), 16)) {
        events.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: part } }])
      }
    }
    events.push(["content_block_stop", { type: "content_block_stop", index }])
  })
  events.push([
    "message_delta",
    {
      type: "message_delta",
      delta: { stop_reason: a.stopReason, stop_sequence: null, stop_details: null, container: null },
      usage: {
        input_tokens: u["input_tokens"],
        output_tokens: a.outputTokens,
        cache_creation_input_tokens: u["cache_creation_input_tokens"],
        cache_read_input_tokens: u["cache_read_input_tokens"],
        server_tool_use: null,
      },
    },
  ])
  events.push(["message_stop", { type: "message_stop" }])
  return events
}
