/**
 * The per-part checks of `Validate`: one tool list, one system prompt, one
 * message's content blocks (text, `tool_use`, `tool_result`, thinking and
 * compaction blocks), each judged on its own, and the small readers of raw
 * JSON they and `Validate`'s request-level checks share. Apart from
 * `Validate.ts` so that it holds what spans the request (its keys, roles,
 * pairing, thinking, cache control, the compaction parameters); not in the
 * adapter's index.
 */

/** A JSON object as the validator reads it. */
export type Json = Record<string, unknown>

/** A JSON object (not an array, not null). */
export const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** The beta that server-side compaction needs. */
export const COMPACTION_BETA = "compact-2026-01-12"
/**
 * The beta of on-demand compaction (`compaction: {type: "summarize"}` and the
 * signed block it returns), which also accepts compaction blocks:
 * https://platform.claude.com/docs/en/build-with-claude/compaction-on-demand
 */
export const ON_DEMAND_COMPACTION_BETA = "compact-2026-09-04"
const COMPACTION_KEYS = new Set(["type", "content", "encrypted_content", "signature", "tool_changes", "cache_control"])
/** The refusal of `what` without the compaction beta. */
export const betaRequired = (what: string): string => `${what} requires the beta header \`anthropic-beta: ${COMPACTION_BETA}\``
const CUSTOM_TOOL_KEYS = new Set([
  "type",
  "name",
  "description",
  "input_schema",
  "cache_control",
  "strict",
  "input_examples",
  "defer_loading",
  "allowed_callers",
  "eager_input_streaming",
])
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,128}$/

const textProblem = (text: unknown): string | undefined => {
  if (typeof text !== "string") return "Field required"
  if (text.length === 0) return "text content blocks must be non-empty"
  if (text.trim().length === 0) return "text content blocks must contain non-whitespace text"
  return undefined
}

/** The first problem of the `tools` parameter: keys, names (unique), input schemas. */
export const validateTools = (tools: unknown): string | undefined => {
  if (tools === undefined) return undefined
  if (!Array.isArray(tools)) return "tools: Input should be a valid list"
  const names = new Set<string>()
  for (const [i, tool] of tools.entries()) {
    if (!isRecord(tool)) return `tools.${i}: Input should be a valid dictionary`
    const custom = tool["type"] === undefined || tool["type"] === null || tool["type"] === "custom"
    if (custom) {
      for (const key of Object.keys(tool)) {
        if (!CUSTOM_TOOL_KEYS.has(key)) return `tools.${i}.custom.${key}: Extra inputs are not permitted`
      }
      if (typeof tool["name"] !== "string" || !TOOL_NAME.test(tool["name"])) {
        return `tools.${i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`
      }
      const schema = tool["input_schema"]
      if (!isRecord(schema)) return `tools.${i}.custom.input_schema: Field required`
      if (schema["type"] !== "object") return `tools.${i}.custom.input_schema.type: Input should be 'object'`
    }
    const name = tool["name"]
    if (typeof name === "string") {
      if (names.has(name)) return "tools: Tool names must be unique."
      names.add(name)
    }
  }
  return undefined
}

/** The first problem of the `system` parameter: a string or a list of non-empty text blocks. */
export const validateSystem = (system: unknown): string | undefined => {
  if (system === undefined || typeof system === "string") return undefined
  if (!Array.isArray(system)) return "system: Input should be a valid string or list"
  for (const [i, block] of system.entries()) {
    if (!isRecord(block) || block["type"] !== "text") return `system.${i}.type: Input should be 'text'`
    const problem = textProblem(block["text"])
    if (problem !== undefined) return problem === "Field required" ? `system.${i}.text: ${problem}` : `system: ${problem}`
  }
  return undefined
}

/** The blocks of a content value (none when it is a string or missing). */
export const blocksOf = (content: unknown): ReadonlyArray<unknown> => (Array.isArray(content) ? content : [])
/** A block's `type`, when it is an object. */
export const typeOf = (block: unknown): unknown => (isRecord(block) ? block["type"] : undefined)

/** Absent, null or a string. */
export const nullableString = (value: unknown): boolean => value === undefined || value === null || typeof value === "string"

