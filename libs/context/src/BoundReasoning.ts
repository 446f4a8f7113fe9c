/**
 * Reasoning bound to its prefix: on a model whose row binds reasoning
 * (`bindsReasoningToPrefix`, Anthropic's prefix check of preserved thinking)
 * a reasoning block sent back is valid only while everything before it —
 * system, tools, every earlier message and the earlier blocks of its own
 * message — is what was sent when it was produced; otherwise it and every
 * later block are invalid and the API answers 400 (or drops them under
 * `drop_block`): https://platform.claude.com/docs/en/build-with-claude/preserved-thinking.
 * ctxd never sends such a block.
 *
 * The reference for a block is what ctxd sent when it was produced: each
 * prompt built for a binding model leaves a {@link Record} (digests of
 * system + tools as sent, of each rendered message from the thinking frontier
 * on, one chained digest of those before it, and of the transient tail — the
 * memory note and the loop nudge after the newest message), carried to the
 * next turn in the prompt's shape. The assistant messages appended since were
 * produced under that prompt. The next prompt is compared with it
 * ({@link divergence}): the first place it differs (system or tools: before
 * every message; a message whose content differs, one left out or put back;
 * the tail gone from after the last message) invalidates every reasoning part
 * from there on, so they are left out — leaving them out is itself a change
 * after that place, so the rule is consistent — and reasoning not sent before
 * never comes back. Without a record (a session new to this worker, or one
 * from an older worker) the reference is the history as the client sent it.
 * Digests are over ctxd's neutral messages as they go to the renderer, so the
 * rule is the same for every format; cache markers are not part of them
 * (the API leaves them out of the comparison).
 *
 * What each provider binds: Anthropic thinking / redacted_thinking blocks on
 * the prefix-check models (the rows say which) — bound as above, and read
 * only by the models the adapter's `reads` allows (a switch to a model that
 * cannot read them leaves them out: the API would drop them). OpenAI
 * Responses reasoning items and Gemini thought signatures are not bound to a
 * prefix by their providers' docs (a reasoning item needs its following item,
 * a signature must come back verbatim on the model that made it): their rows
 * do not bind, and nothing here applies to them.
 */
import type { Conversation } from "@ctxd/contracts"
import { createHash } from "node:crypto"
import * as Reasoning from "./Reasoning.ts"
import * as ToolSearch from "./ToolSearch.ts"

/** What a prompt for a binding model sent, as the next turn compares it. */
export interface Record {
  /** The model it was built for (the producer of the reasoning in the reply). */
  readonly model: string
  /** Digest of the system sections and the tools as sent. */
  readonly fixed: string
  /** The thinking frontier: reasoning of messages before this history index was not sent. */
  readonly frontier: number
  /** Chained digest of the messages sent before the first one recorded in {@link sent}. */
  readonly before: string
  /** From the frontier on: history index, digest of the message as sent, whether its reasoning went with it. */
  readonly sent: ReadonlyArray<readonly [index: number, digest: string, reasoning: boolean]>
  /** Digest of what followed the newest message (memory note, loop nudge); `""`: nothing. */
  readonly tail: string
  /**
   * Reasoning from this history index on was sent although invalid (a forced
   * edit in a tool-use continuation, under `drop_block`): it and everything
   * after it stay invalid until left out.
   */
  readonly invalidFrom?: number | undefined
}

/** One message as it goes to the renderer: its history index and content. */
export interface Sent {
  readonly index: number
  readonly message: Conversation.Message
}

const digests = new WeakMap<object, string>()
const hashed = (value: unknown): string => createHash("sha1").update(JSON.stringify(value)).digest("base64url").slice(0, 22)

/** Digest of one message's content (once per message object). */
export const digestOf = (message: Conversation.Message): string => {
  let d = digests.get(message)
  if (d === undefined) digests.set(message, (d = hashed([message.role, message.parts])))
  return d
}

/** Digest of the system texts and the tools as sent (cache flags are not content). */
export const fixedOf = (system: ReadonlyArray<Conversation.SystemSection>, tools: ReadonlyArray<Conversation.Tool>): string =>
  // deferred tools (tool search) are exempt from the prefix check: a change among them binds nothing
  hashed([system.map((s) => s.text), ToolSearch.loaded(tools)])

