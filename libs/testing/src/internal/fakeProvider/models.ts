/**
 * The model lists (`GET`), which agent CLIs and SDKs call next to the model
 * calls (a gateway passes them through):
 * - Anthropic `GET /v1/models` and `/v1/models/{id}`
 *   (https://platform.claude.com/docs/en/api/models/list): `{data: [{type:
 *   "model", id, display_name, created_at}], has_more, first_id, last_id}`;
 * - OpenAI `GET /v1/models` and `/v1/models/{id}`
 *   (https://platform.openai.com/docs/api-reference/models/list):
 *   `{object: "list", data: [{id, object: "model", created, owned_by}]}`;
 * - Gemini `GET /v1beta/models` and `/v1beta/models/{id}`
 *   (https://ai.google.dev/api/models#method:-models.list): `{models: [{name:
 *   "models/<id>", displayName, inputTokenLimit, outputTokenLimit,
 *   supportedGenerationMethods}]}`.
 * `/v1/models` is the same path on all three (`@google/genai` 3.x calls
 * Gemini at `/v1`): a request with an `x-goog-api-key` or
 * `x-goog-api-client` header is Gemini's, one with an `anthropic-version` or
 * `x-api-key` header Anthropic's, else OpenAI's.
 * An unknown id is the API's 404.
 */
import { CostModel } from "@ctxd/context"
import type { Json } from "./json.ts"

/** The models each fake API lists (a few current ones per provider; any model name is still accepted by the calls). */
export const LISTED = {
  anthropic: ["claude-opus-4-8", "claude-sonnet-4-6", "claude-haiku-4-5"],
  openai: ["gpt-5.6", "gpt-5.5", "gpt-5-codex"],
  google: ["gemini-3-pro-preview", "gemini-2.5-pro", "gemini-2.5-flash"],
} as const

export type Provider = keyof typeof LISTED

const CREATED = "2026-01-01T00:00:00Z"
const CREATED_UNIX = Math.floor(Date.parse(CREATED) / 1_000)

const anthropicModel = (id: string): Json => ({ type: "model", id, display_name: id, created_at: CREATED })
const openaiModel = (id: string): Json => ({ id, object: "model", created: CREATED_UNIX, owned_by: "openai" })
const googleModel = (id: string): Json => {
  const row = CostModel.lookup(id)
  return {
    name: `models/${id}`,
    version: "001",
    displayName: id,
    inputTokenLimit: row.contextWindow,
    outputTokenLimit: row.maxOutputTokens,
    supportedGenerationMethods: ["generateContent", "countTokens"],
  }
}

/** The list (no `id`) or one model of `provider`; `undefined` for an id it does not list. */
export const answer = (provider: Provider, id: string | undefined): Json | undefined => {
  const ids: ReadonlyArray<string> = LISTED[provider]
  if (id !== undefined && !ids.includes(id)) return undefined
  const shape = provider === "anthropic" ? anthropicModel : provider === "openai" ? openaiModel : googleModel
  if (id !== undefined) return shape(id)
  if (provider === "anthropic") return { data: ids.map(shape), has_more: false, first_id: ids[0], last_id: ids[ids.length - 1] }
  if (provider === "openai") return { object: "list", data: ids.map(shape) }
  return { models: ids.map(shape) }
}

const ROUTE = /^\/(v1|v1beta)\/models(?:\/([^/:]+))?$/

/** The provider and model id of a model-list path, or `undefined` for another path. */
export const route = (
  path: string,
  headers: Readonly<Record<string, unknown>>,
): { readonly provider: Provider; readonly id: string | undefined } | undefined => {
  const match = ROUTE.exec(path)
  if (match === null) return undefined
  const id = match[2] === undefined ? undefined : decodeURIComponent(match[2]).replace(/^models\//, "")
  const google = headers["x-goog-api-key"] !== undefined || headers["x-goog-api-client"] !== undefined
  if (match[1] === "v1beta" || google) return { provider: "google", id }
  const anthropic = headers["anthropic-version"] !== undefined || headers["x-api-key"] !== undefined
  return { provider: anthropic ? "anthropic" : "openai", id }
}
