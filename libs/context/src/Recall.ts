/**
 * Restorable masking: a masked tool result's reference names its handle,
 * the stored sequence number of its message (`[name: ok, N tokens —
 * recall(i)]`, see `Masking.placeholder`), and the
 * virtual `recall({step})` tool brings the original back. ctxd answers the
 * call itself from the stored history (like `load_toolset`, see
 * `Toolsets.answerCalls`): the answer is a new tool result at the end of the
 * conversation, so the masked reference, and the cached prefix before it,
 * stay as they are.
 *
 * The answer is capped at `maxTokens` (the worker passes `maskBatchTokens`,
 * default 2,000) with a note saying so, and it is stored and counted like any
 * other tool result, so it is subject to the budget (and to masking later).
 *
 * When it is offered is the caller's rule (the assembler: from the first
 * prompt that masks something, then for the rest of the session; see
 * {@link replay} for the same rule rebuilt from a stored history).
 */
import type { Conversation } from "@ctxd/contracts"
import * as Masking from "./Masking.ts"
import * as Units from "./Units.ts"

/** Name of the virtual tool. */
export const RECALL = "recall"

/**
 * The virtual `recall` tool; the same object every time (stable schema);
 * `extra.ctxd = "virtual"` keeps it out of schema compression.
 */
export const tool: Conversation.Tool = {
  name: RECALL,
  description:
    "Restore an earlier tool output that was shortened to a reference such as [name: ok, N tokens — recall(i)]: pass i as the step. Returns the original output of that step (very long outputs are cut).",
  inputSchema: {
    type: "object",
    properties: { step: { type: "integer", description: "The step number from the reference" } },
    required: ["step"],
  },
  extra: { ctxd: "virtual" },
}

/** What answering needs: the stored history (seq ascending), the cap and a counter. */
export interface Source {
  readonly history: ReadonlyArray<Masking.Entry>
  /** The answer is cut to about this many tokens (note included). */
  readonly maxTokens: number
  /** Tokens of a plain text. */
  readonly countText: (text: string) => number
}

/** The answer to one `recall` call. */
export interface Answer {
  readonly ok: boolean
  /** The tool result text: the original output(s) with a header line, or an error. */
  readonly text: string
}

/**
 * True when ctxd answers `recall` calls for a request: masking can run
 * (`maskKeep` or `proactiveThreshold` set) and the runtime has no tool of
 * its own named `recall` (the runtime's tool wins: ctxd then neither offers
 * nor answers it).
 */
export const enabled = (
  tools: ReadonlyArray<Conversation.Tool>,
  options: { readonly maskKeep?: number | undefined; readonly proactiveThreshold?: number | undefined },
): boolean => (options.maskKeep !== undefined || options.proactiveThreshold !== undefined) && !tools.some((t) => t.name === RECALL)

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Index of the message with `seq` in a seq-ascending history, or -1. */
const indexOfSeq = (history: ReadonlyArray<Masking.Entry>, seq: number): number => {
  let lo = 0
  let hi = history.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1
    const at = history[mid]!.seq
    if (at === seq) return mid
    if (at < seq) lo = mid + 1
    else hi = mid - 1
  }
  return -1
}

const nameOf = (history: ReadonlyArray<Masking.Entry>, index: number, callId: string): string => {
  const head = Units.headOf(history, index)
  if (head !== -1) for (const p of history[head]!.message.parts) if (p.type === "tool_call" && p.id === callId) return p.name
  return "tool"
}

const contentText = (part: Conversation.ToolResultPart): string =>
  part.content.map((c) => (c.type === "text" ? c.text : "[image]")).join("\n")

const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff

/** No token spans more characters than this (for the cut: a longer text is counted only up to the cap's reach). */
const MAX_CHARS_PER_TOKEN = 16

