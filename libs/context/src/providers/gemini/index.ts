/**
 * The Gemini `generateContent` adapter: implicit prefix caching (no
 * breakpoints, no key); function responses without id matched to open calls.
 */
import type * as Adapter from "../Adapter.ts"
import * as Normalize from "./Normalize.ts"
import * as Render from "./Render.ts"

/** The Gemini adapter. */
export const adapter: Adapter.Adapter<"gemini"> = {
  format: "gemini",
  request: (req, openCalls, workspace) => Normalize.request(req, openCalls, workspace),
  history: (history) => Normalize.fromGemini(history.contents),
  tools: Normalize.tools,
  render: (input) => ({ request: Render.render(input).body, cache: { breakpoints: 0, promptCacheKey: null } }),
}
