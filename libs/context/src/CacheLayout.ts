/**
 * The prompt-cache layout both renderers share: the order of the tools, where
 * the Anthropic `cache_control` breakpoints go and with which TTL, and the
 * OpenAI `prompt_cache_key`. One place, so a change of layout (and so of
 * every cached prefix) is made once.
 *
 * Anthropic caches a prefix up to a breakpoint; the API allows at most
 * {@link MAX_BREAKPOINTS}, and a longer-lived block may not follow a
 * shorter-lived one along tools → system → messages. ctxd marks the last
 * tool, at most two system sections (the last `1h` one and the last cached
 * one after it) and the last block of the last message. What changes every
 * turn — retrieved memory, then the loop nudge — goes after that last
 * breakpoint ({@link tailNotes}).
 */
import type { Conversation } from "@ctxd/contracts"
import { createHash } from "node:crypto"

/** The most `cache_control` breakpoints Anthropic accepts in one request: 4. */
export const MAX_BREAKPOINTS = 4

/**
 * `"name"` (the default): tools sorted by name, so the same set renders the
 * same bytes whatever order the caller sent. `"given"`: as given (on-demand
 * toolsets order them themselves: sorted within groups that only ever get
 * appended, see `Toolsets.selectTools`).
 */
export type ToolOrder = "name" | "given"

/** The tools in the order they are rendered. */
export const orderTools = (tools: ReadonlyArray<Conversation.Tool>, order: ToolOrder | undefined): ReadonlyArray<Conversation.Tool> =>
  order === "given" ? tools : [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))

/** Where the system breakpoints go: indices into the (non-blank) sections, -1 for none. */
export interface SystemMarks {
  /** The section marked with a 1 h TTL. */
  readonly hour: number
  /** The section marked with a 5 min TTL. */
  readonly five: number
}

/**
 * The last `1h` section gets a 1 h mark (only when no `5m` section precedes
 * it: TTLs may not increase along the prompt), and the last cached section
 * after it (or the last cached one at all) a 5 min mark.
 */
export const systemMarks = (sections: ReadonlyArray<Conversation.SystemSection>): SystemMarks => {
  let hour = -1
  for (let i = sections.length - 1; i >= 0; i--) {
    if (sections[i]!.cache === "1h") {
      hour = i
      break
    }
  }
  if (hour !== -1 && sections.slice(0, hour).some((s) => s.cache === "5m")) hour = -1
  let five = -1
  for (let i = sections.length - 1; i > hour; i--) {
    if (sections[i]!.cache !== "none") {
      five = i
      break
    }
  }
  return { hour, five }
}

/** An Anthropic breakpoint's TTL. */
export type Ttl = "1h" | "5m"

/** The TTL of the mark on the last tool: 1 h when a 1 h system block follows, else 5 min. */
export const toolsTtl = (marks: SystemMarks): Ttl => (marks.hour === -1 ? "5m" : "1h")

/** An Anthropic `cache_control` value for `ttl` (a fresh object per mark: no two bodies share one). */
export const cacheControl = (ttl: Ttl): Record<string, unknown> => (ttl === "1h" ? { type: "ephemeral", ttl: "1h" } : { type: "ephemeral" })

// the keys of the sessions rendered last (a turn renders its session's key once per planner candidate)
const recentKeys = new Map<string, string>()

/** OpenAI `prompt_cache_key`: `"ctxd-"` + the first 32 hex digits of sha256(`tenant/session`). */
export const promptCacheKey = (tenant: string, session: string): string => {
  const id = `${tenant}/${session}`
  let key = recentKeys.get(id)
  if (key === undefined) {
    key = `ctxd-${createHash("sha256").update(id).digest("hex").slice(0, 32)}`
    if (recentKeys.size >= 1_024) recentKeys.delete(recentKeys.keys().next().value!)
    recentKeys.set(id, key)
  }
  return key
}

/**
 * The user notes every renderer appends after the view, after the last
 * cache breakpoint, in order: the retrieved memory, then the trailer (a loop
 * nudge); blank ones left out.
 */
export const tailNotes = (input: { readonly memory?: string | undefined; readonly trailer?: string | undefined }): ReadonlyArray<string> =>
  [input.memory, input.trailer].filter((t): t is string => t !== undefined && t.trim() !== "")
