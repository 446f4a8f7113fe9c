/**
 * OpenAI Chat Completions wire format: validation of the rules ctxd must never
 * break (tool-call pairing, no unknown fields such as Anthropic's
 * `cache_control` or ctxd's own tool extensions), the prompt as a token
 * sequence for usage and caching, and the reply as JSON or SSE chunks.
 */
import { excerpt, isRecord, type Json, sampleFromSchema, stableJson } from "./json.ts"
import type { ScriptedReply } from "./settings.ts"
import * as Tokens from "./tokens.ts"

/** An OpenAI error: message, param, code (type is always `invalid_request_error` for 400s). */
export interface Problem {
  readonly message: string
  readonly param: string | null
  readonly code: string | null
}

const CREATE_KEYS = new Set([
  "messages", "model", "audio", "frequency_penalty", "function_call", "functions", "logit_bias",
  "logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "moderation", "n",
  "parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key", "prompt_cache_options",
  "prompt_cache_retention", "reasoning_effort", "response_format", "safety_identifier", "seed",
  "service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice", "tools",
  "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
])
const MESSAGE_KEYS = new Set(["role", "content", "name", "tool_calls", "tool_call_id", "refusal", "audio", "function_call"])
const ROLES = new Set(["system", "developer", "user", "assistant", "tool", "function"])
const PART_KEYS: Record<string, ReadonlySet<string>> = {
  text: new Set(["type", "text"]),
  image_url: new Set(["type", "image_url"]),
}
const TOOL_KEYS = new Set(["type", "function"])
const FUNCTION_KEYS = new Set(["name", "description", "parameters", "strict"])
const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/

const list = (u: unknown): ReadonlyArray<unknown> => (Array.isArray(u) ? u : [])

/** `out.push(...ids)` without the argument-count limit of spreading large arrays. */
const append = (out: Array<number>, ids: ArrayLike<number>): void => {
  for (let i = 0; i < ids.length; i++) out.push(ids[i]!)
}

const unknown = (param: string): Problem => ({ message: `Unknown parameter: '${param}'.`, param, code: "unknown_parameter" })

const validateTools = (tools: unknown): Problem | undefined => {
  if (tools === undefined || tools === null) return undefined
  if (!Array.isArray(tools)) return { message: "Invalid type for 'tools': expected an array.", param: "tools", code: "invalid_type" }
  for (const [i, tool] of tools.entries()) {
    if (!isRecord(tool)) return { message: `Invalid type for 'tools[${i}]': expected an object.`, param: `tools[${i}]`, code: "invalid_type" }
    for (const key of Object.keys(tool)) if (!TOOL_KEYS.has(key)) return unknown(`tools[${i}].${key}`)
    const fn = tool["function"]
    if (!isRecord(fn)) return { message: `Missing required parameter: 'tools[${i}].function'.`, param: `tools[${i}].function`, code: "missing_required_parameter" }
    for (const key of Object.keys(fn)) if (!FUNCTION_KEYS.has(key)) return unknown(`tools[${i}].function.${key}`)
    if (typeof fn["name"] !== "string" || !FUNCTION_NAME.test(fn["name"])) {
      return {
        message: `Invalid 'tools[${i}].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`,
        param: `tools[${i}].function.name`,
        code: "invalid_value",
      }
    }
  }
  return undefined
}

const validateMessage = (message: unknown, i: number): Problem | undefined => {
  if (!isRecord(message)) return { message: `Invalid type for 'messages[${i}]': expected an object.`, param: `messages[${i}]`, code: "invalid_type" }
  for (const key of Object.keys(message)) if (!MESSAGE_KEYS.has(key)) return unknown(`messages[${i}].${key}`)
  const role = message["role"]
  if (typeof role !== "string" || !ROLES.has(role)) {
    return {
      message: `Invalid value: '${String(role)}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.`,
      param: `messages[${i}].role`,
      code: "invalid_value",
    }
  }
  const content = message["content"]
  const calls = list(message["tool_calls"])
  if ((content === undefined || content === null) && !(role === "assistant" && calls.length > 0)) {
    return { message: "Invalid value for 'content': expected a string, got null.", param: `messages.[${i}].content`, code: null }
  }
  for (const [k, part] of list(content).entries()) {
    const allowed = isRecord(part) ? PART_KEYS[String(part["type"])] : undefined
    if (allowed === undefined || !isRecord(part)) continue
    for (const key of Object.keys(part)) if (!allowed.has(key)) return unknown(`messages[${i}].content[${k}].${key}`)
  }
  for (const [k, call] of calls.entries()) {
    if (!isRecord(call) || typeof call["id"] !== "string" || !isRecord(call["function"])) {
      return { message: `Missing required parameter: 'messages[${i}].tool_calls[${k}].id'.`, param: `messages[${i}].tool_calls[${k}].id`, code: "missing_required_parameter" }
    }
  }
  if (role === "tool" && typeof message["tool_call_id"] !== "string") {
    return { message: `Missing required parameter: 'messages[${i}].tool_call_id'.`, param: `messages[${i}].tool_call_id`, code: "missing_required_parameter" }
  }
  return undefined
}

