/**
 * The OpenAI Chat Completions adapter: automatic prefix caching steered by
 * `prompt_cache_key`; no explicit breakpoints.
 */
import type * as Adapter from "../Adapter.ts"
import * as Normalize from "./Normalize.ts"
import * as Render from "./Render.ts"

/** The OpenAI Chat Completions adapter. */
export const adapter: Adapter.Adapter<"openai"> = {
  format: "openai",
  request: (req, _openCalls, workspace) => Normalize.request(req, workspace),
  history: (history) => Normalize.fromOpenAI(history.messages),
  tools: Normalize.tools,
  render: (input) => {
    const rendered = Render.render(input)
    return { request: rendered.body, cache: { breakpoints: 0, promptCacheKey: rendered.promptCacheKey } }
  },
}