const compactionProblem = (block: Json, path: string, role: unknown, compaction: boolean): string | undefined => {
  if (!compaction) return betaRequired(`${path}: the compaction block`)
  if (role !== "assistant") return `${path}: compaction blocks can only be in assistant messages`
  for (const key of Object.keys(block)) if (!COMPACTION_KEYS.has(key)) return `${path}.compaction.${key}: Extra inputs are not permitted`
  const content = block["content"]
  if (!nullableString(content)) return `${path}.compaction.content: Input should be a valid string`
  if (content === "") return `${path}.compaction.content: compaction content must be non-empty (send null for a failed compaction)`
  if (!nullableString(block["encrypted_content"])) return `${path}.compaction.encrypted_content: Input should be a valid string`
  if (!nullableString(block["signature"])) return `${path}.compaction.signature: Input should be a valid string`
  const changes = block["tool_changes"]
  if (changes !== undefined && changes !== null && !Array.isArray(changes))
    return `${path}.compaction.tool_changes: Input should be a valid list`
  return undefined
}

/**
 * The first problem of the messages' content, block by block: non-empty
 * content, each block's fields, which role it may stand in, unique
 * `tool_use` ids, and tool blocks only in a request that defines tools.
 */
export const validateBlocks = (messages: ReadonlyArray<Json>, hasTools: boolean, compaction: boolean): string | undefined => {
  const seenIds = new Set<string>()
  for (const [m, message] of messages.entries()) {
    const role = message["role"]
    const content = message["content"]
    const isFinal = m === messages.length - 1
    if (typeof content === "string") {
      if (content.length === 0 && !(isFinal && role === "assistant")) {
        return `messages.${m}: all messages must have non-empty content except for the optional final assistant message`
      }
      if (content.length > 0 && content.trim().length === 0) return "messages: text content blocks must contain non-whitespace text"
      continue
    }
    if (!Array.isArray(content)) return `messages.${m}.content: Input should be a valid string or list`
    if (content.length === 0 && !(isFinal && role === "assistant")) {
      return `messages.${m}: all messages must have non-empty content except for the optional final assistant message`
    }
    for (const [k, block] of content.entries()) {
      const path = `messages.${m}.content.${k}`
      if (!isRecord(block) || typeof block["type"] !== "string") return `${path}.type: Field required`
      switch (block["type"]) {
        case "text": {
          const problem = textProblem(block["text"])
          if (problem !== undefined) return problem === "Field required" ? `${path}.text: ${problem}` : `messages: ${problem}`
          break
        }
        case "tool_use": {
          if (role !== "assistant") return `${path}: tool_use blocks can only be in assistant messages`
          if (!hasTools) return "Requests which include `tool_use` or `tool_result` blocks must define tools."
          const id = block["id"]
          if (typeof id !== "string" || id.length === 0) return `${path}.id: Field required`
          if (typeof block["name"] !== "string") return `${path}.name: Field required`
          if (!isRecord(block["input"])) return `${path}.input: Input should be a valid dictionary`
          if (seenIds.has(id)) return `${path}: \`tool_use\` ids must be unique`
          seenIds.add(id)
          break
        }
        case "compaction": {
          const problem = compactionProblem(block, path, role, compaction)
          if (problem !== undefined) return problem
          break
        }
        case "thinking":
        case "redacted_thinking": {
          const type = block["type"]
          if (role !== "assistant") return `${path}: ${type} blocks can only be in assistant messages`
          if (type === "thinking") {
            if (typeof block["thinking"] !== "string") return `${path}.thinking.thinking: Field required`
            if (typeof block["signature"] !== "string") return `${path}.thinking.signature: Field required`
          } else if (typeof block["data"] !== "string") return `${path}.redacted_thinking.data: Field required`
          break
        }
        case "tool_result": {
          if (role !== "user") return `${path}: tool_result blocks can only be in user messages`
          if (!hasTools) return "Requests which include `tool_use` or `tool_result` blocks must define tools."
          if (typeof block["tool_use_id"] !== "string") return `${path}.tool_use_id: Field required`
          for (const [j, inner] of blocksOf(block["content"]).entries()) {
            if (typeOf(inner) !== "text") continue
            const problem = textProblem((inner as Json)["text"])
            if (problem !== undefined)
              return problem === "Field required" ? `${path}.content.${j}.text: ${problem}` : `messages: ${problem}`
          }
          break
        }
      }
    }
  }
  return undefined
}