const validatePairing = (messages: ReadonlyArray<Json>): Problem | undefined => {
  let open: { index: number; ids: Array<string> } | undefined
  const unanswered = (o: { index: number; ids: Array<string> }): Problem => ({
    message: `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${o.ids.join(", ")}`,
    param: `messages.[${o.index}].role`,
    code: null,
  })
  let afterToolCalls = false
  for (const [i, message] of messages.entries()) {
    if (message["role"] === "tool") {
      if (!afterToolCalls) {
        return { message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", param: `messages.[${i}].role`, code: null }
      }
      const id = String(message["tool_call_id"])
      const at = open?.ids.indexOf(id) ?? -1
      if (open === undefined || at < 0) {
        return { message: `Invalid parameter: 'tool_call_id' of '${id}' not found in 'tool_calls' of previous message.`, param: `messages.[${i}].tool_call_id`, code: null }
      }
      open.ids.splice(at, 1)
      continue
    }
    if (open !== undefined && open.ids.length > 0) return unanswered(open)
    const ids = list(message["tool_calls"]).map((c) => String((c as Json)["id"]))
    open = message["role"] === "assistant" && ids.length > 0 ? { index: i, ids } : undefined
    afterToolCalls = open !== undefined
  }
  return open !== undefined && open.ids.length > 0 ? unanswered(open) : undefined
}

/** The first problem of a `/v1/chat/completions` body, or `undefined` when valid. */
export const validate = (body: unknown): Problem | undefined => {
  if (!isRecord(body)) return { message: "We could not parse the JSON body of your request.", param: null, code: null }
  for (const key of Object.keys(body)) {
    if (!CREATE_KEYS.has(key)) return { message: `Unrecognized request argument supplied: ${key}`, param: null, code: null }
  }
  if (typeof body["model"] !== "string" || body["model"].length === 0) return { message: "you must provide a model parameter", param: null, code: null }
  const messages = body["messages"]
  if (messages === undefined) return { message: "Missing required parameter: 'messages'.", param: "messages", code: "missing_required_parameter" }
  if (!Array.isArray(messages)) return { message: "Invalid type for 'messages': expected an array.", param: "messages", code: "invalid_type" }
  if (messages.length === 0) {
    return { message: "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", param: "messages", code: "empty_array" }
  }
  for (const [i, message] of messages.entries()) {
    const problem = validateMessage(message, i)
    if (problem !== undefined) return problem
  }
  return validateTools(body["tools"]) ?? validatePairing(messages as ReadonlyArray<Json>)
}

const appendContent = (out: Array<number>, content: unknown): void => {
  if (typeof content === "string") return append(out, Tokens.encode(content))
  for (const part of list(content)) {
    if (!isRecord(part)) continue
    if (part["type"] === "text") append(out, Tokens.encode(String(part["text"])))
    else if (part["type"] === "image_url") append(out, Tokens.frame(`image:${stableJson(part["image_url"])}`, Tokens.IMAGE_TOKENS))
    else append(out, Tokens.encode(stableJson(part)))
  }
}

/** The prompt as a token sequence: tools first, then each message with its framing. */
export const promptTokens = (body: Json): Array<number> => {
  const out: Array<number> = []
  append(out, Tokens.frame("request", Tokens.REQUEST_OVERHEAD))
  for (const tool of list(body["tools"])) {
    append(out, Tokens.frame("tool", Tokens.TOOL_OVERHEAD))
    append(out, Tokens.encode(stableJson(isRecord(tool) ? tool["function"] : tool)))
  }
  for (const message of list(body["messages"])) {
    if (!isRecord(message)) continue
    append(out, Tokens.frame(String(message["role"]), Tokens.MESSAGE_OVERHEAD))
    appendContent(out, message["content"])
    if (typeof message["name"] === "string") append(out, Tokens.encode(message["name"]))
    for (const call of list(message["tool_calls"])) {
      const fn = isRecord(call) && isRecord(call["function"]) ? call["function"] : {}
      append(out, Tokens.encode(String(fn["name"] ?? "")))
      append(out, Tokens.encode(String(fn["arguments"] ?? "")))
    }
  }
  return out
}

/** What the assistant answers, before it is put on the wire. */
export interface Answer {
  readonly text: string | null
  readonly toolCalls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>
  readonly finishReason: string
  readonly completionTokens: number
}

const forcedTool = (body: Json): Json | undefined => {
  const choice = body["tool_choice"]
  const fns = list(body["tools"]).flatMap((t) => (isRecord(t) && isRecord(t["function"]) ? [t["function"]] : []))
  if (choice === "required") return fns[0]
  if (isRecord(choice) && isRecord(choice["function"])) return fns.find((f) => f["name"] === (choice["function"] as Json)["name"])
  return undefined
}

const lastUserText = (body: Json): string => {
  const user = list(body["messages"]).filter(isRecord).filter((m) => m["role"] === "user").at(-1)
  const content = user?.["content"]
  if (typeof content === "string") return content
  return list(content).flatMap((p) => (isRecord(p) && p["type"] === "text" ? [String(p["text"])] : [])).join(" ")
}

/** The answer to `body`: the scripted reply if any, else the default text (or a forced tool call). */
export const answer = (body: Json, reply: ScriptedReply | undefined, promptTokenCount: number, nextId: () => string): Answer => {
  const forced = reply === undefined ? forcedTool(body) : undefined
  const toolCalls = forced !== undefined
    ? [{ id: `call_${nextId()}`, name: String(forced["name"]), arguments: JSON.stringify(sampleFromSchema(forced["parameters"]) ?? {}) }]
    : (reply?.toolCalls ?? []).map((c) => ({ id: c.id ?? `call_${nextId()}`, name: c.name, arguments: JSON.stringify(c.input ?? {}) }))
  const text = forced !== undefined ? null
    : reply === undefined
      ? `Summary of ${list(body["messages"]).length} messages (${promptTokenCount} prompt tokens). Last user message: "${excerpt(lastUserText(body), 160)}"`
      : reply.text !== undefined && reply.text.length > 0 ? reply.text : null
  const completionTokens = Tokens.count(text ?? "") + toolCalls.reduce((n, c) => n + Tokens.count(c.name) + Tokens.count(c.arguments), 0)
  return {
    text,
    toolCalls,
    finishReason: reply?.stopReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
    completionTokens: Math.max(1, completionTokens),
  }
}

/** The `usage` object of a completion. */
export const usage = (prompt: number, cached: number, completion: number): Json => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
  prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
  completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
})

