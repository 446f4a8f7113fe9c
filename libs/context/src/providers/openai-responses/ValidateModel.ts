/**
 * The checks of a Responses request that depend on the model, for the fake
 * provider (before `Validate.validate`): tool search. "Only gpt-5.4 and
 * later models support tool_search", activated by a `tool_search` tool and
 * `defer_loading: true` on the deferred functions
 * (https://developers.openai.com/api/docs/guides/tools-tool-search). The
 * API's wording of these refusals is not public: modeled on its other
 * `invalid_request_error`s. Stricter than documented: `defer_loading`
 * without a `tool_search` tool is refused (the guide names both as needed).
 */
import type { Problem } from "./Validate.ts"

type Json = Record<string, unknown>
const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** gpt-5.4 and later (gpt-5.4 … gpt-5.99, gpt-6 and up), with any suffix. */
const SEARCH_MODELS = /^gpt-(5\.([4-9]|[1-9]\d)|([6-9]|[1-9]\d)(\.\d+)?)(?!\d)/

/** True when `model` takes the `tool_search` tool. */
export const takesToolSearch = (model: string): boolean => SEARCH_MODELS.test(model.toLowerCase().replace(/^openai\//, ""))

/** The model-dependent problem of a Responses body, or `undefined`. */
export const check = (body: unknown): Problem | undefined => {
  if (!isRecord(body) || !Array.isArray(body["tools"])) return undefined
  const tools = body["tools"] as ReadonlyArray<unknown>
  const model = String(body["model"])
  const search = tools.findIndex((t) => isRecord(t) && t["type"] === "tool_search")
  if (search !== -1 && !takesToolSearch(model)) {
    return {
      message: `Tool 'tool_search' is not supported with model '${model}'.`,
      param: `tools[${search}].type`,
      code: "unsupported_value",
    }
  }
  const deferred = tools.findIndex((t) => isRecord(t) && t["defer_loading"] === true)
  if (deferred !== -1 && search === -1) {
    return {
      message: `'tools[${deferred}].defer_loading' requires a 'tool_search' tool in 'tools'.`,
      param: `tools[${deferred}].defer_loading`,
      code: "invalid_value",
    }
  }
  return undefined
}