/**
 * `text` cut to about `maxTokens` tokens, a note included (unchanged when it
 * fits). The note names `total` (default: `text` counted). Only the first
 * `maxTokens × 16` characters are ever counted, so a huge stored output
 * costs no more than a capped one; the cut is found by a few proportional
 * steps (deterministic) and never splits a surrogate pair.
 */
export const cap = (
  text: string,
  maxTokens: number,
  countText: (text: string) => number,
  total?: number,
): { readonly text: string; readonly truncated: boolean } => {
  const reach = Math.max(1, maxTokens) * MAX_CHARS_PER_TOKEN
  const head = text.length > reach ? text.slice(0, reach) : text
  const counted = countText(head)
  if (head === text && counted <= maxTokens) return { text, truncated: false }
  const all = Math.max(total ?? (head === text ? counted : countText(text)), counted)
  const note = `\n[recall: cut to about ${maxTokens} of ${all} tokens; the full output stays stored]`
  const room = Math.max(0, maxTokens - countText(note))
  let chars = Math.floor((head.length * room) / Math.max(1, counted))
  for (let i = 0; i < 8 && chars > 0; i++) {
    const n = countText(head.slice(0, chars))
    if (n <= room) break
    chars = Math.floor(((chars * room) / n) * 0.97)
  }
  if (chars > 0 && isHighSurrogate(head.charCodeAt(chars - 1))) chars--
  return { text: `${head.slice(0, Math.max(0, chars))}${note}`, truncated: true }
}

const HINT = "Pass the step of a masked tool result's reference: i in [name: ok, N tokens — recall(i)]."

/**
 * Answers `recall(args)`: the original tool results stored at step
 * `args.step` (a header line `[Recalled step i: name — ok|error]` per result,
 * then its text; images as `[image]`), capped at `source.maxTokens`. An
 * error (`ok: false`) for a missing or non-integer step, a step with no
 * stored message, or a step that is not a tool result.
 */
export const answer = (args: unknown, source: Source): Answer => {
  const step = isRecord(args) ? args["step"] : undefined
  if (typeof step !== "number" || !Number.isInteger(step)) {
    return { ok: false, text: `Error: missing argument "step" (an integer). ${HINT}` }
  }
  const { history } = source
  const index = indexOfSeq(history, step)
  if (index === -1) return { ok: false, text: `Error: no stored message at step ${step}. ${HINT}` }
  const message = history[index]!.message
  const results = message.parts.filter((p): p is Conversation.ToolResultPart => p.type === "tool_result")
  if (message.role !== "tool" || results.length === 0) {
    return { ok: false, text: `Error: step ${step} is not a tool result (its message has role ${message.role}). ${HINT}` }
  }
  const body = results
    .map((r, k) => {
      const which = results.length === 1 ? "" : `, result ${k + 1} of ${results.length}`
      return `[Recalled step ${step}${which}: ${nameOf(history, index, r.callId)} — ${r.isError ? "error" : "ok"}]\n${contentText(r)}`
    })
    .join("\n\n")
  // the stored count names the whole output without counting a huge one again
  return { ok: true, text: cap(body, source.maxTokens, source.countText, history[index]!.tokens).text }
}

/**
 * The offer rule rebuilt from a stored history (a worker that takes the
 * session over has no record of the prompts sent before): true when the
 * masking grid over the whole history has passed a maskable result (one of
 * at least `minTokens`, older than the last `keep` results and the newest
 * exchange) — what masking would have masked with no window or summary.
 * Monotone: once true for a history, true for every longer one.
 */
export const replay = (history: ReadonlyArray<Masking.Entry>, options: Masking.Options): boolean => {
  const grid = Masking.grid(history, options.batchTokens)
  const q = Math.min(Masking.keepStart(history, options.keep, 0), Units.lastUnitStart(history))
  const bound = Masking.boundary(grid, q)
  for (let i = 0; i < bound; i++) {
    if (history[i]!.message.role !== "tool") continue
    if (Masking.resultsOf(history[i]!, i).some((r) => r.tokens >= options.minTokens)) return true
  }
  return false
}
