/**
 * OpenAI Responses API wire format (`POST /v1/responses`,
 * `POST /v1/responses/input_tokens`): validation (the adapter's,
 * `OpenAIResponsesProvider.Validate`), the prompt as a token sequence, and a
 * minimal `Response` object.
 *
 * Compaction: a `compaction` item carries the state of everything before it;
 * the prompt starts at the latest one (items before it are not read, so not
 * billed), and the item itself counts as its summary would (a stand-in: one
 * token per 16 characters of `encrypted_content`).
 */
import { OpenAIResponsesProvider } from "@ctxd/context"
import { isRecord, type Json, stableJson } from "./json.ts"
import type { ScriptedReply } from "./settings.ts"
import * as Tokens from "./tokens.ts"
import * as ToolSearch from "./toolSearch.ts"

/** An OpenAI error: message, param, code (the adapter's validation). */
export type Problem = OpenAIResponsesProvider.Validate.Problem

/** The first problem of a Responses body, or `undefined` when valid. */
export const validate = OpenAIResponsesProvider.Validate.validate
/** The 404 text for an input item `store: false` cannot look up, or `undefined`. */
export const unstored = OpenAIResponsesProvider.Validate.unstored
/** The index of the latest `compaction` item of `input` (0 when none): the prompt starts there. */
export const compactedFrom = OpenAIResponsesProvider.Validate.compactedFrom

const list = (u: unknown): ReadonlyArray<unknown> => (Array.isArray(u) ? u : [])

/** `out.push(...ids)` without the argument-count limit of spreading large arrays. */
const append = (out: Array<number>, ids: ArrayLike<number>): void => {
  for (let i = 0; i < ids.length; i++) out.push(ids[i]!)
}

/** Appends `content`'s tokens; `marks` gets the token offset after each part that carries a `prompt_cache_breakpoint`. */
const appendContent = (out: Array<number>, content: unknown, marks?: Array<number>): void => {
  if (typeof content === "string") return append(out, Tokens.encode(content))
  for (const part of list(content)) {
    if (!isRecord(part)) continue
    appendPart(out, part)
    if (marks !== undefined && part["prompt_cache_breakpoint"] !== undefined) marks.push(out.length)
  }
}

const appendPart = (out: Array<number>, part: Json): void => {
  if (part["type"] === "input_text" || part["type"] === "output_text") append(out, Tokens.encode(String(part["text"])))
  else if (part["type"] === "input_image")
    append(out, Tokens.frame(`image:${stableJson(part["image_url"] ?? part["file_id"])}`, Tokens.IMAGE_TOKENS))
  else append(out, Tokens.encode(stableJson(part)))
}

/**
 * The prompt as a token sequence: tools, instructions, then each input item
 * with its framing; `marks` gets the offsets of the explicit cache breakpoints.
 */
export const promptTokens = (body: Json, marks?: Array<number>): Array<number> => {
  const out: Array<number> = []
  append(out, Tokens.frame("request", Tokens.REQUEST_OVERHEAD))
  for (const tool of list(body["tools"])) {
    append(out, Tokens.frame("tool", Tokens.TOOL_OVERHEAD))
    // a deferred function shows only its name and description until a search loads it
    const deferred = isRecord(tool) && tool["defer_loading"] === true
    append(out, Tokens.encode(stableJson(deferred ? { name: tool["name"], description: tool["description"] } : tool)))
  }
  if (typeof body["instructions"] === "string") {
    append(out, Tokens.frame("developer", Tokens.MESSAGE_OVERHEAD))
    append(out, Tokens.encode(body["instructions"]))
  }
  const input = body["input"]
  if (typeof input === "string") {
    append(out, Tokens.frame("user", Tokens.MESSAGE_OVERHEAD))
    append(out, Tokens.encode(input))
    return out
  }
  const items = list(input)
  for (const item of items.slice(compactedFrom(items))) {
    if (!isRecord(item)) continue
    const type = String(item["type"] ?? "message")
    append(out, Tokens.frame(type === "message" ? String(item["role"]) : type, Tokens.MESSAGE_OVERHEAD))
    if (type === "message") appendContent(out, item["content"], marks)
    else if (type === "function_call") {
      append(out, Tokens.encode(String(item["name"])))
      append(out, Tokens.encode(String(item["arguments"])))
    } else if (type === "custom_tool_call") {
      append(out, Tokens.encode(String(item["name"])))
      append(out, Tokens.encode(String(item["input"])))
    } else if (type === "function_call_output" || type === "custom_tool_call_output") appendContent(out, item["output"], marks)
    else if (type === "compaction") {
      const encrypted = String(item["encrypted_content"])
      append(out, Tokens.frame(`compaction:${encrypted}`, Math.max(1, Math.ceil(encrypted.length / 16))))
    } else append(out, Tokens.encode(stableJson(item)))
  }
  return out
}

