/**
 * Observation masking: tool results the model has consumed are sent as a
 * one-line reference `[name: status, N tokens — recall(i)]` instead of their
 * content (name from the matching call, status `ok`/`error`, N the result's
 * tokens, i the stored sequence number of its message, where the original
 * stays: the handle the virtual `recall` tool takes, see `Recall`; short, as
 * every masked result is sent with it on every later turn). Only content is replaced: no result or call is
 * removed, so pairing is untouched.
 *
 * The results of the newest exchange (the last tool-call group, see
 * `Units.lastUnitStart`) are not consumed yet: they are never masked, however
 * many they are.
 *
 * Cache-aware: results older than the last `keep` (K) become maskable, but
 * the masked boundary only sits on a fixed grid of history positions — a
 * new grid point every `batchTokens` tokens of tool results, counted from the
 * start of the session — so the boundary is a pure function of the history,
 * moves at most once per batch, and the prompt prefix changes rarely and in
 * large steps. Results below `minTokens` are never masked (a reference would
 * save nothing).
 *
 * Under pressure (proactive compression) two more steps exist:
 * - `needTokens`: besides the grid, results older than the last K are masked
 *   in this order until that many more tokens are saved: raw JSON first (a
 *   text that parses as a JSON object or array), then the rest; larger first
 *   within each class; older first on ties.
 * - `dedupe`: a result whose text equals an earlier visible result of the
 *   same tool becomes `[name: same output as recall(i)]`.
 */
import type { Conversation } from "@ctxd/contracts"
import * as Units from "./Units.ts"

/** A stored history message: sequence number, message, token count. */
export interface Entry {
  readonly seq: number
  readonly message: Conversation.Message
  readonly tokens: number
}

/** Masking knobs. */
export interface Options {
  /** The last K tool results always stay whole (default 3). */
  readonly keep: number
  /** Tokens of tool results per grid step of the boundary (default 2,000). */
  readonly batchTokens: number
  /** Results smaller than this many tokens are never masked (default 50). */
  readonly minTokens: number
}

/** `keep` 3, `batchTokens` 2,000, `minTokens` 50. */
export const defaults: Options = { keep: 3, batchTokens: 2_000, minTokens: 50 }

/** Framing tokens per message and per tool result (as the local counter estimates them, `LocalCounter.overhead`). */
const MESSAGE_OVERHEAD = 4
const RESULT_OVERHEAD = 4
/** Characters an image weighs when a message's tokens are shared among its results. */
const IMAGE_WEIGHT = 4_000

/**
 * The grid of positions the boundary may take. Cheap to extend as the
 * history grows ({@link grid}), so a caller may keep it between turns.
 */
export interface Grid {
  readonly batchTokens: number
  /** How many history messages were scanned. */
  readonly scanned: number
  /** History indices the boundary may sit at, ascending; the first is 0. */
  readonly points: ReadonlyArray<number>
  /** Tokens of tool messages after the last point. */
  readonly pending: number
}

/**
 * The grid over `history`: a point after each message where the tokens of
 * `tool` messages since the previous point reach `batchTokens`. Scans only
 * the messages after `previous.scanned` when `previous` was computed for a
 * prefix of this history with the same `batchTokens`.
 */
export const grid = (history: ReadonlyArray<Entry>, batchTokens: number, previous?: Grid): Grid => {
  const batch = Math.max(1, batchTokens)
  const reuse = previous !== undefined && previous.batchTokens === batch && previous.scanned <= history.length
  let pending = reuse ? previous.pending : 0
  let added: Array<number> | undefined
  for (let i = reuse ? previous.scanned : 0; i < history.length; i++) {
    if (history[i]!.message.role !== "tool") continue
    pending += history[i]!.tokens
    if (pending >= batch) {
      ;(added ??= []).push(i + 1)
      pending = 0
    }
  }
  const base = reuse ? previous.points : [0]
  return { batchTokens: batch, scanned: history.length, points: added === undefined ? base : base.concat(added), pending }
}

/**
 * The first history index of the protected results: the message holding the
 * K-th last tool result at or after `from`, scanning back from the end;
 * `history.length` for K = 0; `from` when there are fewer than K.
 */
