/**
 * Request validation of the OpenAI Responses API (`POST /v1/responses`,
 * `POST /v1/responses/input_tokens`), for the rules ctxd must never break
 * (known top-level keys, roles, `call_id` pairing between `function_call`
 * and `function_call_output`, well-formed reasoning items followed by the
 * output they led to, compaction items, hosted tools' call items with their
 * `id`, `context_management`): the fake provider's validator for this API
 * (pure, so it lives with the adapter).
 */
import * as ExplicitCache from "../openai-chat/ExplicitCache.ts"
import { isRecord } from "../Common.ts"
import type { Problem } from "../openai-chat/Validate.ts"

type Json = Record<string, unknown>

export type { Problem }

const CREATE_KEYS = new Set([
  "model",
  "input",
  "instructions",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "max_output_tokens",
  "max_tool_calls",
  "metadata",
  "previous_response_id",
  "conversation",
  "prompt",
  "prompt_cache_key",
  "prompt_cache_options",
  "prompt_cache_retention",
  "reasoning",
  "safety_identifier",
  "service_tier",
  "store",
  "stream",
  "stream_options",
  "temperature",
  "text",
  "top_logprobs",
  "top_p",
  "truncation",
  "user",
  "include",
  "background",
  "context_management",
  // not in the API reference, but sent on every call by OpenAI's own Codex CLI (0.171, API-key login, to
  // api.openai.com): a string map of turn ids the API accepts (and ignores, as far as the reply shows)
  "client_metadata",
])
const COUNT_KEYS = new Set([
  "model",
  "input",
  "instructions",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "previous_response_id",
  "conversation",
  "reasoning",
  "text",
  "truncation",
])
const ROLES = new Set(["user", "assistant", "system", "developer"])
const ITEM_KEYS: Record<string, ReadonlySet<string>> = {
  message: new Set(["type", "role", "content", "id", "status"]),
  function_call: new Set(["type", "call_id", "name", "arguments", "id", "status"]),
  function_call_output: new Set(["type", "call_id", "output", "id", "status"]),
  custom_tool_call: new Set(["type", "call_id", "name", "input", "id", "status"]),
  custom_tool_call_output: new Set(["type", "call_id", "output", "id"]),
  reasoning: new Set(["type", "id", "summary", "encrypted_content", "content", "status"]),
  compaction: new Set(["type", "encrypted_content", "id"]),
}
/** Hosted tools' call items (their other fields vary by tool and are not checked). */
const HOSTED_CALLS = new Set([
  "web_search_call",
  "file_search_call",
  "code_interpreter_call",
  "image_generation_call",
  "mcp_call",
  "mcp_list_tools",
  "tool_search_call",
  "tool_search_output",
])
const PART_KEYS: Record<string, ReadonlySet<string>> = {
  input_text: new Set(["type", "text"]),
  output_text: new Set(["type", "text", "annotations", "logprobs"]),
  input_image: new Set(["type", "image_url", "file_id", "detail"]),
  input_file: new Set(["type", "file_id", "file_data", "file_url", "filename"]),
  refusal: new Set(["type", "refusal"]),
}
const FUNCTION_KEYS = new Set(["type", "name", "description", "parameters", "strict", "defer_loading"])
const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/

const unknown = (param: string): Problem => ({ message: `Unknown parameter: '${param}'.`, param, code: "unknown_parameter" })
const missing = (param: string): Problem => ({
  message: `Missing required parameter: '${param}'.`,
  param,
  code: "missing_required_parameter",
})
const invalid = (param: string, message: string): Problem => ({ message, param, code: "invalid_value" })

