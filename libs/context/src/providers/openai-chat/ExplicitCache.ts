/**
 * OpenAI explicit prompt caching (GPT-5.6 and later), shared by the Chat
 * Completions and Responses renderers and validators.
 *
 * The rules, from https://developers.openai.com/api/docs/guides/prompt-caching
 * and the `openai` SDK's `PromptCacheOptions` / `PromptCacheBreakpoint` types:
 *
 * - a content block (an input text, image, file or audio part) may carry
 *   `prompt_cache_breakpoint: {mode: "explicit", ttl?}`, marking the exact end
 *   of a reusable prefix; assistant output parts take none (LangChain4j's
 *   `OpenAiOfficialPromptCacheBreakpoint`: "assistant output blocks are not
 *   among the block types OpenAI accepts a breakpoint on"; ctxd marks only
 *   system, developer, user and tool content);
 * - `prompt_cache_options: {mode, ttl, prewarm?, comparison_response_id?}`:
 *   with `mode: "explicit"` no implicit breakpoint is added and the request
 *   writes up to the latest four explicit breakpoints (with `implicit`, the
 *   managed one and the latest three). Earlier marks are not refused, only
 *   not written; reads match any of the latest 80 breakpoints of the
 *   conversation, without a block lookback limit;
 * - `ttl`: `30m` (the default) on both APIs, `12h` also on Responses; it is
 *   a minimum lifetime. `prompt_cache_retention` is deprecated in favour of
 *   it, so bodies for these models do not send it;
 * - `comparison_response_id` (Responses only; Chat Completions has no such
 *   field) asks for `prompt_cache_diagnostics` against an earlier response.
 *
 * ctxd uses `mode: "explicit"` so its own layout decides what is written,
 * exactly as Anthropic's breakpoints do (`CacheLayout`): the end of the
 * system prompt, the frontier (the last message the next mask edit keeps),
 * and the newest block, at most the model row's `maxBreakpoints`.
 */
import * as CostModel from "../../CostModel.ts"

type Json = Record<string, unknown>

/** The field a content block carries a breakpoint in. */
export const FIELD = "prompt_cache_breakpoint"

/** True when the model's row takes explicit breakpoints (GPT-5.6+). */
export const takesBreakpoints = (modelName: string): boolean => CostModel.lookup(modelName).capabilities.explicitCacheBreakpoints

/** The TTLs each API accepts in `prompt_cache_options.ttl` and on a breakpoint (SDK types). */
export const TTLS = { chat: ["30m"], responses: ["30m", "12h"] } as const

/** The TTL to write: the planned tier when the API can say it, else the default `30m`. */
export const ttlOf = (api: keyof typeof TTLS, tier: string | undefined): string =>
  tier !== undefined && (TTLS[api] as ReadonlyArray<string>).includes(tier) ? tier : "30m"

/** `prompt_cache_options` of a body ctxd lays out itself. */
export const options = (ttl: string, comparisonResponseId?: string): Json => ({
  mode: "explicit",
  ttl,
  ...(comparisonResponseId === undefined ? {} : { comparison_response_id: comparisonResponseId }),
})

/**
 * The item indices to mark, in order, at most `max`: `system` (the item that
 * ends the system prompt, -1 for none), `frontier` (the last markable item of
 * the messages the next edit keeps, -1 for none) and `last` (the newest
 * markable item before the tail notes). Duplicates are marked once.
 */
export const layout = (
  marks: { readonly system: number; readonly frontier: number; readonly last: number },
  max: number,
): Array<number> => {
  const picked: Array<number> = []
  // the newest block first: it is what the next request reads; then the system prompt, then the frontier
  for (const i of [marks.last, marks.system, marks.frontier]) if (i >= 0 && !picked.includes(i) && picked.length < max) picked.push(i)
  return picked.sort((a, b) => a - b)
}

/** A copy of content `parts` (a string becomes one `textType` part) whose last part carries a breakpoint. */
export const markParts = (content: unknown, textType: "text" | "input_text"): Array<Json> | undefined => {
  const parts: Array<Json> =
    typeof content === "string"
      ? [{ type: textType, text: content }]
      : Array.isArray(content)
        ? content.map((p) => ({ ...(p as Json) }))
        : []
  const last = parts.at(-1)
  if (last === undefined) return undefined
  last[FIELD] = { mode: "explicit" }
  return parts
}

/**
 * `items` (messages or input items) without breakpoints: a count request
 * counts a prompt's parts, it caches nothing.
 */