export const keepStart = (history: ReadonlyArray<Entry>, keep: number, from: number): number => {
  if (keep <= 0) return history.length
  let seen = 0
  for (let i = history.length - 1; i >= from; i--) {
    const m = history[i]!.message
    if (m.role !== "tool") continue
    for (const p of m.parts) if (p.type === "tool_result") seen++
    if (seen >= keep) return i
  }
  return from
}

/** The largest grid point ≤ `limit`. */
export const boundary = (g: Grid, limit: number): number => {
  let lo = 0
  let hi = g.points.length - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1
    if (g.points[mid]! <= limit) lo = mid
    else hi = mid - 1
  }
  return Math.min(g.points[lo] ?? 0, limit)
}

/**
 * The one-line reference a masked result becomes; `step` is its handle for
 * `recall` (a pure function of the stored result, so the cached prefix stays
 * byte-identical from turn to turn).
 */
export const placeholder = (name: string, isError: boolean, tokens: number, step: number): string =>
  `[${name}: ${isError ? "error" : "ok"}, ${tokens} tokens — recall(${step})]`

/** The reference a duplicate result becomes. */
export const duplicate = (name: string, step: number): string => `[${name}: same output as recall(${step})]`

/** A history message as masking rewrote it. */
export interface Replacement {
  readonly message: Conversation.Message
  /** Its tokens after the rewrite. */
  readonly tokens: number
  /** Results of it masked and de-duplicated, and the tokens that saved. */
  readonly masked: number
  readonly deduplicated: number
  readonly saved: number
}

/** What to mask in a view. */
export interface Plan {
  /** The grid boundary: results before it (and ≥ `from`) are masked. */
  readonly boundary: number
  /** History index → the rewritten message and its tokens. */
  readonly replaced: ReadonlyMap<number, Replacement>
  readonly masked: number
  readonly deduplicated: number
  readonly tokensSaved: number
}

/** What {@link plan} needs besides the history. */
export interface PlanInput {
  /** The window start: only results at or after it are considered. */
  readonly from: number
  readonly options: Options
  readonly grid: Grid
  /** Tokens of a plain text (the references). */
  readonly countText: (text: string) => number
  /** Pressure: mask more results older than the last K until this many more tokens are saved. */
  readonly needTokens?: number | undefined
  /** Pressure: replace repeated identical results by a reference to the first. */
  readonly dedupe?: boolean | undefined
  /** Keep the boundary here (the previous turn's) rather than advancing it: an edit the cache planner defers. */
  readonly holdBoundary?: number | undefined
}

interface Rewrite {
  readonly part: Conversation.ToolResultPart
  readonly saved: number
  readonly dedupe: boolean
}

/** One tool result of a history message, with its share of the message's tokens. */
export interface Result {
  readonly index: number
  readonly part: Conversation.ToolResultPart
  readonly tokens: number
}

/** A tool message's results with their share of its tokens (by text length; images weigh {@link IMAGE_WEIGHT}). */
export const resultsOf = (entry: Entry, index: number): Array<Result> => {
  const parts = entry.message.parts.filter((p): p is Conversation.ToolResultPart => p.type === "tool_result")
  const weights = parts.map((p) => p.content.reduce((n, c) => n + (c.type === "text" ? c.text.length : IMAGE_WEIGHT), 0))
  const total = weights.reduce((a, b) => a + b, 0)
  const body = Math.max(0, entry.tokens - MESSAGE_OVERHEAD)
  return parts.map((part, k) => ({
    index,
    part,
    tokens: parts.length === 1 ? body : Math.round(total === 0 ? body / parts.length : (body * weights[k]!) / total),
  }))
}

const textOf = (part: Conversation.ToolResultPart): string | undefined =>
  part.content.every((c) => c.type === "text") ? part.content.map((c) => (c as Conversation.TextPart).text).join("\n") : undefined

const isRawJson = (part: Conversation.ToolResultPart): boolean => {
  const text = textOf(part)?.trim()
  if (text === undefined || !(text.startsWith("{") || text.startsWith("["))) return false
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null
  } catch {
    return false
  }
}

const nameOf = (history: ReadonlyArray<Entry>, index: number, callId: string): string => {
  const head = Units.headOf(history, index)
  if (head === -1) return "tool"
  for (const p of history[head]!.message.parts) if (p.type === "tool_call" && p.id === callId) return p.name
  return "tool"
}

