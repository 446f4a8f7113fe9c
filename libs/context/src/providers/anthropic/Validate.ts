/**
 * Request validation of the Anthropic Messages API, for the rules ctxd must
 * never break: the fake provider's validator for this API (pure, so it
 * lives with the adapter). Messages follow the real API's error texts (from its 400
 * responses as reported in public issue trackers).
 *
 * Deliberately stricter than the live API in two places: roles must strictly
 * alternate (the API merges consecutive same-role turns) and a final
 * assistant message with unanswered `tool_use` blocks is rejected.
 *
 * Server-side compaction (beta `compact-2026-01-12`, given in the
 * `anthropic-beta` header): `compaction` blocks (assistant messages only;
 * `content` a non-empty string or null, `encrypted_content` / `signature`
 * strings or null, `tool_changes` a list), the `compact_20260112` edit of
 * `context_management` and the top-level `compaction` parameter (not both)
 * are accepted only with it (or with on-demand compaction's
 * `compact-2026-09-04`). The conversation may then open with an
 * assistant message whose first block is a compaction block.
 *
 * Thinking: `thinking` blocks need their `thinking` and `signature`,
 * `redacted_thinking` blocks their `data`, and both go only in assistant
 * messages (the API's text for that last rule is not public: it is modeled
 * on the `tool_use` one). With `thinking` enabled in the body, a tool-use
 * continuation (the last message a user message with `tool_result`s) must
 * have its final assistant message start with a thinking block; with it
 * disabled, an assistant message in the final position may not carry
 * thinking. Signatures are not verified (they are opaque to ctxd, which
 * passes them through unmodified).
 *
 * The checks of one part at a time (the tools, the system prompt, each
 * content block) are in `ValidateParts`; here, the request and what spans it.
 */
import {
  betaRequired,
  blocksOf,
  COMPACTION_BETA,
  isRecord,
  ON_DEMAND_COMPACTION_BETA,
  type Json,
  nullableString,
  typeOf,
  validateBlocks,
  validateSystem,
  validateTools,
} from "./ValidateParts.ts"

export { COMPACTION_BETA, ON_DEMAND_COMPACTION_BETA } from "./ValidateParts.ts"

const CREATE_KEYS = new Set([
  "model",
  "messages",
  "max_tokens",
  "system",
  "tools",
  "tool_choice",
  "stream",
  "metadata",
  "stop_sequences",
  "temperature",
  "top_p",
  "top_k",
  "thinking",
  "service_tier",
  "container",
  "mcp_servers",
  "context_management",
  "output_config",
  "output_format",
  "inference_geo",
  "speed",
  "cache_control",
  "diagnostics",
  "user_profile_id",
  "workspace_id",
  "compaction",
])
const COUNT_KEYS = new Set([
  "model",
  "messages",
  "system",
  "tools",
  "tool_choice",
  "thinking",
  "mcp_servers",
  "context_management",
  "output_config",
  "output_format",
  "speed",
  "cache_control",
  "user_profile_id",
  "workspace_id",
  "compaction",
])
const COMPACT_EDIT_KEYS = new Set(["type", "trigger", "pause_after_compaction", "instructions"])
const MAX_BREAKPOINTS = 4

const validatePairing = (messages: ReadonlyArray<Json>): string | undefined => {
  for (const [m, message] of messages.entries()) {
    const blocks = blocksOf(message["content"])
    if (message["role"] === "user") {
      const prev = m > 0 ? messages[m - 1] : undefined
      const offered = new Set(
        prev?.["role"] === "assistant"
          ? blocksOf(prev["content"]).flatMap((b) => (typeOf(b) === "tool_use" ? [(b as Json)["id"]] : []))
          : [],
      )
      for (const [k, block] of blocks.entries()) {
        if (typeOf(block) !== "tool_result") continue
        const id = (block as Json)["tool_use_id"]
        if (!offered.has(id)) {
          return `messages.${m}.content.${k}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${String(id)}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`
        }
      }
    } else if (message["role"] === "assistant") {
      const ids = blocks.flatMap((b) => (typeOf(b) === "tool_use" ? [String((b as Json)["id"])] : []))
      if (ids.length === 0) continue
      const next = messages[m + 1]
      const answered = new Set<unknown>()
      if (next?.["role"] === "user") {
        for (const block of blocksOf(next["content"])) {
          if (typeOf(block) !== "tool_result") break
          answered.add((block as Json)["tool_use_id"])
        }
      }
      const missing = ids.filter((id) => !answered.has(id))
      if (missing.length > 0) {
        return `messages.${m}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(", ")}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`
      }
    }
  }
  return undefined
}

const THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
const isThinking = (block: unknown): boolean => typeOf(block) === "thinking" || typeOf(block) === "redacted_thinking"

/** The `thinking` parameter and where thinking blocks may stand under it. */
const validateThinking = (body: Json, messages: ReadonlyArray<Json>): string | undefined => {
  const thinking = body["thinking"]
  const enabled = isRecord(thinking) && (thinking["type"] === "enabled" || thinking["type"] === "adaptive")
  if (isRecord(thinking) && thinking["type"] === "enabled") {
    const budget = thinking["budget_tokens"]
    if (typeof budget !== "number" || !Number.isInteger(budget)) return "thinking.enabled.budget_tokens: Field required"
    if (budget < 1024) return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    const max = body["max_tokens"]
    if (typeof max === "number" && max <= budget)
      return (
        "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at " +
        THINKING_DOCS +
        "#max-tokens-and-context-window-size"
      )
  }
  const m = messages.length - 1
  const last = messages[m]!
  if (!enabled) {
    if (last["role"] !== "assistant") return undefined
    const k = blocksOf(last["content"]).findIndex(isThinking)
    return k === -1
      ? undefined
      : `messages.${m}.content.${k}: When thinking is disabled, an \`assistant\` message in the final position cannot contain \`thinking\`. To use thinking blocks, enable \`thinking\` in your request.`
  }
  // a tool-use continuation: the assistant message whose tool_use the last message answers
  if (last["role"] !== "user" || !blocksOf(last["content"]).some((b) => typeOf(b) === "tool_result") || m < 1) return undefined
  const first = blocksOf(messages[m - 1]!["content"])[0]
  if (isThinking(first)) return undefined
  const found = typeof messages[m - 1]!["content"] === "string" ? "text" : String(typeOf(first))
  return `messages.${m - 1}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${found}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block (preceeding the lastmost set of \`tool_use\` and \`tool_result\` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable \`thinking\`. Please consult our documentation at ${THINKING_DOCS}`
}

/** Every `cache_control` in processing order (tools, system, messages, then the top-level one). */
export const cacheControls = (body: Json): Array<{ readonly path: string; readonly value: unknown }> => {
  const out: Array<{ path: string; value: unknown }> = []
  const visit = (path: string, block: unknown) => {
    if (isRecord(block) && block["cache_control"] !== undefined && block["cache_control"] !== null) {
      out.push({ path, value: block["cache_control"] })
    }
  }
  blocksOf(body["tools"]).forEach((t, i) => visit(`tools.${i}`, t))
  blocksOf(body["system"]).forEach((b, i) => visit(`system.${i}`, b))
  blocksOf(body["messages"]).forEach((message, m) => {
    blocksOf(isRecord(message) ? message["content"] : undefined).forEach((block, k) => {
      visit(`messages.${m}.content.${k}`, block)
      if (typeOf(block) === "tool_result") {
        blocksOf((block as Json)["content"]).forEach((inner, j) => visit(`messages.${m}.content.${k}.content.${j}`, inner))
      }
    })
  })
  visit("", body)
  return out
}

const validateCacheControl = (body: Json): string | undefined => {
  const controls = cacheControls(body)
  let seen5m = false
  for (const { path, value } of controls) {
    const at = path === "" ? "cache_control" : `${path}.cache_control`
    if (!isRecord(value) || value["type"] !== "ephemeral") return `${at}.type: Input should be 'ephemeral'`
    const ttl = value["ttl"] ?? "5m"
    if (ttl !== "5m" && ttl !== "1h") return `${at}.ttl: Input should be '5m' or '1h'`
    if (ttl === "1h" && seen5m) {
      return `${at}.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block. Note that blocks are processed in the following order: \`tools\`, \`system\`, \`messages\`.`
    }
    if (ttl === "5m") seen5m = true
  }
  if (controls.length > MAX_BREAKPOINTS) {
    return `A maximum of ${MAX_BREAKPOINTS} blocks with cache_control may be provided. Found ${controls.length}.`
  }
  return undefined
}

