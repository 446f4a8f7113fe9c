/**
 * Rendering a view into an Anthropic Messages request body:
 * `{model, max_tokens, system?, tools?, messages}`.
 *
 * - Roles alternate: `tool` messages become `user` messages of `tool_result`
 *   blocks, and consecutive messages of one role merge into one (results
 *   first, then the other blocks). Pinned `system` messages become extra
 *   system blocks after the sections, in order.
 * - The first message is a user message: when the view starts with an
 *   assistant message (or is empty) a user message
 *   `"(conversation continues)"` is put first — except before an assistant
 *   message that opens with a server-side `compaction` block (a provider
 *   compaction boundary), which the API takes first in `messages`. A
 *   message holding only another format's compaction is skipped.
 * - Anthropic rejects blank text blocks: they are dropped, and a message left
 *   with no blocks gets one text block `"(empty)"`. Trailing whitespace of a
 *   final assistant message is trimmed (the API rejects it).
 * - Opaque Anthropic blocks pass through (misplaced `tool_use`/`tool_result`
 *   blocks are dropped); opaque parts of the other formats become text notes
 *   (Responses reasoning and Gemini thoughts are dropped; Gemini
 *   `thoughtSignature`s are not sent).
 * - Thinking (`thinking`, `redacted_thinking`: {@link Reasoning}) stays in
 *   its assistant message, unmodified and in order; in a user message it is
 *   dropped (the API accepts it only from the assistant), and so are thinking
 *   blocks left with nothing after them in their message (their tool call
 *   removed as an orphan: thinking leads to output). When a run of
 *   assistant messages merges and a later one starts with thinking while the
 *   merged message does not, that thinking goes first (with `thinking`
 *   enabled the API wants a tool-use continuation's final assistant message
 *   to start with a thinking block).
 * - Without tool definitions (none given, or only hosted tools of another
 *   format) the API refuses `tool_use` / `tool_result` blocks: calls and
 *   results then go as text (`[called get_user {"id":"u1"}]`,
 *   `[result of get_user: …]`), so the model still reads what happened.
 * - Tool use ids are unique in the body: a reused id (allowed once the
 *   earlier call was answered) gets a suffix `_2`, `_3`, ... in its call and
 *   its results.
 * - Prompt caching: the layout of `CacheLayout` (tool order, at most 4
 *   `cache_control` breakpoints, TTLs non-increasing along tools → system →
 *   messages).
 */
import type { Conversation } from "@ctxd/contracts"
import * as CacheLayout from "../../CacheLayout.ts"
import * as Foreign from "../../internal/foreign.ts"
import * as ProviderCompaction from "../../ProviderCompaction.ts"
import type * as Models from "../../Models.ts"
import * as MidSystem from "../../MidSystem.ts"
import * as Reasoning from "../../Reasoning.ts"
import * as ToolSearch from "../../ToolSearch.ts"

/** What to render. */
export interface RenderInput {
  readonly model: Models.ResolvedModel
  readonly system: ReadonlyArray<Conversation.SystemSection>
  readonly tools: ReadonlyArray<Conversation.Tool>
  /** The view, oldest first, already free of orphans. */
  readonly messages: ReadonlyArray<Conversation.Message>
  /**
   * A note for the model appended after the view as user text (a loop
   * nudge): not stored, and after the last cache breakpoint so the cached
   * prefix is untouched.
   */
  readonly trailer?: string | undefined
  /**
   * Memory retrieved for this turn (`MemoryRetrieval`): like the trailer, user
   * text after the view and after the last cache breakpoint, in a block
   * (part, message) of its own before the trailer. It changes every turn,
   * so it never sits in the cached prefix.
   */
  readonly memory?: string | undefined
  /**
   * Leading messages the next prompt edit will not change (the cache
   * planner's frontier: those before the mask boundary). When a breakpoint
   * is left, the last block of message `stable − 1` is marked too, so an edit
   * after it rewrites only what follows it.
   */
  readonly stable?: number | undefined
  /** `"name"` (default) or `"given"`: see {@link CacheLayout.ToolOrder}. */
  readonly toolOrder?: CacheLayout.ToolOrder | undefined
  /**
   * The TTL of the conversation's breakpoints (default `"5m"`). `"1h"`
   * marks every breakpoint `1h` (TTLs may not decrease along the prompt:
   * the system's and the tools' marks are raised with it).
   */
  readonly ttl?: CacheLayout.Ttl | undefined
}