/**
 * A server-executed tool search for `query`: its `tool_search_call` and the
 * `tool_search_output` loading the deferred functions whose name or
 * description has the most words of the query (at most 5), as the model's output
 * opens with them. None without a `tool_search` tool in `body`.
 */
const searchItems = (body: Json, query: string, nextId: () => string): Array<Json> => {
  const tools = list(body["tools"]).filter(isRecord)
  if (!tools.some((t) => t["type"] === "tool_search")) return []
  const found = ToolSearch.ranked(
    query,
    tools.filter((t) => t["defer_loading"] === true),
  )
  const call = `tsc_${nextId()}`
  return [
    { type: "tool_search_call", id: `ts_${nextId()}`, call_id: call, arguments: { query }, execution: "server", status: "completed" },
    {
      type: "tool_search_output",
      id: `tso_${nextId()}`,
      call_id: call,
      execution: "server",
      status: "completed",
      tools: found.map(({ defer_loading: _deferred, ...t }) => t),
    },
  ]
}

/** A minimal valid `Response` object (text, or the scripted tool calls). */
export const response = (
  body: Json,
  reply: ScriptedReply | undefined,
  usage: { readonly input: number; readonly cached: number; readonly written?: number | undefined },
  nextId: () => string,
): Json => {
  const id = `resp_${nextId()}`
  const calls = (reply?.toolCalls ?? []).map((c) => ({
    type: "function_call",
    id: `fc_${nextId()}`,
    call_id: c.id ?? `call_${nextId()}`,
    name: c.name,
    arguments: JSON.stringify(c.input ?? {}),
    status: "completed",
  }))
  const items = list(body["input"])
  const text =
    reply?.text ??
    (calls.length > 0
      ? ""
      : `Summary of ${typeof body["input"] === "string" ? 1 : items.length} input items (${usage.input} input tokens).`)
  const output: Array<Json> = reply?.toolSearch === undefined ? [] : searchItems(body, reply.toolSearch, nextId)
  if (text !== "") {
    output.push({
      type: "message",
      id: `msg_${nextId()}`,
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text, annotations: [], logprobs: [] }],
    })
  }
  output.push(...calls)
  const outputTokens = Math.max(1, Tokens.count(text) + calls.reduce((n, c) => n + Tokens.count(c.name) + Tokens.count(c.arguments), 0))
  return {
    id,
    object: "response",
    created_at: Math.floor(Date.now() / 1_000),
    status: "completed",
    error: null,
    incomplete_details: null,
    instructions: body["instructions"] ?? null,
    max_output_tokens: body["max_output_tokens"] ?? null,
    model: body["model"],
    output,
    parallel_tool_calls: true,
    previous_response_id: null,
    prompt_cache_key: body["prompt_cache_key"] ?? null,
    prompt_cache_retention: body["prompt_cache_retention"] ?? null,
    ...(isRecord(body["prompt_cache_options"])
      ? { prompt_cache_options: { mode: "implicit", ttl: "30m", ...body["prompt_cache_options"] } }
      : {}),
    store: body["store"] ?? true,
    temperature: 1,
    tool_choice: body["tool_choice"] ?? "auto",
    tools: body["tools"] ?? [],
    top_p: 1,
    truncation: "disabled",
    usage: {
      input_tokens: usage.input,
      input_tokens_details: { cached_tokens: usage.cached, ...(usage.written === undefined ? {} : { cache_write_tokens: usage.written }) },
      output_tokens: outputTokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: usage.input + outputTokens,
    },
    metadata: {},
  }
}