const wireCalls = (a: Answer) => a.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }))

/** A non-streaming `ChatCompletion` body. */
export const completion = (id: string, model: string, created: number, a: Answer, u: Json): Json => ({
  id,
  object: "chat.completion",
  created,
  model,
  choices: [{
    index: 0,
    message: { role: "assistant", content: a.text, refusal: null, annotations: [], ...(a.toolCalls.length > 0 ? { tool_calls: wireCalls(a) } : {}) },
    logprobs: null,
    finish_reason: a.finishReason,
  }],
  usage: u,
  service_tier: "default",
  system_fingerprint: "fp_fake",
})

/** The SSE `data:` payloads of a streamed completion (without the final `[DONE]`). */
export const chunks = (id: string, model: string, created: number, a: Answer, u: Json, includeUsage: boolean): Array<Json> => {
  const base = { id, object: "chat.completion.chunk", created, model, service_tier: "default", system_fingerprint: "fp_fake", ...(includeUsage ? { usage: null } : {}) }
  const choice = (delta: Json, finish: string | null = null) => ({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })
  const out: Array<Json> = [choice({ role: "assistant", content: "", refusal: null })]
  const text = a.text ?? ""
  for (let i = 0; i < text.length; i += 16) out.push(choice({ content: text.slice(i, i + 16) }))
  a.toolCalls.forEach((c, index) => {
    out.push(choice({ tool_calls: [{ index, id: c.id, type: "function", function: { name: c.name, arguments: "" } }] }))
    for (let i = 0; i < c.arguments.length; i += 24) {
      out.push(choice({ tool_calls: [{ index, function: { arguments: c.arguments.slice(i, i + 24) } }] }))
    }
  })
  out.push(choice({}, a.finishReason))
  if (includeUsage) out.push({ ...base, choices: [], usage: u })
  return out
}

/** OpenAI's error body. */
export const errorBody = (message: string, type: string, param: string | null, code: string | null): Json => ({
  error: { message, type, param, code },
})