const validateParts = (content: unknown, at: string, role: string, model: string): Problem | undefined => {
  if (typeof content === "string") return undefined
  if (!Array.isArray(content))
    return { message: `Invalid type for '${at}': expected a string or an array.`, param: at, code: "invalid_type" }
  for (const [k, part] of content.entries()) {
    const p = `${at}[${k}]`
    if (!isRecord(part)) return { message: `Invalid type for '${p}': expected an object.`, param: p, code: "invalid_type" }
    const allowed = PART_KEYS[String(part["type"])]
    if (allowed === undefined) return invalid(`${p}.type`, `Invalid value: '${String(part["type"])}'.`)
    for (const key of Object.keys(part)) {
      if (key === ExplicitCache.FIELD && part["type"] !== "output_text" && part["type"] !== "refusal") {
        const problem = ExplicitCache.partProblem(model, role, part[key], `${p}.${key}`, ExplicitCache.TTLS.responses)
        if (problem !== undefined) return problem
      } else if (!allowed.has(key)) return unknown(`${p}.${key}`)
    }
    const textual = part["type"] === "input_text" || part["type"] === "output_text"
    if (textual && typeof part["text"] !== "string") return missing(`${p}.text`)
    if (part["type"] === "output_text" && role !== "assistant") {
      return invalid(`${p}.type`, `Invalid value: 'output_text'. Supported values are: 'input_text', 'input_image', and 'input_file'.`)
    }
    if (part["type"] === "input_text" && role === "assistant") {
      return invalid(`${p}.type`, `Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'.`)
    }
    if (part["type"] === "input_image" && part["image_url"] == null && part["file_id"] == null) return missing(`${p}.image_url`)
  }
  return undefined
}

const validateItem = (item: unknown, i: number, model: string): Problem | undefined => {
  const at = `input[${i}]`
  if (!isRecord(item)) return { message: `Invalid type for '${at}': expected an object.`, param: at, code: "invalid_type" }
  const type = item["type"] ?? "message"
  if (HOSTED_CALLS.has(String(type))) return typeof item["id"] === "string" && item["id"] !== "" ? undefined : missing(`${at}.id`)
  const allowed = ITEM_KEYS[String(type)]
  if (allowed === undefined) return invalid(`${at}.type`, `Invalid value: '${String(type)}'.`)
  for (const key of Object.keys(item)) if (!allowed.has(key)) return unknown(`${at}.${key}`)
  switch (type) {
    case "message": {
      const role = item["role"]
      if (typeof role !== "string" || !ROLES.has(role)) {
        return invalid(
          `${at}.role`,
          `Invalid value: '${String(role)}'. Supported values are: 'assistant', 'system', 'developer', and 'user'.`,
        )
      }
      if (item["content"] === undefined) return missing(`${at}.content`)
      return validateParts(item["content"], `${at}.content`, role, model)
    }
    case "function_call":
      if (typeof item["call_id"] !== "string" || item["call_id"] === "") return missing(`${at}.call_id`)
      if (typeof item["name"] !== "string" || item["name"] === "") return missing(`${at}.name`)
      if (typeof item["arguments"] !== "string") return missing(`${at}.arguments`)
      return undefined
    case "custom_tool_call":
      if (typeof item["call_id"] !== "string" || item["call_id"] === "") return missing(`${at}.call_id`)
      if (typeof item["name"] !== "string" || item["name"] === "") return missing(`${at}.name`)
      if (typeof item["input"] !== "string") return missing(`${at}.input`)
      return undefined
    case "function_call_output":
    case "custom_tool_call_output":
      if (typeof item["call_id"] !== "string" || item["call_id"] === "") return missing(`${at}.call_id`)
      if (item["output"] === undefined) return missing(`${at}.output`)
      return validateParts(item["output"], `${at}.output`, "tool", model)
    case "compaction": {
      const encrypted = item["encrypted_content"]
      if (encrypted === undefined || encrypted === null) return missing(`${at}.encrypted_content`)
      if (typeof encrypted !== "string") {
        return {
          message: `Invalid type for '${at}.encrypted_content': expected a string.`,
          param: `${at}.encrypted_content`,
          code: "invalid_type",
        }
      }
      if (encrypted === "") return invalid(`${at}.encrypted_content`, `Invalid '${at}.encrypted_content': empty string.`)
      const id = item["id"]
      if (id !== undefined && id !== null && typeof id !== "string") {
        return { message: `Invalid type for '${at}.id': expected a string.`, param: `${at}.id`, code: "invalid_type" }
      }
      return undefined
    }
    default: {
      // reasoning
      if (!Array.isArray(item["summary"])) return missing(`${at}.summary`)
      for (const [k, s] of item["summary"].entries()) {
        if (!isRecord(s) || s["type"] !== "summary_text" || typeof s["text"] !== "string") {
          return invalid(`${at}.summary[${k}]`, `Invalid '${at}.summary[${k}]': expected {type: 'summary_text', text}.`)
        }
      }
      const encrypted = item["encrypted_content"]
      if (encrypted !== undefined && encrypted !== null && typeof encrypted !== "string") {
        return {
          message: `Invalid type for '${at}.encrypted_content': expected a string.`,
          param: `${at}.encrypted_content`,
          code: "invalid_type",
        }
      }
      return undefined
    }
  }
}

