/**
 * Request validation of OpenAI Chat Completions, for the rules ctxd must
 * never break (tool-call pairing, no unknown fields such as Anthropic's
 * `cache_control` or ctxd's own tool extensions; explicit cache fields only
 * on the models that take them, see `ExplicitCache`): the fake provider's
 * validator for this API (pure, so it lives with the adapter).
 */
import { isRecord } from "../Common.ts"
import * as ExplicitCache from "./ExplicitCache.ts"

type Json = Record<string, unknown>

/** An OpenAI error: message, param, code (type is always `invalid_request_error` for 400s). */
export interface Problem {
  readonly message: string
  readonly param: string | null
  readonly code: string | null
}

const CREATE_KEYS = new Set([
  "messages",
  "model",
  "audio",
  "frequency_penalty",
  "function_call",
  "functions",
  "logit_bias",
  "logprobs",
  "max_completion_tokens",
  "max_tokens",
  "metadata",
  "modalities",
  "moderation",
  "n",
  "parallel_tool_calls",
  "prediction",
  "presence_penalty",
  "prompt_cache_key",
  "prompt_cache_options",
  "prompt_cache_retention",
  "reasoning_effort",
  "response_format",
  "safety_identifier",
  "seed",
  "service_tier",
  "stop",
  "store",
  "stream",
  "stream_options",
  "temperature",
  "tool_choice",
  "tools",
  "top_logprobs",
  "top_p",
  "user",
  "verbosity",
  "web_search_options",
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

const unknown = (param: string): Problem => ({ message: `Unknown parameter: '${param}'.`, param, code: "unknown_parameter" })

const validateTools = (tools: unknown): Problem | undefined => {
  if (tools === undefined || tools === null) return undefined
  if (!Array.isArray(tools)) return { message: "Invalid type for 'tools': expected an array.", param: "tools", code: "invalid_type" }
  for (const [i, tool] of tools.entries()) {
    if (!isRecord(tool))
      return { message: `Invalid type for 'tools[${i}]': expected an object.`, param: `tools[${i}]`, code: "invalid_type" }
    for (const key of Object.keys(tool)) if (!TOOL_KEYS.has(key)) return unknown(`tools[${i}].${key}`)
    const fn = tool["function"]
    if (!isRecord(fn))
      return {
        message: `Missing required parameter: 'tools[${i}].function'.`,
        param: `tools[${i}].function`,
        code: "missing_required_parameter",
      }
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

const validateMessage = (message: unknown, i: number, model: string): Problem | undefined => {
  if (!isRecord(message))
    return { message: `Invalid type for 'messages[${i}]': expected an object.`, param: `messages[${i}]`, code: "invalid_type" }
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
    for (const key of Object.keys(part)) {
      if (key === ExplicitCache.FIELD) {
        const param = `messages[${i}].content[${k}].${key}`
        const problem = ExplicitCache.partProblem(model, role, part[key], param, ExplicitCache.TTLS.chat)
        if (problem !== undefined) return problem
      } else if (!allowed.has(key)) return unknown(`messages[${i}].content[${k}].${key}`)
    }
  }
  for (const [k, call] of calls.entries()) {
    if (!isRecord(call) || typeof call["id"] !== "string" || !isRecord(call["function"])) {
      return {
        message: `Missing required parameter: 'messages[${i}].tool_calls[${k}].id'.`,
        param: `messages[${i}].tool_calls[${k}].id`,
        code: "missing_required_parameter",
      }
    }
  }
  if (role === "tool" && typeof message["tool_call_id"] !== "string") {
    return {
      message: `Missing required parameter: 'messages[${i}].tool_call_id'.`,
      param: `messages[${i}].tool_call_id`,
      code: "missing_required_parameter",
    }
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
        return {
          message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
          param: `messages.[${i}].role`,
          code: null,
        }
      }
      const id = String(message["tool_call_id"])
      const at = open?.ids.indexOf(id) ?? -1
      if (open === undefined || at < 0) {
        return {
          message: `Invalid parameter: 'tool_call_id' of '${id}' not found in 'tool_calls' of previous message.`,
          param: `messages.[${i}].tool_call_id`,
          code: null,
        }
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
  if (typeof body["model"] !== "string" || body["model"].length === 0)
    return { message: "you must provide a model parameter", param: null, code: null }
  const messages = body["messages"]
  if (messages === undefined)
    return { message: "Missing required parameter: 'messages'.", param: "messages", code: "missing_required_parameter" }
  if (!Array.isArray(messages))
    return { message: "Invalid type for 'messages': expected an array.", param: "messages", code: "invalid_type" }
  if (messages.length === 0) {
    return {
      message: "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
      param: "messages",
      code: "empty_array",
    }
  }
  for (const [i, message] of messages.entries()) {
    const problem = validateMessage(message, i, body["model"])
    if (problem !== undefined) return problem
  }
  const options = ExplicitCache.optionsProblem(
    body["model"],
    body["prompt_cache_options"],
    ExplicitCache.CHAT_OPTION_KEYS,
    ExplicitCache.TTLS.chat,
  )
  if (options !== undefined) return options
  return validateTools(body["tools"]) ?? validatePairing(messages as ReadonlyArray<Json>)
}
