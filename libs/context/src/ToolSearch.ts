/**
 * On-demand toolsets through the provider's own tool search, for models
 * whose row has `toolSearch` and formats whose adapter can send it
 * (`Adapter.toolSearch`). Instead of `load_toolset` rewriting `tools` (the
 * earliest part of the cached prefix) each time a toolset is loaded, every
 * tool goes out from the first request on: the ones `Toolsets.selectTools`
 * would send before any load as they are, all the others marked deferred,
 * plus the provider's search tool. The model finds a deferred tool by
 * searching; the provider then appends its definition inline in the
 * conversation, so the tool list — and the prefix — stays the same bytes for
 * the whole session.
 *
 * Deferred tools are not part of the prompt prefix and are not billed until
 * a search returns them: "Deferred tools are not included in the
 * system-prompt prefix. When the model discovers a deferred tool through tool
 * search, the definition is appended inline as a tool_reference block in the
 * conversation history. The prefix is untouched, so prompt caching is
 * preserved."
 * (https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-use-with-prompt-caching).
 * So they are left out of the token count and of waste detection.
 */
import type { Conversation } from "@ctxd/contracts"
import * as Toolsets from "./Toolsets.ts"

/** `extra` key of a tool sent with the provider's `defer_loading: true`. */
export const DEFER = "deferLoading"

/** `extra` key of the provider's search tool (its value: the search tool's API `type`). */
export const SEARCH = "toolSearch"

/** True for a tool ctxd sends deferred. */
export const isDeferred = (tool: Conversation.Tool): boolean => tool.extra?.[DEFER] === true

/** True for the provider's search tool as {@link select} adds it. */
export const isSearchTool = (tool: Conversation.Tool): boolean => typeof tool.extra?.[SEARCH] === "string"

/** The tools that are part of the prompt (not deferred). */
export const loaded = (tools: ReadonlyArray<Conversation.Tool>): ReadonlyArray<Conversation.Tool> =>
  tools.some(isDeferred) ? tools.filter((t) => !isDeferred(t)) : tools

const byName = (a: Conversation.Tool, b: Conversation.Tool): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)

/**
 * The tools to send on a tool-search model, in a stable order: what
 * {@link Toolsets.selectTools} sends before any load (without
 * `load_toolset`), then `search`, then every other tool of `tools`
 * (including the write tools of the default toolsets when they are not sent
 * by default) deferred, sorted by name. Without any toolset in `tools`:
 * {@link Toolsets.selectTools}'s list unchanged; with nothing left to
 * defer, that list without `load_toolset` and no search tool.
 */
export const select = (
  tools: ReadonlyArray<Conversation.Tool>,
  config: Toolsets.Config,
  search: Conversation.Tool,
  virtual: ReadonlyArray<Conversation.Tool> = [],
): Array<Conversation.Tool> => {
  const eager = Toolsets.selectTools(tools, Toolsets.empty, config, virtual)
  if (!Toolsets.inUse(tools)) return eager
  const sent = new Set(eager.map((t) => t.name))
  const deferred: Array<Conversation.Tool> = []
  for (const t of tools) {
    if (sent.has(t.name)) continue
    sent.add(t.name)
    deferred.push({ ...t, extra: { ...t.extra, [DEFER]: true } })
  }
  const rest = eager.filter((t) => t.name !== Toolsets.LOAD_TOOLSET)
  return deferred.length === 0 ? rest : [...rest, search, ...deferred.sort(byName)]
}
