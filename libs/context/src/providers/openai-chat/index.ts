/**
 * The OpenAI Chat Completions adapter: automatic prefix caching steered by
 * `prompt_cache_key`; explicit `prompt_cache_breakpoint`s on the models that
 * take them (`ExplicitCache`).
 */
import type * as Adapter from "../Adapter.ts"
import * as ExplicitCache from "./ExplicitCache.ts"
import * as Normalize from "./Normalize.ts"
import * as Render from "./Render.ts"
import * as Usage from "./Usage.ts"

export * as Normalize from "./Normalize.ts"
export * as Render from "./Render.ts"
export * as Usage from "./Usage.ts"
export * as Validate from "./Validate.ts"
export * as Api from "./Api.ts"
export * as Provider from "./Provider.ts"
export * as Opaque from "./Opaque.ts"
export * as ExplicitCache from "./ExplicitCache.ts"

/** The OpenAI Chat Completions adapter. */
export const adapter: Adapter.Adapter<"openai"> = {
  format: "openai",
  provider: "openai",
  prices: "openai",
  historyField: "messages",
  cacheRules: { breakpoints: false, ttls: [], retention: undefined, explicitTtls: ExplicitCache.TTLS.chat },
  request: (req, _openCalls, workspace) => Normalize.request(req, workspace),
  history: (history) => Normalize.fromOpenAI(history.messages),
  tools: Normalize.tools,
  usage: Usage.reader,
  render: (input) => {
    const rendered = Render.render({ ...input, cacheTier: input.cachePlan?.tier })
    return { request: rendered.body, cache: { breakpoints: rendered.breakpoints, promptCacheKey: rendered.promptCacheKey } }
  },
}
