/**
 * The Anthropic Messages adapter: explicit `cache_control` breakpoints (at
 * most four, 1h before 5m), `count_tokens`, `cache_creation`/`cache_read`
 * usage fields.
 */
import type * as Adapter from "../Adapter.ts"
import * as Normalize from "./Normalize.ts"
import * as Render from "./Render.ts"
import * as Usage from "./Usage.ts"

export * as Normalize from "./Normalize.ts"
export * as Render from "./Render.ts"
export * as Usage from "./Usage.ts"
export * as Validate from "./Validate.ts"
export * as ValidateModel from "./ValidateModel.ts"
export * as Api from "./Api.ts"
export * as Provider from "./Provider.ts"
export * as Opaque from "./Opaque.ts"
export * as CountBody from "./CountBody.ts"
export * as Binding from "./Binding.ts"

/** The Anthropic Messages adapter. */
export const adapter: Adapter.Adapter<"anthropic"> = {
  format: "anthropic",
  provider: "anthropic",
  prices: "anthropic",
  historyField: "messages",
  cacheRules: { breakpoints: true, ttls: ["5m", "1h"], retention: undefined },
  request: (req, _openCalls, workspace) => Normalize.request(req, workspace),
  history: (history) => Normalize.fromAnthropic(history.messages),
  tools: Normalize.tools,
  usage: Usage.reader,
  toolSearch: Render.searchTool,
  midConversationSystem: true,
  render: (input) => {
    const rendered = Render.render({ ...input, ttl: input.cachePlan?.tier === "1h" ? "1h" : "5m" })
    // cache diagnostics are generally available, no beta header:
    // https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics
    const request =
      input.previousResponseId === undefined
        ? rendered.body
        : { ...rendered.body, diagnostics: { previous_message_id: input.previousResponseId } }
    return { request, cache: { breakpoints: rendered.breakpoints, promptCacheKey: null } }
  },
}
