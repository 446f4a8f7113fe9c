/**
 * OpenAI Chat Completions wire format: validation (the adapter's,
 * `OpenAIChatProvider.Validate`), the prompt as a token sequence for usage
 * and caching, and the reply as JSON or SSE chunks.
 */
import { OpenAIChatProvider } from "@ctxd/context"
import { excerpt, isRecord, type Json, sampleFromSchema, stableJson } from "./json.ts"
import type { ScriptedReply } from "./settings.ts"
import * as Tokens from "./tokens.ts"

/** An OpenAI error: message, param, code (type is always `invalid_request_error` for 400s). */
export type Problem = OpenAIChatProvider.Validate.Problem

/** The first problem of a `/v1/chat/completions` body, or `undefined` when valid (the adapter's validator). */
export const validate = OpenAIChatProvider.Validate.validate

const list = (u: unknown): ReadonlyArray<unknown> => (Array.isArray(u) ? u : [])

/** `out.push(...ids)` without the argument-count limit of spreading large arrays. */
const append = (out: Array<number>, ids: ArrayLike<number>): void => {
  for (let i = 0; i < ids.length; i++) out.push(ids[i]!)
}

/** Appends `content`'s tokens; `marks` gets the token offset after each part that carries a `prompt_cache_breakpoint`. */
const appendContent = (out: Array<number>, content: unknown, marks?: Array<number>): void => {
  if (typeof content === "string") return append(out, Tokens.encode(content))
  for (const part of list(content)) {
    if (!isRecord(part)) continue
    appendPart(out, part)
    if (marks !== undefined && part["prompt_cache_breakpoint"] !== undefined) marks.push(out.length)
  }
}

const appendPart = (out: Array<number>, part: Json): void => {
  if (part["type"] === "text") append(out, Tokens.encode(String(part["text"])))
  else if (part["type"] === "image_url") append(out, Tokens.frame(`image:${stableJson(part["image_url"])}`, Tokens.IMAGE_TOKENS))
  else append(out, Tokens.encode(stableJson(part)))
}

/**
 * The prompt as a token sequence: tools first, then each message with its
 * framing; `marks` gets the offsets of the explicit cache breakpoints.
 */
export const promptTokens = (body: Json, marks?: Array<number>): Array<number> => {
  const out: Array<number> = []
  append(out, Tokens.frame("request", Tokens.REQUEST_OVERHEAD))
  for (const tool of list(body["tools"])) {
    append(out, Tokens.frame("tool", Tokens.TOOL_OVERHEAD))
    append(out, Tokens.encode(stableJson(isRecord(tool) ? tool["function"] : tool)))
  }
  for (const message of list(body["messages"])) {
    if (!isRecord(message)) continue
    append(out, Tokens.frame(String(message["role"]), Tokens.MESSAGE_OVERHEAD))
    appendContent(out, message["content"], marks)
    if (typeof message["name"] === "string") append(out, Tokens.encode(message["name"]))
    for (const call of list(message["tool_calls"])) {
      const fn = isRecord(call) && isRecord(call["function"]) ? call["function"] : {}
      append(out, Tokens.encode(String(fn["name"] ?? "")))
      append(out, Tokens.encode(String(fn["arguments"] ?? "")))
    }
  }
  return out
}

/** What the assistant answers, before it is put on the wire. */
export interface Answer {
  readonly text: string | null
  readonly toolCalls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>
  readonly finishReason: string
  readonly completionTokens: number
}

const forcedTool = (body: Json): Json | undefined => {
  const choice = body["tool_choice"]
  const fns = list(body["tools"]).flatMap((t) => (isRecord(t) && isRecord(t["function"]) ? [t["function"]] : []))
  if (choice === "required") return fns[0]
  if (isRecord(choice) && isRecord(choice["function"])) return fns.find((f) => f["name"] === (choice["function"] as Json)["name"])
  return undefined
}