/**
 * Pairing: every `function_call_output` answers an earlier `function_call`
 * with its `call_id` (once); a `function_call` followed by more input than
 * its own run of calls and outputs must have its output.
 */
const validatePairing = (items: ReadonlyArray<Json>): Problem | undefined => {
  const open = new Map<string, number>()
  const answered = new Set<string>()
  for (const [i, item] of items.entries()) {
    const type = item["type"] ?? "message"
    if (type === "function_call" || type === "custom_tool_call") {
      const id = String(item["call_id"])
      if (open.has(id)) return invalid(`input[${i}].call_id`, `Duplicate item found with call_id '${id}'.`)
      open.set(id, i)
      answered.delete(id)
      continue
    }
    if (type === "function_call_output" || type === "custom_tool_call_output") {
      const id = String(item["call_id"])
      if (!open.has(id)) {
        return invalid(
          `input[${i}].call_id`,
          answered.has(id)
            ? `Duplicate function call output for call_id '${id}'.`
            : `No tool call found for function call output with call_id ${id}.`,
        )
      }
      open.delete(id)
      answered.add(id)
      continue
    }
    if (type === "reasoning") {
      // a reasoning item leads to output: the next item that is not reasoning is the model's (a call or its message)
      let j = i + 1
      while (j < items.length && items[j]!["type"] === "reasoning") j++
      const next = items[j]
      const nextType = next === undefined ? undefined : (next["type"] ?? "message")
      const follows =
        nextType === "function_call" ||
        nextType === "custom_tool_call" ||
        HOSTED_CALLS.has(String(nextType)) ||
        (nextType === "message" && next!["role"] === "assistant")
      if (!follows) {
        const id = typeof item["id"] === "string" ? item["id"] : "rs_unknown"
        return { message: `Item '${id}' of type 'reasoning' was provided without its required following item.`, param: "input", code: null }
      }
      continue
    }
    if (type === "compaction" || HOSTED_CALLS.has(String(type))) continue
    // a message: every call before it must be answered
    for (const [id, at] of open) {
      return invalid(`input[${at}]`, `No tool output found for function call ${id}.`)
    }
  }
  return undefined
}

const validateTools = (tools: unknown): Problem | undefined => {
  if (tools === undefined || tools === null) return undefined
  if (!Array.isArray(tools)) return { message: "Invalid type for 'tools': expected an array.", param: "tools", code: "invalid_type" }
  for (const [i, tool] of tools.entries()) {
    if (!isRecord(tool) || typeof tool["type"] !== "string") return missing(`tools[${i}].type`)
    if (tool["type"] !== "function") continue
    for (const key of Object.keys(tool)) if (!FUNCTION_KEYS.has(key)) return unknown(`tools[${i}].${key}`)
    if (typeof tool["name"] !== "string" || !FUNCTION_NAME.test(tool["name"])) {
      return invalid(
        `tools[${i}].name`,
        `Invalid 'tools[${i}].name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`,
      )
    }
  }
  return undefined
}

/**
 * Under `store: false` nothing is kept server-side: an input item the API
 * would look up by its `id` — a reasoning item without `encrypted_content` —
 * is answered 404 (the API's text), or `undefined`.
 */
