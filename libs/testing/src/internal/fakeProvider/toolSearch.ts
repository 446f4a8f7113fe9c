/**
 * Anthropic's tool search, as the fake model runs it: a scripted query
 * (`ScriptedReply.toolSearch`) becomes the `server_tool_use` block of the
 * request's search tool and its `tool_search_tool_result` naming the
 * deferred tools that match, at most 5 (the page: a search "returns 3-5 of
 * the most relevant tools";
 * https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool).
 * The regex variant matches the query as a case-insensitive pattern, the
 * BM25 one ranks by the query's words found in a tool's name and
 * description. A referenced tool's definition is billed where the reference
 * stands, not in the prefix.
 */
import { isRecord, type Json, stableJson, stripCacheControl } from "./json.ts"
import * as Tokens from "./tokens.ts"

const list = (u: unknown): ReadonlyArray<unknown> => (Array.isArray(u) ? u : [])
const MAX_RESULTS = 5

const searchToolOf = (body: Json): Json | undefined =>
  list(body["tools"])
    .filter(isRecord)
    .find((t) => typeof t["type"] === "string" && t["type"].startsWith("tool_search_tool_"))

const deferredTools = (body: Json): Array<Json> =>
  list(body["tools"])
    .filter(isRecord)
    .filter((t) => t["defer_loading"] === true)

const haystack = (tool: Json): string => `${String(tool["name"])} ${String(tool["description"] ?? "")}`.toLowerCase()

const matches = (search: Json, query: string, tools: ReadonlyArray<Json>): Array<Json> => {
  if (String(search["type"]).startsWith("tool_search_tool_regex")) {
    let pattern: RegExp
    try {
      pattern = new RegExp(query, "i")
    } catch {
      return []
    }
    return tools.filter((t) => pattern.test(haystack(t))).slice(0, MAX_RESULTS)
  }
  return ranked(query, tools)
}

/** The tools with a word of `query` in their name or description, most such words first (ties by name), at most 5. */
export const ranked = (query: string, tools: ReadonlyArray<Json>): Array<Json> => {
  const words = query
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 1)
  return tools
    .map((t) => ({ t, score: words.filter((w) => haystack(t).includes(w)).length }))
    .filter((s) => s.score > 0)
    .sort((a, b) => b.score - a.score || (String(a.t["name"]) < String(b.t["name"]) ? -1 : 1))
    .slice(0, MAX_RESULTS)
    .map((s) => s.t)
}

/** The blocks a search for `query` opens the reply with (none without a search tool in `body`). */
export const searchBlocks = (body: Json, query: string, nextId: () => string): Array<Json> => {
  const search = searchToolOf(body)
  if (search === undefined) return []
  const id = `srvtoolu_${nextId()}`
  const found = matches(search, query, deferredTools(body))
  return [
    { type: "server_tool_use", id, name: search["name"], input: { query } },
    {
      type: "tool_search_tool_result",
      tool_use_id: id,
      content: {
        type: "tool_search_tool_search_result",
        tool_references: found.map((t) => ({ type: "tool_reference", tool_name: t["name"] })),
      },
    },
  ]
}

/** The tokens of one tool definition, as the prompt counts a tool. */
export const toolTokens = (tool: unknown): number => Tokens.TOOL_OVERHEAD + Tokens.count(stableJson(stripCacheControl(tool)))

/** The tokens of the definitions a `tool_search_tool_result` block loads (0 for any other block). */
export const loadedTokens = (block: unknown, definitions: ReadonlyMap<string, unknown>): number => {
  if (!isRecord(block) || block["type"] !== "tool_search_tool_result") return 0
  const content = block["content"]
  const refs = list(isRecord(content) ? content["tool_references"] : undefined)
  return refs.reduce<number>((n, ref) => {
    const tool = isRecord(ref) ? definitions.get(String(ref["tool_name"])) : undefined
    return n + (tool === undefined ? 0 : toolTokens(tool))
  }, 0)
}