/** A rendered body and the number of cache breakpoints in it. */
export interface Rendered {
  readonly body: Record<string, unknown>
  readonly breakpoints: number
}

type Block = Record<string, unknown>

/** The user message put first when a view does not start with one. */
export const CONTINUES = "(conversation continues)"
/** The text of a message that has no renderable content. */
export const EMPTY = "(empty)"

/** Blocks that accept `cache_control`. */
const CACHEABLE: ReadonlySet<string> = new Set(["text", "image", "tool_use", "tool_result", "document", "compaction"])
/** Tool blocks we normalize ourselves; an opaque one is misplaced and would break pairing. */
const MISPLACED: ReadonlySet<string> = new Set(["tool_use", "tool_result"])

const isBlank = (text: string): boolean => text.trim() === ""

/** An image part as an Anthropic `image` block. */
export const image = (part: Conversation.ImagePart): Block => ({
  type: "image",
  source:
    part.source.kind === "base64"
      ? { type: "base64", media_type: part.source.mediaType, data: part.source.data }
      : { type: "url", url: part.source.url },
})

/**
 * Anthropic wants tool_use ids unique in a request, but agents reuse ids once
 * answered: the renames (`id` → `id_2`, ...) for `message`'s calls, given
 * the ids `used` so far (which it extends). Apply them to the calls and to
 * their results, which follow directly in a pruned view.
 */
export const uniqueCallIds = (message: Conversation.Message, used: Set<string>): Map<string, string> => {
  const ids = new Map<string, string>()
  for (const p of message.parts) {
    if (p.type !== "tool_call") continue
    let id = p.id
    for (let k = 2; used.has(id); k++) id = `${p.id}_${k}`
    used.add(id)
    if (id !== p.id) ids.set(p.id, id)
  }
  return ids
}

/** A tool result part as a `tool_result` block (`ids` renames reused call ids). */
export const resultBlock = (part: Conversation.ToolResultPart, ids: ReadonlyMap<string, string>): Block => {
  const content: Array<Block> = []
  for (const c of part.content) {
    if (c.type === "image") content.push(image(c))
    else if (!isBlank(c.text)) content.push({ type: "text", text: c.text })
  }
  const block: Block = { type: "tool_result", tool_use_id: ids.get(part.callId) ?? part.callId }
  if (content.length > 0) block["content"] = content
  if (part.isError) block["is_error"] = true
  return block
}

/**
 * Appends the blocks of one part of a `role` message; results go to
 * `results`, the rest to `others`. `ids` renames the call ids of the current unit.
 */
const addPart = (
  part: Conversation.Part,
  role: Conversation.Message["role"],
  ids: ReadonlyMap<string, string>,
  results: Array<Block>,
  others: Array<Block>,
): void => {
  switch (part.type) {
    case "text":
      if (!isBlank(part.text)) others.push({ type: "text", text: part.text })
      return
    case "image":
      others.push(image(part))
      return
    case "tool_call":
      others.push({
        type: "tool_use",
        id: ids.get(part.id) ?? part.id,
        name: part.name,
        input: Foreign.isRecord(part.input) ? part.input : {},
      })
      return
    case "tool_result":
      results.push(resultBlock(part, ids))
      return
    case "opaque": {
      if (part.format === "anthropic") {
        if (Reasoning.isReasoning(part) && role !== "assistant") return
        if (!MISPLACED.has(Foreign.blockType(part))) others.push(Foreign.copyBlock(part))
        return
      }
      const text = Foreign.note(part)
      if (text !== undefined && !isBlank(text)) others.push({ type: "text", text })
      return
    }
  }
}

const isThinking = (block: Block | undefined): boolean =>
  block !== undefined && (block["type"] === "thinking" || block["type"] === "redacted_thinking")

/**
 * Appends one assistant message's blocks to its (merged) message: thinking
 * with nothing after it in its message is dropped, and a leading run of
 * thinking goes first when the merged message does not start with thinking.
 */
