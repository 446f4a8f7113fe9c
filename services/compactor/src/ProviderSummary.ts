/**
 * The `provider` summarizer backend: the compactor asks the session's model's
 * API for the summary of exactly the span it would fold (Anthropic on-demand
 * compaction, beta `compact-2026-09-04`), instead of ctxd's own summarizer.
 * Pure, apart from the call it is handed. Why and how, from the docs:
 *
 * - https://platform.claude.com/docs/en/build-with-claude/compaction-on-demand:
 *   a request with `compaction: {type: "summarize"}` returns one signed
 *   `compaction` block (readable `content`, opaque `encrypted_content`,
 *   `signature`) that later requests send first in `messages`, verbatim, in
 *   place of every message the request held.
 * - https://platform.claude.com/docs/en/build-with-claude/compaction-background:
 *   the request runs while turns go on over the full history; the swap then
 *   drops exactly the messages sent and keeps every turn appended since. ctxd
 *   does this already: the job runs in the background under the session's
 *   lease, and the stored summary covers `coversFromSeq..coversToSeq` (the
 *   view replaces that span with the block, `View.applySummary`).
 * - https://platform.claude.com/docs/en/build-with-claude/compaction-keep-recent-turns
 *   and `…/compaction-thinking-blocks`: the cut is the client's; it must leave
 *   no tool call open (the API refuses a request ending on an unfinished
 *   assistant turn), and kept turns' thinking stays valid when the request
 *   ran on a preserved-thinking model, the kept turns follow the summarized
 *   messages directly and unchanged, and the first kept message's role
 *   differs from the last summarized one's. So the cut is moved back to a
 *   `user` message after an `assistant` one ({@link alignCut}), and the
 *   request goes to the session's own model.
 *
 * Not documented, so decided here: the request carries the session's
 * `system` and `tools` as its latest prompt sent them (the stored reply's
 * body; none once that reply was pruned) and the span as ctxd renders it
 * for Anthropic, unmasked; on a model that binds thinking to its prefix it
 * leaves the span's thinking blocks out (rendered afresh, the prefix before
 * them is not byte for byte what they were produced under, and the check
 * would refuse them). Whether the API's check of kept turns' thinking then
 * accepts the swap is not said; the prompt's own reasoning rules decide
 * what of it is sent after the swap.
 *
 * OpenAI's `POST /responses/compact` is not used: its output item is
 * encrypted and carries the whole state before it, with no readable summary
 * for the audit copy, and under `store: false` ctxd would have to resend the
 * whole input anyway; Responses turns keep the `ctxd` backend.
 */
import { AnthropicProvider, CostModel, type Models, type Pipeline } from "@ctxd/context"
import type { Anthropic, Turn } from "@ctxd/contracts"
import * as View from "./View.ts"

/** Who writes a compaction summary. */
export type Backend = "ctxd" | "provider"

/** True when `format`'s turns of `model` can have the provider write the summary (the row's `providerCompaction`). */
export const supports = (model: string, format: Turn.Format | undefined): boolean =>
  format === View.BLOCK_FORMAT && CostModel.lookup(model).capabilities.providerCompaction === true

/**
 * The backend a job runs with: `provider` only where {@link supports} holds;
 * there, what the tenant or agent asked (`summarizer.backend`), by default
 * `provider` when the model binds thinking to its prefix (a summary ctxd
 * wrote would invalidate the thinking after it; the API's does not), else
 * `ctxd`.
 */
export const backendFor = (asked: Backend | undefined, model: string, format: Turn.Format | undefined): Backend => {
  if (!supports(model, format)) return "ctxd"
  return asked ?? (CostModel.lookup(model).capabilities.bindsReasoningToPrefix ? "provider" : "ctxd")
}

/**
 * The cut at or before `to` (history indices, `from < to`) whose first kept
 * message is a `user` message right after an `assistant` one, or
 * `undefined` when none is after `from` (the job then falls back to ctxd's
 * summarizer). Tool results are `tool` messages: a cut before one would
 * split it from its call, so it never qualifies.
 */