/** Digest of the transient tail (`""` when there is none). */
export const tailOf = (texts: ReadonlyArray<string | undefined>): string => {
  const present = texts.filter((t): t is string => t !== undefined && t !== "")
  return present.length === 0 ? "" : hashed(present)
}

const chain = (messages: ReadonlyArray<Sent>): string => hashed(messages.map((s) => digestOf(s.message)))

/** The record of a prompt: `messages` as rendered (reasoning already left out where it went). */
export const record = (model: string, fixed: string, frontier: number, messages: ReadonlyArray<Sent>, tail: string): Record => {
  const at = messages.findIndex((s) => s.index >= frontier)
  const cut = at === -1 ? messages.length : at
  return {
    model,
    fixed,
    frontier,
    before: chain(messages.slice(0, cut)),
    sent: messages.slice(cut).map((s) => [s.index, digestOf(s.message), Reasoning.hasReasoning(s.message)] as const),
    tail,
  }
}

/** The reference when no record exists: the history as the client sent it, whole, under the given system and tools. */
export const unedited = (model: string, fixed: string, history: ReadonlyArray<Conversation.Message>): Record => ({
  model,
  fixed,
  frontier: 0,
  before: chain([]),
  sent: history.map((message, index) => [index, digestOf(message), Reasoning.hasReasoning(message)] as const),
  tail: "",
})

/** History indices whose reasoning the record shows was not sent (it must not come back). */
export const withheld = (r: Record): ReadonlySet<number> => new Set(r.sent.filter(([, , reasoning]) => !reasoning).map(([i]) => i))

/**
 * The first history index whose reasoning a prompt (`messages`, as it would
 * go with its reasoning) may not send against `r`: `-1` when system or tools
 * changed (nothing may be sent), `Infinity` when nothing recorded changed.
 */
export const divergence = (r: Record, fixed: string, messages: ReadonlyArray<Sent>): number => {
  if (fixed !== r.fixed) return -1
  const first = r.sent[0]?.[0] ?? Infinity
  const at = messages.findIndex((s) => s.index >= first)
  const cut = at === -1 ? messages.length : at
  if (chain(messages.slice(0, cut)) !== r.before) return messages[0]?.index ?? -1
  for (let j = 0; j < r.sent.length; j++) {
    const [index, digest] = r.sent[j]!
    const s = messages[cut + j]
    if (s === undefined) return index
    if (s.index !== index) return Math.min(s.index, index)
    if (digestOf(s.message) !== digest) return index
  }
  const next = messages[cut + r.sent.length]
  // the tail followed the last message: what comes after it now was produced with it there
  return next !== undefined && r.tail !== "" ? next.index : Infinity
}

/** Output over input price where the plan does not say: 5, the ratio of every Claude row (the models that bind reasoning). */
export const DEFAULT_OUTPUT_MULTIPLIER = 5

/**
 * What losing continuity costs beyond producing the reasoning again, as a
 * share of that: the model re-derives what it had thought with less to go
 * on (an extra step, a repeated tool call). Not measurable from usage; set
 * to the reasoning's own price again (1), so an edit that invalidates bound
 * reasoning pays for it twice over at the output price.
 */
export const CONTINUITY_PENALTY = 1

/**
 * The cost, in base-input-token units, of leaving out `tokens` of bound
 * reasoning the previous prompt sent (a candidate's `reasoningLost`): the
 * model must think them again, at the output price, plus
 * {@link CONTINUITY_PENALTY}. The cache planner adds it to an edit's cost, so
 * an edit before bound reasoning is rare while a tool-use loop runs; at the
 * first request of a user turn the frontier has already let that reasoning
 * go (nothing is lost), so edits move there unless the budget forces them.
 */
export const lossOf = (tokens: number, outputMultiplier: number | undefined): number =>
  tokens * (outputMultiplier ?? DEFAULT_OUTPUT_MULTIPLIER) * (1 + CONTINUITY_PENALTY)