const placeThinking = (merged: Array<Block>, blocks: Array<Block>): void => {
  while (isThinking(blocks.at(-1))) blocks.pop()
  let lead = 0
  while (lead < blocks.length && isThinking(blocks[lead])) lead++
  if (lead > 0 && merged.length > 0 && !isThinking(merged[0])) {
    merged.unshift(...blocks.slice(0, lead))
    merged.push(...blocks.slice(lead))
  } else merged.push(...blocks)
}

/**
 * `message` with its tool calls and results as text (for a prompt without
 * tool definitions, where the API refuses tool blocks): a call becomes
 * `[called <name> <arguments JSON>]`, a result `[result of <name>: <text>]`
 * (`[error from <name>: …]`) with its images kept; a `tool` message becomes a
 * user message. `names` collects call ids → names along the view.
 */
const toolsAsText = (message: Conversation.Message, names: Map<string, string>): Conversation.Message => {
  if (!message.parts.some((p) => p.type === "tool_call" || p.type === "tool_result")) return message
  const parts = message.parts.flatMap((p): Array<Conversation.Part> => {
    if (p.type === "tool_call") {
      names.set(p.id, p.name)
      return [{ type: "text", text: `[called ${p.name} ${p.arguments ?? JSON.stringify(p.input ?? {})}]` }]
    }
    if (p.type !== "tool_result") return [p]
    const name = names.get(p.callId) ?? p.callId
    const text = p.content.flatMap((c) => (c.type === "text" ? [c.text] : [])).join("\n")
    const images = p.content.filter((c) => c.type === "image")
    return [{ type: "text", text: `[${p.isError ? "error from" : "result of"} ${name}: ${text}]` }, ...images]
  })
  return { role: message.role === "tool" ? "user" : message.role, parts }
}

interface Draft {
  readonly role: "user" | "assistant" | "system"
  readonly results: Array<Block>
  readonly others: Array<Block>
}

/** Renders `input` into an Anthropic Messages request body. */
/**
 * The tool search tool ctxd adds on models with `toolSearch`: the BM25
 * variant, as the model searches an MCP catalog by what a tool does rather
 * than by a name pattern; both variants serve the same models
 * (https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool).
 */
export const searchTool: Conversation.Tool = {
  name: "tool_search_tool_bm25",
  inputSchema: undefined,
  extra: { ctxd: "virtual", [ToolSearch.SEARCH]: "tool_search_tool_bm25_20251119" },
}

/** A tool definition block: the search tool as its `{type, name}`, a deferred tool with `defer_loading: true`. */
const toolBlock = (t: Conversation.Tool): Block => {
  if (ToolSearch.isSearchTool(t)) return { type: t.extra![ToolSearch.SEARCH], name: t.name }
  const block: Block = { name: t.name }
  if (t.description !== undefined) block["description"] = t.description
  block["input_schema"] = Foreign.isRecord(t.inputSchema) ? t.inputSchema : { type: "object", properties: {} }
  if (ToolSearch.isDeferred(t)) block["defer_loading"] = true
  return block
}

