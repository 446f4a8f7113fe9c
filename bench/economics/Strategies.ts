/**
 * The peers' context strategies, simulated on the same turns as ctxd. Each is
 * a pure function: the stored history up to turn t (oldest first) → the
 * messages sent (the system prompt and the tools go out unchanged, rendered
 * by the same renderer as ctxd's, with its breakpoints: tools, system, last
 * message).
 *
 * - {@link full}: the whole history, every turn (doing nothing).
 * - {@link sliding}: the last 40 messages; leading tool results whose call was
 *   cut are dropped, so no orphan pair goes out.
 * - {@link clearToolUses}: Anthropic's server-side context editing
 *   `clear_tool_uses_20250919` (beta `context-management-2025-06-27`) as
 *   documented: when the request's input tokens exceed `trigger` (default
 *   100,000), the results of all but the last `keep` (3) tool uses are
 *   replaced by a placeholder, oldest first; `clear_tool_inputs` (false)
 *   leaves the calls' inputs; `exclude_tools` are never cleared; with
 *   `clear_at_least` set, nothing is cleared unless at least that many tokens
 *   would be. The edit is stateless — it is recomputed from the full history
 *   the client sends on every request — and it happens before the prompt is
 *   cached, so the cache sees the edited prompt. Anthropic does not publish
 *   the placeholder's wording; LangChain's mirror of this edit uses
 *   `[cleared]`, used here.
 * - {@link observationMasking}: "The Complexity Trap" (Lindenbauer et al.,
 *   2025) observation masking, as SWE-agent's `LastNObservations` history
 *   processor with M = 10 and no polling: every turn, the last 10
 *   observations (tool results) stay whole and each older one becomes
 *   `Old environment output: (N lines omitted)`.
 * - {@link trimMessages}: LangChain's `trimMessages({maxTokens: 30_000,
 *   strategy: "last", startOn: "human", includeSystem: true})`: the system
 *   message plus the longest run of newest whole messages whose tokens (with
 *   the system's) fit 30,000, then messages dropped from its old end until it
 *   starts with a human message. When the run holds no human message the
 *   result is empty: LangChain returns no conversation at all (counted by
 *   the bench as an empty view; the request then carries only the system
 *   prompt and the renderer's placeholder user message).
 */
import { CacheBlocks } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"

/** What a strategy may consult besides the history. */
export interface Context {
  /** Tokens of a stored message. */
  readonly tokensOf: (message: Conversation.Message) => number
  /** Tokens of the system prompt. */
  readonly systemTokens: number
  /** Tokens of the tool definitions. */
  readonly toolsTokens: number
}

export type Strategy = (history: ReadonlyArray<Conversation.Message>, context: Context) => ReadonlyArray<Conversation.Message>

/** Doing nothing, and the last 40 messages: the baselines `ctxd replay` prices too (`CacheBlocks`). */
export const full: Strategy = CacheBlocks.full
export const sliding = (n = 40): Strategy => CacheBlocks.sliding(n)

export interface ClearToolUsesConfig {
  /** Input tokens above which the edit applies (default 100,000). */
  readonly trigger?: number | undefined
  /** Newest tool uses whose results stay (default 3). */
  readonly keep?: number | undefined
  /** Clear nothing unless at least this many tokens go (default 0: no minimum). */
  readonly clearAtLeast?: number | undefined
  readonly excludeTools?: ReadonlyArray<string> | undefined
  /** Text of a cleared result (default `[cleared]`). */
  readonly placeholder?: string | undefined
  /** Tokens of the placeholder (default 3). */
  readonly placeholderTokens?: number | undefined
}

/** Anthropic's `clear_tool_uses_20250919`, stateless, on every request (see the module comment). */
export const clearToolUses =
  (config: ClearToolUsesConfig = {}): Strategy =>
  (history, context) => {
    const trigger = config.trigger ?? 100_000
    const keep = config.keep ?? 3
    const placeholder = config.placeholder ?? "[cleared]"
    const exclude = new Set(config.excludeTools ?? [])
    let input = context.systemTokens + context.toolsTokens
    for (const m of history) input += context.tokensOf(m)
    if (input <= trigger) return history
    const uses: Array<{ readonly id: string; readonly name: string }> = []
    for (const m of history) for (const p of m.parts) if (p.type === "tool_call") uses.push({ id: p.id, name: p.name })
    const cleared = new Set(
      uses
        .slice(0, Math.max(0, uses.length - keep))
        .filter((u) => !exclude.has(u.name))
        .map((u) => u.id),
    )
    if (cleared.size === 0) return history
    let freed = 0
    const out = history.map((m) => {
      if (m.role !== "tool" || !m.parts.some((p) => p.type === "tool_result" && cleared.has(p.callId))) return m
      const parts = m.parts.map((p) =>
        p.type === "tool_result" && cleared.has(p.callId) ? { ...p, content: [{ type: "text" as const, text: placeholder }] } : p,
      )
      const edited: Conversation.Message = { ...m, parts }
      freed += context.tokensOf(m) - (config.placeholderTokens ?? 3)
      return edited
    })
    return freed < (config.clearAtLeast ?? 0) ? history : out
  }

const lines = (part: Conversation.ToolResultPart): number => {
  let n = 0
  for (const c of part.content) if (c.type === "text") n += c.text.split("\n").length
  return n
}

/** SWE-agent's `LastNObservations(n = 10)`: older tool results become a one-line note every turn. */
export const observationMasking =
  (keep = 10): Strategy =>
  (history) => {
    let total = 0
    for (const m of history) if (m.role === "tool") total += m.parts.filter((p) => p.type === "tool_result").length
    let index = 0
    return history.map((m) => {
      if (m.role !== "tool") return m
      let changed = false
      const parts = m.parts.map((p) => {
        if (p.type !== "tool_result") return p
        const old = index++ < total - keep
        if (!old) return p
        changed = true
        return { ...p, content: [{ type: "text" as const, text: `Old environment output: (${lines(p)} lines omitted)` }] }
      })
      return changed ? { ...m, parts } : m
    })
  }

/** LangChain `trimMessages` with `strategy: "last"`, `startOn: "human"`, `includeSystem: true`. */
export const trimMessages =
  (maxTokens = 30_000): Strategy =>
  (history, context) => {
    let used = context.systemTokens
    let start = history.length
    while (start > 0 && used + context.tokensOf(history[start - 1]!) <= maxTokens) {
      start--
      used += context.tokensOf(history[start]!)
    }
    while (start < history.length && history[start]!.role !== "user") start++
    return history.slice(start)
  }

/** The peers by name, with the settings. */
export const peers: ReadonlyArray<readonly [string, Strategy]> = [
  ["full history", full],
  ["sliding window 40", sliding(40)],
  ["clear_tool_uses (100k, keep 3)", clearToolUses()],
  ["observation masking M=10", observationMasking(10)],
  ["trimMessages 30k", trimMessages(30_000)],
]