const lastUserText = (body: Json): string => {
  const user = list(body["messages"])
    .filter(isRecord)
    .filter((m) => m["role"] === "user")
    .at(-1)
  const content = user?.["content"]
  if (typeof content === "string") return content
  return list(content)
    .flatMap((p) => (isRecord(p) && p["type"] === "text" ? [String(p["text"])] : []))
    .join(" ")
}

/** The answer to `body`: the scripted reply if any, else the default text (or a forced tool call). */
export const answer = (body: Json, reply: ScriptedReply | undefined, promptTokenCount: number, nextId: () => string): Answer => {
  const forced = reply === undefined ? forcedTool(body) : undefined
  const toolCalls =
    forced !== undefined
      ? [{ id: `call_${nextId()}`, name: String(forced["name"]), arguments: JSON.stringify(sampleFromSchema(forced["parameters"]) ?? {}) }]
      : (reply?.toolCalls ?? []).map((c) => ({ id: c.id ?? `call_${nextId()}`, name: c.name, arguments: JSON.stringify(c.input ?? {}) }))
  const text =
    forced !== undefined
      ? null
      : reply === undefined
        ? `Summary of ${list(body["messages"]).length} messages (${promptTokenCount} prompt tokens). Last user message: "${excerpt(lastUserText(body), 160)}"`
        : reply.text !== undefined && reply.text.length > 0
          ? reply.text
          : null
  const completionTokens = Tokens.count(text ?? "") + toolCalls.reduce((n, c) => n + Tokens.count(c.name) + Tokens.count(c.arguments), 0)
  return {
    text,
    toolCalls,
    finishReason: reply?.stopReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
    completionTokens: Math.max(1, completionTokens),
  }
}

/** The `usage` object of a completion. */
export const usage = (prompt: number, cached: number, completion: number, written?: number): Json => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
  // GPT-5.6+ bill their writes: `cache_write_tokens` (SDK `CompletionUsage.PromptTokensDetails`)
  prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0, ...(written === undefined ? {} : { cache_write_tokens: written }) },
  completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
})

const wireCalls = (a: Answer) =>
  a.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }))

/** A non-streaming `ChatCompletion` body. */
export const completion = (id: string, model: string, created: number, a: Answer, u: Json): Json => ({
  id,
  object: "chat.completion",
  created,
  model,
  choices: [
    {
      index: 0,
      message: {
        role: "assistant",
        content: a.text,
        refusal: null,
        annotations: [],
        ...(a.toolCalls.length > 0 ? { tool_calls: wireCalls(a) } : {}),
      },
      logprobs: null,
      finish_reason: a.finishReason,
    },
  ],
  usage: u,
  service_tier: "default",
  system_fingerprint: "fp_fake",
})

/** The SSE `data:` payloads of a streamed completion (without the final `[DONE]`). */
export const chunks = (id: string, model: string, created: number, a: Answer, u: Json, includeUsage: boolean): Array<Json> => {
  const base = {
    id,
    object: "chat.completion.chunk",
    created,
    model,
    service_tier: "default",
    system_fingerprint: "fp_fake",
    ...(includeUsage ? { usage: null } : {}),
  }
  const choice = (delta: Json, finish: string | null = null) => ({
    ...base,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  })
  const out: Array<Json> = [choice({ role: "assistant", content: "", refusal: null })]
  const text = a.text ?? ""
  for (let i = 0; i < text.length; i += 16) out.push(choice({ content: text.slice(i, i + 16) }))
  a.toolCalls.forEach((c, index) => {
    out.push(choice({ tool_calls: [{ index, id: c.id, type: "function", function: { name: c.name, arguments: "" } }] }))
    for (let i = 0; i < c.arguments.length; i += 24) {
      out.push(choice({ tool_calls: [{ index, function: { arguments: c.arguments.slice(i, i + 24) } }] }))
    }
  })
  out.push(choice({}, a.finishReason))
  if (includeUsage) out.push({ ...base, choices: [], usage: u })
  return out
}