export const render = (input: RenderInput): Rendered => {
  let breakpoints = 0

  // System: sections, then pinned system messages.
  const sections = input.system.filter((s) => !isBlank(s.text))
  const marks = CacheLayout.systemMarks(sections)
  const ttl = input.ttl ?? "5m"
  const system: Array<Block> = sections.map((s, i) => {
    const block: Block = { type: "text", text: s.text }
    if (i === marks.hour) block["cache_control"] = CacheLayout.cacheControl("1h")
    else if (i === marks.five) block["cache_control"] = CacheLayout.cacheControl(ttl)
    return block
  })
  breakpoints += (marks.hour === -1 ? 0 : 1) + (marks.five === -1 ? 0 : 1)

  // Messages: merge runs of one role; reused tool ids renamed (uniqueCallIds).
  const drafts: Array<Draft> = []
  const used = new Set<string>()
  let ids = new Map<string, string>()
  let frontier: Block | undefined
  // without tool definitions the API refuses tool blocks: calls and results then go as text
  const toolless = !input.tools.some((t) => !Foreign.isHosted(t))
  const callNames = new Map<string, string>()
  for (const [k, given] of input.messages.entries()) {
    const message = toolless ? toolsAsText(given, callNames) : given
    // a message that is only another format's compaction renders to nothing: no "(empty)" turn for it
    if (message.parts.length > 0 && message.parts.every((p) => (ProviderCompaction.formatOf(p) ?? "anthropic") !== "anthropic")) continue
    if (message.role === "assistant") ids = uniqueCallIds(message, used)
    // a mid-conversation system message stands where it is, right after a user turn (else it reads as user text there)
    if (MidSystem.isMid(message) && drafts.at(-1)?.role === "user") {
      drafts.push({
        role: "system",
        results: [],
        others: message.parts.flatMap((p) => (p.type === "text" ? [{ type: "text", text: p.text }] : [])),
      })
      continue
    }
    if (message.role === "system" && !MidSystem.isMid(message)) {
      for (const p of message.parts) if (p.type === "text" && !isBlank(p.text)) system.push({ type: "text", text: p.text })
      continue
    }
    const role = message.role === "assistant" ? "assistant" : "user"
    let draft = drafts.at(-1)
    if (draft === undefined || draft.role !== role) {
      draft = { role, results: [], others: [] }
      drafts.push(draft)
    }
    const before = draft.results.length + draft.others.length
    const others: Array<Block> = []
    for (const p of message.parts) addPart(p, message.role, ids, draft.results, others)
    if (role === "assistant") placeThinking(draft.others, others)
    else draft.others.push(...others)
    if (k === (input.stable ?? 0) - 1 && draft.results.length + draft.others.length > before) {
      const added = message.role === "tool" ? draft.results.at(-1) : draft.others.at(-1)
      frontier = added !== undefined && CACHEABLE.has(String(added["type"])) ? added : undefined
    }
  }
  const opensWithCompaction = drafts[0]?.role === "assistant" && drafts[0].others[0]?.["type"] === "compaction"
  if (drafts[0]?.role !== "user" && !opensWithCompaction)
    drafts.unshift({ role: "user", results: [], others: [{ type: "text", text: CONTINUES }] })
  const messages = drafts.map((d) => {
    const content = d.results.length === 0 ? d.others : d.results.concat(d.others)
    return { role: d.role, content }
  })
  const last = messages.at(-1)!
  if (last.role === "assistant") {
    const tail = last.content.at(-1)
    if (tail !== undefined && tail["type"] === "text" && typeof tail["text"] === "string") {
      const text = tail["text"].trimEnd()
      if (text === "") last.content.pop()
      else last.content[last.content.length - 1] = { ...tail, text }
    }
  }
  for (const m of messages) if (m.content.length === 0) m.content.push({ type: "text", text: EMPTY })
  for (let i = last.content.length - 1; i >= 0; i--) {
    const block = last.content[i]!
    if (CACHEABLE.has(String(block["type"]))) {
      block["cache_control"] = CacheLayout.cacheControl(ttl)
      breakpoints++
      break
    }
  }
  for (const text of CacheLayout.tailNotes(input)) {
    const note = { type: "text", text }
    const tail = messages.at(-1)!
    if (tail.role === "user") tail.content.push(note)
    else messages.push({ role: "user", content: [note] })
  }

  const tools: Array<Block> = CacheLayout.orderTools(
    input.tools.filter((t) => !Foreign.isHosted(t)),
    input.toolOrder,
  ).map(toolBlock)
  // deferred tools are no part of the cached prefix: the breakpoint goes on the last tool that is
  const cached = tools.findLastIndex((t) => t["defer_loading"] !== true)
  if (cached !== -1) {
    tools[cached]!["cache_control"] = CacheLayout.cacheControl(ttl === "1h" ? "1h" : CacheLayout.toolsTtl(marks))
    breakpoints++
  }
  if (frontier !== undefined && frontier["cache_control"] === undefined && breakpoints < CacheLayout.MAX_BREAKPOINTS) {
    frontier["cache_control"] = CacheLayout.cacheControl(ttl)
    breakpoints++
  }

  const body: Record<string, unknown> = { model: input.model.name, max_tokens: input.model.maxOutputTokens }
  if (system.length > 0) body["system"] = system
  if (tools.length > 0) body["tools"] = tools
  body["messages"] = messages
  return { body, breakpoints }
}