export const unstored = (body: Json): string | undefined => {
  if (body["store"] !== false || !Array.isArray(body["input"])) return undefined
  for (const item of body["input"] as ReadonlyArray<unknown>) {
    if (!isRecord(item) || item["type"] !== "reasoning" || typeof item["id"] !== "string") continue
    if (typeof item["encrypted_content"] === "string") continue
    return `Item with id '${item["id"]}' not found. Items are not persisted when \`store\` is set to false. Try again with \`store\` set to true, or remove this item from your input.`
  }
  return undefined
}

/** `context_management`: a list of `{type: "compaction", compact_threshold?}` entries. */
const validateContextManagement = (value: unknown): Problem | undefined => {
  if (value === undefined || value === null) return undefined
  if (!Array.isArray(value)) {
    return { message: "Invalid type for 'context_management': expected an array.", param: "context_management", code: "invalid_type" }
  }
  for (const [i, entry] of value.entries()) {
    const at = `context_management[${i}]`
    if (!isRecord(entry)) return { message: `Invalid type for '${at}': expected an object.`, param: at, code: "invalid_type" }
    for (const key of Object.keys(entry)) if (key !== "type" && key !== "compact_threshold") return unknown(`${at}.${key}`)
    if (entry["type"] !== "compaction")
      return invalid(`${at}.type`, `Invalid value: '${String(entry["type"])}'. Supported values are: 'compaction'.`)
    const threshold = entry["compact_threshold"]
    if (threshold !== undefined && threshold !== null && (typeof threshold !== "number" || !Number.isInteger(threshold) || threshold < 1)) {
      return invalid(`${at}.compact_threshold`, `Invalid '${at}.compact_threshold': expected a positive integer.`)
    }
  }
  return undefined
}

/** The index of the latest `compaction` item of `input` (0 when none): the prompt starts there. */
export const compactedFrom = (input: ReadonlyArray<unknown>): number => {
  for (let i = input.length - 1; i >= 0; i--) {
    const item = input[i]
    if (isRecord(item) && item["type"] === "compaction") return i
  }
  return 0
}

/** The first problem of a Responses body, or `undefined` when valid. */
export const validate = (body: unknown, endpoint: "responses" | "responses_input_tokens"): Problem | undefined => {
  if (!isRecord(body)) return { message: "We could not parse the JSON body of your request.", param: null, code: null }
  const keys = endpoint === "responses" ? CREATE_KEYS : COUNT_KEYS
  for (const key of Object.keys(body)) if (!keys.has(key)) return unknown(key)
  if (endpoint === "responses" && (typeof body["model"] !== "string" || body["model"].length === 0)) return missing("model")
  const retention = body["prompt_cache_retention"]
  if (retention !== undefined && retention !== null && retention !== "in-memory" && retention !== "24h") {
    return invalid("prompt_cache_retention", `Invalid value: '${String(retention)}'. Supported values are: 'in-memory' and '24h'.`)
  }
  if (body["instructions"] !== undefined && body["instructions"] !== null && typeof body["instructions"] !== "string") {
    return { message: "Invalid type for 'instructions': expected a string.", param: "instructions", code: "invalid_type" }
  }
  const management = endpoint === "responses" ? validateContextManagement(body["context_management"]) : undefined
  if (management !== undefined) return management
  const input = body["input"]
  if (typeof input === "string") return validateTools(body["tools"])
  if (!Array.isArray(input)) return missing("input")
  const model = String(body["model"] ?? "")
  const options = ExplicitCache.optionsProblem(
    model,
    body["prompt_cache_options"],
    ExplicitCache.RESPONSES_OPTION_KEYS,
    ExplicitCache.TTLS.responses,
  )
  if (options !== undefined) return options
  for (const [i, item] of input.entries()) {
    const problem = validateItem(item, i, model)
    if (problem !== undefined) return problem
  }
  return validateTools(body["tools"]) ?? validatePairing((input as ReadonlyArray<Json>).slice(compactedFrom(input)))
}
