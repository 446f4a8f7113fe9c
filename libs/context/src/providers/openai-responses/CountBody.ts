/**
 * Count requests for OpenAI's `POST /v1/responses/input_tokens`, one per
 * segment, rendered by `@ctxd/context`'s Responses renderer (the body ctxd
 * sends), so the segment counts add up to the count of that body.
 *
 * Envelopes (measured once per model, see `OpenAICounter`): every request
 * carries one `"."` user message (`plain`; the endpoint counts a request, and
 * a request has input); `twoDots` (two of them) measures one message, so the
 * per-request framing is `plain − (twoDots − plain)`; `emptyUser` (one user
 * message with empty content) is subtracted from a text segment counted as
 * the content of a user message, leaving the text without framing (should
 * the API refuse an empty message, text counts fail as `rejected`, which
 * does not count against the breaker, and are answered locally).
 *
 * Segments:
 * - the prefix: `instructions` (the system sections, joined as the renderer
 *   joins them) and `tools` together (the model reads both in one developer
 *   message, so they are not additive apart); the tools alone too, to split
 *   the prefix into `toolsTokens` and `systemTokens`;
 * - the batch: a turn's new messages as input items after the envelope.
 *   Items are additive (each is framed on its own), except where the batch
 *   alone is not a valid request: a `function_call_output` whose call is in
 *   an older message becomes a user message of its output, and a
 *   `function_call` with no output in the batch that more input follows
 *   becomes an assistant message of `name arguments` (`approximate`).
 *   A batch with a `reasoning` item is `approximate` too: the API drops
 *   reasoning items of earlier turns once a new user message follows, so
 *   what is counted now is not what later turns pay for it.
 */
import * as Models from "../../Models.ts"
import * as RenderResponses from "./Render.ts"
import type { Conversation } from "@ctxd/contracts"
import * as ExplicitCache from "../openai-chat/ExplicitCache.ts"

type Json = Record<string, unknown>

export type Envelope = "plain" | "twoDots" | "emptyUser"

const DOT: Json = { type: "message", role: "user", content: "." }

const user = (text: string): Json => ({ type: "message", role: "user", content: text })

/** The count request of an envelope alone. */
export const envelopeBody = (envelope: Envelope): Json => ({
  input: envelope === "plain" ? [DOT] : envelope === "twoDots" ? [DOT, DOT] : [user("")],
})

const EMPTY = "(empty)"

/** The request parts the renderer makes of system sections and tools (no messages). */
const rendered = (
  model: string,
  system: ReadonlyArray<Conversation.SystemSection>,
  tools: ReadonlyArray<Conversation.Tool>,
  messages: ReadonlyArray<Conversation.Message>,
): Json =>
  RenderResponses.render({ model: Models.resolve({ provider: "openai", name: model }), system, tools, messages, tenant: "", session: "" })
    .body

/** The count request of the instructions and tools together (inside `plain`); `undefined` when there are neither. */
export const prefixBody = (
  model: string,
  system: ReadonlyArray<Conversation.SystemSection>,
  tools: ReadonlyArray<Conversation.Tool>,
): Json | undefined => {
  const body = rendered(model, system, tools, [])
  if (body["instructions"] === undefined && body["tools"] === undefined) return undefined
  return {
    ...(body["instructions"] === undefined ? {} : { instructions: body["instructions"] }),
    ...(body["tools"] === undefined ? {} : { tools: body["tools"] }),
    input: [DOT],
  }
}

/** The count request of the tools alone (inside `plain`). */
export const toolsBody = (model: string, tools: ReadonlyArray<Conversation.Tool>): Json | undefined => prefixBody(model, [], tools)

/** The count request of a text as the content of the only user message (minus `emptyUser`: the text without framing). */
export const textBody = (text: string): Json => ({ input: [user(text)] })

/** A turn's new messages as a count request. */
export interface Batch {
  readonly body: Json
  /** True when the batch had to be changed to be counted alone, or holds reasoning (see the module doc). */
  readonly approximate: boolean
}

const outputText = (output: unknown): string | Array<Json> => {
  if (typeof output === "string") return output === "" ? EMPTY : output
  const parts = Array.isArray(output) ? (output as Array<Json>) : []
  return parts.length === 0 ? EMPTY : parts
}

const isCall = (item: Json): boolean => item["type"] === "function_call" || item["type"] === "custom_tool_call"
const isOutput = (item: Json): boolean => item["type"] === "function_call_output" || item["type"] === "custom_tool_call_output"

/** The batch of a turn's new messages, rendered as the renderer renders them, made valid on its own. */
export const batch = (model: string, messages: ReadonlyArray<Conversation.Message>): Batch => {
  const items = ExplicitCache.unmarked((rendered(model, [], [], messages)["input"] as Array<Json> | undefined) ?? [])
  let approximate = items.some((item) => item["type"] === "reasoning")
  // outputs whose call is not earlier in the batch
  const called = new Set<unknown>()
  const paired: Array<Json> = items.map((item) => {
    if (isCall(item)) called.add(item["call_id"])
    if (!isOutput(item) || called.has(item["call_id"])) return item
    approximate = true
    return { type: "message", role: "user", content: outputText(item["output"]) }
  })
  // calls with no output in the batch, followed by more than their own run of calls and outputs
  const answered = new Set(paired.filter(isOutput).map((item) => item["call_id"]))
  const valid = paired.map((item, i) => {
    if (!isCall(item) || answered.has(item["call_id"])) return item
    const later = paired.slice(i + 1).some((next) => !isCall(next) && !isOutput(next) && next["type"] !== "reasoning")
    if (!later) return item
    approximate = true
    const args = item["type"] === "custom_tool_call" ? item["input"] : item["arguments"]
    return { type: "message", role: "assistant", content: `${String(item["name"])} ${String(args)}` }
  })
  return { body: { input: [DOT, ...valid] }, approximate }
}
