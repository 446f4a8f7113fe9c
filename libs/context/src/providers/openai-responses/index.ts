/**
 * The OpenAI Responses adapter: automatic prefix caching steered by
 * `prompt_cache_key`, the 24-hour retention when the cache planner chose it;
 * explicit `prompt_cache_breakpoint`s on the models that take them.
 */
import type * as Adapter from "../Adapter.ts"
import * as ExplicitCache from "../openai-chat/ExplicitCache.ts"
import * as Normalize from "./Normalize.ts"
import * as Render from "./Render.ts"
import * as Usage from "./Usage.ts"

export * as Normalize from "./Normalize.ts"
export * as Render from "./Render.ts"
export * as Usage from "./Usage.ts"
export * as Validate from "./Validate.ts"
export * as ValidateModel from "./ValidateModel.ts"
export * as Opaque from "./Opaque.ts"
export * as CountBody from "./CountBody.ts"

/** The OpenAI Responses adapter. */
export const adapter: Adapter.Adapter<"openai-responses"> = {
  format: "openai-responses",
  provider: "openai",
  prices: "openai",
  historyField: "input",
  cacheRules: { breakpoints: false, ttls: [], retention: "24h", explicitTtls: ExplicitCache.TTLS.responses },
  request: (req, _openCalls, workspace) => Normalize.request(req, workspace),
  history: (history) => Normalize.fromResponses(history.input),
  tools: Normalize.tools,
  usage: Usage.reader,
  toolSearch: Render.searchTool,
  render: (input) => {
    const rendered = Render.render({
      ...input,
      retention24h: input.cachePlan === undefined ? undefined : input.cachePlan.tier === "24h",
      cacheTier: input.cachePlan?.tier,
      previousResponseId: input.previousResponseId ?? undefined,
    })
    return { request: rendered.body, cache: { breakpoints: rendered.breakpoints, promptCacheKey: rendered.promptCacheKey } }
  },
}