export const unmarked = (items: ReadonlyArray<Json>): Array<Json> =>
  items.map((item) => {
    const out = { ...item }
    for (const field of ["content", "output"] as const) {
      const value = out[field]
      if (Array.isArray(value))
        out[field] = value.map((p: Json) => (FIELD in p ? Object.fromEntries(Object.entries(p).filter(([k]) => k !== FIELD)) : p))
    }
    return out
  })

/** Why a breakpoint value is refused (SDK: `{mode: "explicit", ttl?}`), or undefined. */
export const badMarker = (value: unknown, ttls: ReadonlyArray<string>): string | undefined => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "expected an object"
  const v = value as Json
  for (const key of Object.keys(v)) if (key !== "mode" && key !== "ttl") return `unknown parameter '${key}'`
  if (v["mode"] !== "explicit") return `Invalid value: '${String(v["mode"])}'. Supported values are: 'explicit'.`
  if (v["ttl"] !== undefined && !ttls.includes(String(v["ttl"])))
    return `Invalid value: '${String(v["ttl"])}'. Supported values are: ${ttls.map((t) => `'${t}'`).join(" and ")}.`
  return undefined
}

/** The problem shape both OpenAI validators answer with. */
interface Problem {
  readonly message: string
  readonly param: string | null
  readonly code: string | null
}

/**
 * OpenAI's wording for a parameter a model does not take ("Unsupported
 * parameter: 'x' is not supported with this model.", as for `max_tokens` on
 * reasoning models); the docs say these fields are "supported for gpt-5.6 and
 * later models" without quoting the refusal, so this wording is assumed.
 */
export const unsupported = (param: string): Problem => ({
  message: `Unsupported parameter: '${param}' is not supported with this model.`,
  param,
  code: "unsupported_parameter",
})

/**
 * The problem of a part's `prompt_cache_breakpoint` at `param`, or undefined:
 * refused on models without explicit caching, on assistant output (no block
 * type of an assistant takes one) and when its value is not `{mode: "explicit", ttl?}`.
 * The wording of the last two is not documented; these are assumed.
 */
export const partProblem = (
  modelName: string,
  role: string,
  value: unknown,
  param: string,
  ttls: ReadonlyArray<string>,
): Problem | undefined => {
  if (!takesBreakpoints(modelName)) return unsupported(param)
  if (role === "assistant")
    return { message: `Invalid parameter: '${param}' is not supported on assistant messages.`, param, code: "invalid_value" }
  const bad = badMarker(value, ttls)
  return bad === undefined ? undefined : { message: `Invalid '${param}': ${bad}`, param, code: "invalid_value" }
}

/** The problem of a body's `prompt_cache_options` (the keys the API takes: `keys`), or undefined. */
export const optionsProblem = (
  modelName: string,
  value: unknown,
  keys: ReadonlySet<string>,
  ttls: ReadonlyArray<string>,
): Problem | undefined => {
  if (value === undefined || value === null) return undefined
  if (!takesBreakpoints(modelName)) return unsupported("prompt_cache_options")
  if (typeof value !== "object" || Array.isArray(value))
    return { message: "Invalid type for 'prompt_cache_options': expected an object.", param: "prompt_cache_options", code: "invalid_type" }
  const v = value as Json
  for (const key of Object.keys(v))
    if (!keys.has(key))
      return {
        message: `Unknown parameter: 'prompt_cache_options.${key}'.`,
        param: `prompt_cache_options.${key}`,
        code: "unknown_parameter",
      }
  if (v["mode"] !== undefined && v["mode"] !== "implicit" && v["mode"] !== "explicit")
    return {
      message: `Invalid value: '${String(v["mode"])}'. Supported values are: 'implicit' and 'explicit'.`,
      param: "prompt_cache_options.mode",
      code: "invalid_value",
    }
  if (v["ttl"] !== undefined && !ttls.includes(String(v["ttl"])))
    return {
      message: `Invalid value: '${String(v["ttl"])}'. Supported values are: ${ttls.map((t) => `'${t}'`).join(" and ")}.`,
      param: "prompt_cache_options.ttl",
      code: "invalid_value",
    }
  return undefined
}

/** Chat Completions `prompt_cache_options` keys (its SDK type has no `prewarm` or `comparison_response_id`). */
export const CHAT_OPTION_KEYS: ReadonlySet<string> = new Set(["mode", "ttl"])
/** Responses `prompt_cache_options` keys. */
export const RESPONSES_OPTION_KEYS: ReadonlySet<string> = new Set(["mode", "ttl", "prewarm", "comparison_response_id"])
