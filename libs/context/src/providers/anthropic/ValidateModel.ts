/**
 * The checks of a Messages request that depend on the model (its row's
 * `toolSearch` and `midConversationSystem`): the fake provider runs them
 * before `Validate.validate`, on the body with its mid-conversation system
 * messages taken out (that validator knows only `user` and `assistant`).
 *
 * Tool search (https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool):
 * a `tool_search_tool_regex_20251119` / `tool_search_tool_bm25_20251119`
 * tool only on the models the page lists; at least one tool not deferred
 * (the page's 400 "All tools have defer_loading set. At least one tool must
 * be non-deferred."); at most 10,000 tools in the catalog; a
 * `tool_reference` must name a tool of `tools` (the page's "Tool reference
 * '<name>' has no corresponding tool definition"). Stricter than the API:
 * `defer_loading` is refused without the search tool, since the page also
 * allows a client-side search whose own tool returns `tool_reference`
 * blocks, which ctxd never sends.
 *
 * Mid-conversation system messages
 * (https://platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages):
 * `role: "system"` only on models that take them, each immediately after a
 * user turn; content a string or text blocks. The API's wording of these
 * refusals is not public: modeled on the texts reported by client libraries
 * ("role 'system' is not supported on this model").
 */
import type { Capabilities } from "../../ModelRow.ts"
import { blocksOf, isRecord, type Json, typeOf } from "./ValidateParts.ts"

/** The search tool types, with and without their version suffix (the SDK's `ToolSearchTool*` types). */
const SEARCH_TYPES = new Set([
  "tool_search_tool_regex_20251119",
  "tool_search_tool_regex",
  "tool_search_tool_bm25_20251119",
  "tool_search_tool_bm25",
])
/** The catalog limit of the tool search page. */
export const MAX_TOOLS = 10_000

/** True for a tool search tool definition. */
export const isSearchTool = (tool: unknown): boolean => SEARCH_TYPES.has(String(typeOf(tool)))

/** The model capabilities the checks read. */
export type ModelCapabilities = Pick<Capabilities, "toolSearch" | "midConversationSystem">

const toolProblem = (body: Json, model: string, caps: ModelCapabilities): string | undefined => {
  const tools = blocksOf(body["tools"])
  const search = tools.findIndex(isSearchTool)
  if (search !== -1 && !caps.toolSearch) return `tools.${search}: '${String(typeOf(tools[search]))}' is not supported on ${model}`
  if (tools.length > MAX_TOOLS) return `tools: at most ${MAX_TOOLS} tools may be provided, found ${tools.length}`
  const deferred = tools.filter((t) => isRecord(t) && t["defer_loading"] === true)
  if (deferred.length === 0) return undefined
  if (deferred.length === tools.length) return "All tools have defer_loading set. At least one tool must be non-deferred."
  if (search === -1) return "tools: `defer_loading` requires a tool search tool (tool_search_tool_regex or tool_search_tool_bm25)"
  const names = new Set(tools.flatMap((t) => (isRecord(t) && typeof t["name"] === "string" ? [t["name"]] : [])))
  for (const message of blocksOf(body["messages"])) {
    for (const block of blocksOf(isRecord(message) ? message["content"] : undefined)) {
      if (typeOf(block) !== "tool_search_tool_result") continue
      const content = (block as Json)["content"]
      for (const ref of blocksOf(isRecord(content) ? content["tool_references"] : undefined)) {
        const name = isRecord(ref) ? ref["tool_name"] : undefined
        if (typeof name !== "string" || !names.has(name)) return `Tool reference '${String(name)}' has no corresponding tool definition`
      }
    }
  }
  return undefined
}

const systemProblem = (messages: ReadonlyArray<unknown>, caps: ModelCapabilities): string | undefined => {
  for (const [m, message] of messages.entries()) {
    if (!isRecord(message) || message["role"] !== "system") continue
    if (!caps.midConversationSystem) return `messages.${m}.role: role 'system' is not supported on this model`
    const before = messages[m - 1]
    if (!isRecord(before) || before["role"] !== "user") {
      return `messages.${m}: a \`system\` message must immediately follow a \`user\` message`
    }
    const content = message["content"]
    if (typeof content === "string") {
      if (content.trim() === "") return `messages.${m}.content: system messages must contain non-whitespace text`
      continue
    }
    if (!Array.isArray(content) || content.length === 0) return `messages.${m}.content: Input should be a non-empty string or list`
    const k = content.findIndex((b) => typeOf(b) !== "text")
    if (k !== -1) return `messages.${m}.content.${k}.type: Input should be 'text'`
  }
  return undefined
}

/**
 * The model-dependent problem of a Messages body, or the body without its
 * system messages for `Validate.validate` (which checks the rest).
 */
export const check = (
  body: unknown,
  caps: ModelCapabilities,
): { readonly problem: string } | { readonly problem: undefined; readonly body: unknown } => {
  if (!isRecord(body)) return { problem: undefined, body }
  const messages = blocksOf(body["messages"])
  const problem = toolProblem(body, String(body["model"]), caps) ?? systemProblem(messages, caps)
  if (problem !== undefined) return { problem }
  if (!messages.some((m) => isRecord(m) && m["role"] === "system")) return { problem: undefined, body }
  return { problem: undefined, body: { ...body, messages: messages.filter((m) => !isRecord(m) || m["role"] !== "system") } }
}
