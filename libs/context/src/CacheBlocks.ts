/**
 * Rendered request bodies → the cache simulator's blocks (`CacheSim`), and
 * the token counting that goes with them; shared by the economics bench and
 * `ctxd replay`.
 *
 * Anthropic: one block per tool, per system block and per message content
 * block (with its role), in that order — the order the API caches in; a
 * block carrying `cache_control` is a breakpoint of its TTL (`"1h"` or the
 * default `"5m"`). OpenAI (a body with `prompt_cache_key`, or string
 * content): one block per tool, then one per message; no breakpoints. Each
 * block is hashed (SHA-1 of its JSON without `cache_control`) and counted
 * by its content (the counter's encoding on its strings, see
 * `contentTokens`), memoized by content. OpenAI
 * Responses (`instructions`, `input`) and Gemini (`systemInstruction`,
 * `contents`) bodies: the instructions one block, then one per item.
 * Anthropic tool search: a deferred tool (`defer_loading`) is no block of the
 * prefix; each tool a `tool_search_tool_result` references is a block right
 * after it (the API appends the definition there).
 *
 * Also the two baselines a replay prices ctxd against: {@link full} (send
 * everything) and {@link sliding} (the last 40 messages).
 */
import type { Conversation } from "@ctxd/contracts"
import { createHash } from "node:crypto"
import type * as CacheSim from "./CacheSim.ts"

type Json = Record<string, unknown>

/** Token counting under one model's encoding. */
export interface Counting {
  readonly encoding: string
  readonly text: (text: string) => number
  readonly message: (message: Conversation.Message) => number
  readonly system: (sections: ReadonlyArray<Conversation.SystemSection>) => number
  readonly tools: (tools: ReadonlyArray<Conversation.Tool>) => number
}

/** What {@link counting} needs of a local counter (`@ctxd/tokens` `LocalCounter` has it). */
export interface Counter<E extends string> {
  readonly encodingFor: (model: { readonly provider: string; readonly name: string }) => E
  readonly countText: (text: string, encoding: E) => number
  readonly countMessage: (message: Conversation.Message, encoding: E) => number
  readonly countSystem: (sections: ReadonlyArray<Conversation.SystemSection>, encoding: E) => number
  readonly countTools: (tools: ReadonlyArray<Conversation.Tool>, encoding: E) => number
}

/** Counting for `model` with `counter`; message counts are memoized per message object. */
export const counting = <E extends string>(
  counter: Counter<E>,
  model: { readonly provider: string; readonly name: string },
): Counting & { readonly encoding: E } => {
  const encoding = counter.encodingFor(model)
  const messages = new WeakMap<Conversation.Message, number>()
  return {
    encoding,
    text: (text) => counter.countText(text, encoding),
    message: (message) => {
      let n = messages.get(message)
      if (n === undefined) {
        n = counter.countMessage(message, encoding)
        messages.set(message, n)
      }
      return n
    },
    system: (sections) => counter.countSystem(sections, encoding),
    tools: (tools) => counter.countTools(tools, encoding),
  }
}

/**
 * OpenAI messages hashed without their `prompt_cache_breakpoint`s, and a content of
 * text parts only as its text: marking a message (which turns a string content into
 * one marked part) changes no token of the prompt, so it must not look like an edit.
 */
const unmarkedOpenAI = (key: string, value: unknown): unknown => {
  if (key === "prompt_cache_breakpoint") return undefined
  if ((key === "content" || key === "output") && Array.isArray(value)) {
    const parts = value as Array<Json>
    if (parts.every((p) => (p["type"] === "text" || p["type"] === "input_text") && typeof p["text"] === "string"))
      return parts.map((p) => p["text"] as string).join("")
  }
  return value
}