/** `context_management` edits of type `compact_20260112`, and the top-level `compaction` parameter. */
const validateCompactionConfig = (body: Json, compaction: boolean): string | undefined => {
  const management = body["context_management"]
  const edits = isRecord(management) ? blocksOf(management["edits"]) : []
  for (const [i, edit] of edits.entries()) {
    if (typeOf(edit) !== "compact_20260112") continue
    const path = `context_management.edits.${i}`
    if (!compaction) return betaRequired(`${path}: compact_20260112`)
    for (const key of Object.keys(edit as Json)) if (!COMPACT_EDIT_KEYS.has(key)) return `${path}.${key}: Extra inputs are not permitted`
    const e = edit as Json
    if (e["pause_after_compaction"] !== undefined && typeof e["pause_after_compaction"] !== "boolean") {
      return `${path}.pause_after_compaction: Input should be a valid boolean`
    }
    if (!nullableString(e["instructions"])) return `${path}.instructions: Input should be a valid string`
    const trigger = e["trigger"]
    if (trigger !== undefined && trigger !== null) {
      if (!isRecord(trigger) || trigger["type"] !== "input_tokens") return `${path}.trigger.type: Input should be 'input_tokens'`
      if (typeof trigger["value"] !== "number" || !Number.isInteger(trigger["value"]))
        return `${path}.trigger.value: Input should be a valid integer`
    }
  }
  const top = body["compaction"]
  if (top === undefined || top === null) return undefined
  if (!compaction) return betaRequired("compaction")
  if (management !== undefined && management !== null) return "compaction: cannot be combined with `context_management`"
  if (!isRecord(top) || top["type"] !== "summarize") return "compaction.type: Input should be 'summarize'"
  if (!nullableString(top["instructions"])) return "compaction.instructions: Input should be a valid string"
  return undefined
}

/** True when the message opens with a compaction block (it may then open the conversation). */
const opensWithCompaction = (message: Json): boolean => typeOf(blocksOf(message["content"])[0]) === "compaction"

/**
 * The first problem of a `/v1/messages` (or `/count_tokens`) body, or
 * `undefined` when valid; `betas`: the `anthropic-beta` header's values.
 */
export const validate = (body: unknown, endpoint: "messages" | "count_tokens", betas: ReadonlyArray<string> = []): string | undefined => {
  const compaction = betas.includes(COMPACTION_BETA) || betas.includes(ON_DEMAND_COMPACTION_BETA)
  if (!isRecord(body)) return "Input should be a valid dictionary"
  const allowed = endpoint === "messages" ? CREATE_KEYS : COUNT_KEYS
  for (const key of Object.keys(body)) if (!allowed.has(key)) return `${key}: Extra inputs are not permitted`
  if (typeof body["model"] !== "string" || body["model"].length === 0) return "model: Field required"
  if (endpoint === "messages") {
    const max = body["max_tokens"]
    if (max === undefined || max === null) return "max_tokens: Field required"
    if (typeof max !== "number" || !Number.isInteger(max)) return "max_tokens: Input should be a valid integer"
    if (max < 1) return "max_tokens: Input should be greater than or equal to 1"
  }
  const problem = validateTools(body["tools"]) ?? validateSystem(body["system"]) ?? validateCompactionConfig(body, compaction)
  if (problem !== undefined) return problem

  const raw = body["messages"]
  if (raw === undefined) return "messages: Field required"
  if (!Array.isArray(raw)) return "messages: Input should be a valid list"
  if (raw.length === 0) return "messages: at least one message is required"
  for (const [m, message] of raw.entries()) {
    if (!isRecord(message)) return `messages.${m}: Input should be a valid dictionary`
    for (const key of Object.keys(message)) {
      if (key !== "role" && key !== "content") return `messages.${m}.${key}: Extra inputs are not permitted`
    }
    if (message["role"] !== "user" && message["role"] !== "assistant") return `messages.${m}.role: Input should be 'user' or 'assistant'`
    if (message["content"] === undefined) return `messages.${m}.content: Field required`
  }
  const messages = raw as ReadonlyArray<Json>
  if (messages[0]!["role"] !== "user") {
    if (!opensWithCompaction(messages[0]!)) return 'messages: first message must use the "user" role'
    if (!compaction) return betaRequired("messages.0.content.0: the compaction block")
  }
  for (let m = 1; m < messages.length; m++) {
    const role = messages[m]!["role"]
    if (role === messages[m - 1]!["role"]) {
      return `messages: roles must alternate between "user" and "assistant", but found multiple "${String(role)}" roles in a row`
    }
  }
  const hasTools = Array.isArray(body["tools"]) && body["tools"].length > 0
  const blockProblem = validateBlocks(messages, hasTools, compaction) ?? validatePairing(messages) ?? validateThinking(body, messages)
  if (blockProblem !== undefined) return blockProblem

  const last = messages[messages.length - 1]!
  if (last["role"] === "assistant") {
    const content = last["content"]
    const tail = typeof content === "string" ? content : blocksOf(content).at(-1)
    const text = typeof tail === "string" ? tail : typeOf(tail) === "text" ? (tail as Json)["text"] : undefined
    if (typeof text === "string" && text.length > 0 && /\s$/.test(text)) {
      return "final assistant content cannot end with trailing whitespace"
    }
  }
  return validateCacheControl(body)
}