/**
 * Plans the masking of the results in `[from, history.length)`: the grid
 * boundary for `keep`, then (when asked) de-duplication and pressure
 * masking. Cost: O(window). Deterministic.
 */
export const plan = (history: ReadonlyArray<Entry>, input: PlanInput): Plan => {
  const { from, options, countText } = input
  const n = history.length
  // The results of the newest exchange are not consumed yet: never masked.
  const q = Math.min(keepStart(history, options.keep, from), Units.lastUnitStart(history))
  const bound = input.holdBoundary === undefined ? boundary(input.grid, q) : Math.min(boundary(input.grid, q), input.holdBoundary)
  // callId-keyed rewrites per history index.
  const rewrites = new Map<number, Map<string, Rewrite>>()
  let masked = 0
  let deduplicated = 0
  let tokensSaved = 0
  const rewrite = (r: Result, text: string, dedupe: boolean): boolean => {
    const saved = r.tokens - (RESULT_OVERHEAD + countText(text))
    if (r.tokens < options.minTokens || saved <= 0) return false
    const parts = rewrites.get(r.index) ?? new Map<string, Rewrite>()
    rewrites.set(r.index, parts)
    parts.set(r.part.callId, { part: { ...r.part, content: [{ type: "text", text }] }, saved, dedupe })
    tokensSaved += saved
    if (dedupe) deduplicated++
    else masked++
    return true
  }
  const mask = (r: Result): boolean =>
    rewrite(r, placeholder(nameOf(history, r.index, r.part.callId), r.part.isError, r.tokens, history[r.index]!.seq), false)
  const all: Array<Result> = []
  for (let i = from; i < n; i++) if (history[i]!.message.role === "tool") all.push(...resultsOf(history[i]!, i))
  for (const r of all) if (r.index < bound) mask(r)
  const isRewritten = (r: Result): boolean => rewrites.get(r.index)?.has(r.part.callId) === true
  const referenced = new Set<Result>()
  if (input.dedupe === true) {
    const first = new Map<string, Result>()
    for (const r of all) {
      if (isRewritten(r)) continue
      const text = textOf(r.part)
      if (text === undefined) continue
      const name = nameOf(history, r.index, r.part.callId)
      const key = `${name}\u0000${r.part.isError}\u0000${text}`
      const earlier = first.get(key)
      if (earlier === undefined) first.set(key, r)
      else if (rewrite(r, duplicate(name, history[earlier.index]!.seq), true)) referenced.add(earlier)
    }
  }
  const need = input.needTokens ?? 0
  if (need > 0) {
    const candidates = all
      .filter((r) => r.index < q && !isRewritten(r) && !referenced.has(r) && r.tokens >= options.minTokens)
      .map((r) => ({ r, json: isRawJson(r.part) }))
      .sort((a, b) => Number(b.json) - Number(a.json) || b.r.tokens - a.r.tokens || a.r.index - b.r.index)
    const goal = tokensSaved + need
    for (const { r } of candidates) {
      if (tokensSaved >= goal) break
      mask(r)
    }
  }
  const replaced = new Map<number, Replacement>()
  for (const [index, parts] of rewrites) {
    const entry = history[index]!
    let saved = 0
    let dupes = 0
    for (const p of parts.values()) {
      saved += p.saved
      if (p.dedupe) dupes++
    }
    const message = {
      ...entry.message,
      parts: entry.message.parts.map((p) => (p.type === "tool_result" ? (parts.get(p.callId)?.part ?? p) : p)),
    }
    replaced.set(index, { message, tokens: entry.tokens - saved, masked: parts.size - dupes, deduplicated: dupes, saved })
  }
  return { boundary: bound, replaced, masked, deduplicated, tokensSaved }
}

/**
 * Applies a planned rewrite to a view message (which orphan pruning may
 * have shortened): its results are replaced by call id; other parts stay.
 */
export const apply = (message: Conversation.Message, replacement: Replacement | undefined): Conversation.Message => {
  if (replacement === undefined) return message
  const byCall = new Map<string, Conversation.ToolResultPart>()
  for (const p of replacement.message.parts) if (p.type === "tool_result") byCall.set(p.callId, p)
  return { ...message, parts: message.parts.map((p) => (p.type === "tool_result" ? (byCall.get(p.callId) ?? p) : p)) }
}