/** Turns bodies into blocks, memoizing hash and tokens per distinct block text. */
export const converter = (count: Pick<Counting, "text">): ((body: Json) => Array<CacheSim.Block>) => {
  const memo = new Map<string, { readonly hash: string; readonly tokens: number }>()
  const block = (kind: string, json: string, breakpoint: string | undefined): CacheSim.Block => {
    const text = `${kind}:${json}`
    let known = memo.get(text)
    if (known === undefined) {
      known = { hash: createHash("sha1").update(text).digest("base64"), tokens: contentTokens(count, kind, json) }
      memo.set(text, known)
    }
    return breakpoint === undefined ? known : { ...known, breakpoint }
  }
  const plain = (b: Json): { text: string; breakpoint: string | undefined } => {
    const { cache_control: mark, ...rest } = b
    const ttl = mark === undefined ? undefined : (mark as Json)["ttl"] === "1h" ? "1h" : "5m"
    return { text: JSON.stringify(rest), breakpoint: ttl }
  }
  return (body) => {
    const out: Array<CacheSim.Block> = []
    const push = (prefix: string, b: Json): void => {
      const { text, breakpoint } = plain(b)
      out.push(block(prefix, text, breakpoint))
    }
    // a deferred tool (tool search) is no part of the prefix: its definition counts where a search result references it
    const deferred = new Map<string, Json>()
    for (const t of (body["tools"] as Array<Json> | undefined) ?? []) {
      if (t["defer_loading"] === true) deferred.set(String(t["name"]), t)
      else push("tool", t)
    }
    const loaded = (b: Json): void => {
      const refs =
        b["type"] === "tool_search_tool_result"
          ? ((b["content"] as Json | undefined)?.["tool_references"] as Array<Json> | undefined)
          : undefined
      for (const ref of refs ?? []) {
        const tool = deferred.get(String(ref["tool_name"]))
        if (tool !== undefined) out.push(block("loaded", JSON.stringify(tool), undefined))
      }
    }
    const system = body["system"]
    if (typeof system === "string") out.push(block("system", JSON.stringify(system), undefined))
    else if (system === undefined && (body["instructions"] ?? body["systemInstruction"]) !== undefined) {
      out.push(block("system", JSON.stringify(body["instructions"] ?? body["systemInstruction"]), undefined))
    } else for (const s of (system as Array<Json> | undefined) ?? []) push("system", s)
    const items = (body["messages"] ?? body["input"] ?? body["contents"] ?? []) as Array<Json>
    for (const m of items) {
      const role = String(m["role"] ?? m["type"])
      const content = m["content"]
      // OpenAI messages (and plain-string content) are one block each.
      if (!Array.isArray(content) || body["prompt_cache_key"] !== undefined)
        out.push(block(role, JSON.stringify(m, unmarkedOpenAI), undefined))
      else
        for (const b of content as Array<Json>) {
          push(role, b)
          loaded(b)
        }
    }
    return out
  }
}

/**
 * A block's tokens as the provider bills them, by the rules the local
 * counter plans with (`LocalCounter`, calibrated against billed usage): a
 * tool definition as its JSON; any other block by its content — its
 * strings and keys, unescaped, each counted, a tool call's `input` (or
 * OpenAI `arguments`) as its JSON. Counting every block's JSON text counted
 * the escapes (`\\n`, `\\"`), quotes and braces of the wire format as
 * tokens — up to a fifth more than the content on SWE-agent tool output —
 * so near a minimum cacheable prefix the simulated prompt crossed the
 * minimum turns before the planned one.
 */
const contentTokens = (count: Pick<Counting, "text">, kind: string, json: string): number => {
  // a tool definition, in the list or loaded by a search, counts as the JSON the provider reads
  if (kind === "tool" || kind === "loaded") return count.text(json)
  let tokens = 0
  const visit = (value: unknown): void => {
    if (typeof value === "string") tokens += count.text(value)
    else if (Array.isArray(value)) value.forEach(visit)
    else if (value !== null && typeof value === "object")
      for (const [key, v] of Object.entries(value)) {
        tokens += count.text(key)
        if (key === "input" && typeof v === "object") tokens += count.text(JSON.stringify(v))
        else visit(v)
      }
    else if (value !== null && value !== undefined) tokens += count.text(String(value))
  }
  visit(JSON.parse(json))
  return tokens
}

/** A baseline context strategy: the stored history up to a turn (oldest first) → the messages sent. */
export type Strategy = (history: ReadonlyArray<Conversation.Message>) => ReadonlyArray<Conversation.Message>

/** Doing nothing: the whole history, every turn. */
export const full: Strategy = (history) => history

/** Drops leading messages that answer calls outside the view (tool results first in a view are orphans). */
const dropLeadingResults = (view: ReadonlyArray<Conversation.Message>): ReadonlyArray<Conversation.Message> => {
  let start = 0
  while (start < view.length && view[start]!.role === "tool") start++
  return start === 0 ? view : view.slice(start)
}

/** The last `n` (40) messages, repaired so no tool result goes out without its call. */
export const sliding =
  (n = 40): Strategy =>
  (history) =>
    dropLeadingResults(history.length <= n ? history : history.slice(history.length - n))