export const alignCut = (history: ReadonlyArray<Pipeline.StoredMessage>, from: number, to: number): number | undefined => {
  for (let cut = Math.min(to, history.length - 1); cut > from; cut--) {
    if (history[cut]!.message.role === "user" && history[cut - 1]!.message.role === "assistant") return cut
  }
  return undefined
}

/** The session's wire prefix as its latest prompt sent it (the stored reply's `request`). */
export interface Prefix {
  readonly system?: unknown
  readonly tools?: ReadonlyArray<unknown> | undefined
}

const isRecord = (u: unknown): u is Readonly<Record<string, unknown>> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * The `system` and `tools` of a stored turn reply's Anthropic body (`{}`
 * when it has none: a pruned reply, another format's body).
 */
export const prefixOf = (reply: unknown): Prefix => {
  const request = isRecord(reply) ? reply["request"] : undefined
  if (!isRecord(request) || !Array.isArray(request["messages"]) || request["max_tokens"] === undefined) return {}
  const tools = request["tools"]
  return {
    ...(request["system"] === undefined ? {} : { system: request["system"] }),
    ...(Array.isArray(tools) && tools.length > 0 ? { tools: tools as ReadonlyArray<unknown> } : {}),
  }
}

/**
 * The wire `messages` of the compaction request: the session's view (under
 * the live summary, a previous provider block first) up to history index
 * `cut`, rendered as the Anthropic adapter renders a turn's (tool calls as
 * blocks when `prefix` has the session's tools), without cache breakpoints.
 */
export const requestMessages = (
  history: ReadonlyArray<Pipeline.StoredMessage>,
  live: View.Summary | undefined,
  cut: number,
  model: Models.ResolvedModel,
  countMessage: (message: Pipeline.StoredMessage["message"]) => number,
  prefix: Prefix = {},
): ReadonlyArray<unknown> => {
  const view = View.applySummary(history.slice(0, cut), live, countMessage, View.BLOCK_FORMAT)
  // the session's own tools, so calls and results render as blocks (hosted tools have no schema and are not needed)
  const defined = (prefix.tools ?? []).filter((t) => isRecord(t) && isRecord(t["input_schema"])) as Array<Anthropic.Tool>
  const tools = AnthropicProvider.Normalize.tools(defined)
  const rendered = AnthropicProvider.Render.render({ model, system: [], tools, messages: view.messages.map((m) => m.message) })
  const messages = rendered.body["messages"]
  if (!Array.isArray(messages)) return []
  const bound = CostModel.lookup(model.name).capabilities.bindsReasoningToPrefix
  return messages.map((m) => (bound ? withoutThinking(uncached(m)) : uncached(m)))
}

/**
 * A wire message without its thinking blocks. On a model that binds thinking
 * to its prefix a block is checked against the exact prefix it was produced
 * under, which a fresh, unmasked rendering does not reproduce: sent, it
 * would be refused (the prefix check's 400); left out, none is checked.
 */
const withoutThinking = (message: unknown): unknown => {
  if (typeof message !== "object" || message === null) return message
  const content = (message as { readonly content?: unknown }).content
  if (!Array.isArray(content)) return message
  const kept = content.filter((b: unknown) => {
    const type = typeof b === "object" && b !== null ? (b as { readonly type?: unknown }).type : undefined
    return type !== "thinking" && type !== "redacted_thinking"
  })
  return { ...message, content: kept.length === 0 ? [{ type: "text", text: AnthropicProvider.Render.EMPTY }] : kept }
}

/** A copy of a wire value without its `cache_control` marks: the compaction request is asked once, nothing to cache for it. */
const uncached = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(uncached)
  if (typeof value !== "object" || value === null) return value
  return Object.fromEntries(Object.entries(value).flatMap(([k, v]) => (k === "cache_control" ? [] : [[k, uncached(v)]])))
}
