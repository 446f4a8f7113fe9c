/**
 * The Gemini `generateContent` adapter: implicit prefix caching (no
 * breakpoints, no key); function responses without id matched to open calls.
 */
import type * as Adapter from "../Adapter.ts"
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
export * as CountBody from "./CountBody.ts"

/** The Gemini adapter. */
export const adapter: Adapter.Adapter<"gemini"> = {
  format: "gemini",
  provider: "google",
  prices: "gemini",
  historyField: "contents",
  cacheRules: { breakpoints: false, ttls: [], retention: undefined },
  request: (req, openCalls, workspace) => Normalize.request(req, openCalls, workspace),
  history: (history) => Normalize.fromGemini(history.contents),
  tools: Normalize.tools,
  usage: Usage.reader,
  render: (input) => ({ request: Render.render(input).body, cache: { breakpoints: 0, promptCacheKey: null } }),
}
