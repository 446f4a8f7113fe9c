/**
 * Rendered request bodies → the cache simulator's blocks, and the token
 * counting the bench shares (tiktoken, the encoding of the model).
 *
 * Anthropic: one block per tool, per system block and per message content
 * block (with its role), in that order — the order the API caches in; a
 * block carrying `cache_control` is a breakpoint of its TTL (`"1h"` or the
 * default `"5m"`). OpenAI: one block per tool, then one per message; no
 * breakpoints. Each block is hashed (SHA-1 of its JSON without
 * `cache_control`) and counted (tiktoken on that JSON), memoized by content.
 */
import type { CacheSim, Models } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import { LocalCounter } from "@ctxd/tokens"
import { createHash } from "node:crypto"

type Json = Record<string, unknown>

/** Token counting under one model's encoding. */
export interface Counting {
  readonly encoding: LocalCounter.Encoding
  readonly text: (text: string) => number
  readonly message: (message: Conversation.Message) => number
  readonly system: (sections: ReadonlyArray<Conversation.SystemSection>) => number
  readonly tools: (tools: ReadonlyArray<Conversation.Tool>) => number
}

const counter = LocalCounter.make({ backend: "tiktoken", cacheCapacity: 200_000 })

/** Counting for `model`; message counts are memoized per message object. */
export const counting = (model: Models.ResolvedModel): Counting => {
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

/** Turns bodies into blocks, memoizing hash and tokens per distinct block text. */
export const converter = (count: Counting): ((body: Json) => Array<CacheSim.Block>) => {
  const memo = new Map<string, { readonly hash: string; readonly tokens: number }>()
  const block = (text: string, breakpoint: string | undefined): CacheSim.Block => {
    let known = memo.get(text)
    if (known === undefined) {
      known = { hash: createHash("sha1").update(text).digest("base64"), tokens: count.text(text) }
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
      out.push(block(`${prefix}:${text}`, breakpoint))
    }
    for (const t of (body["tools"] as Array<Json> | undefined) ?? []) push("tool", t)
    const system = body["system"]
    if (typeof system === "string") out.push(block(`system:${JSON.stringify(system)}`, undefined))
    else for (const s of (system as Array<Json> | undefined) ?? []) push("system", s)
    for (const m of body["messages"] as Array<Json>) {
      const role = String(m["role"])
      const content = m["content"]
      // OpenAI messages (and plain-string content) are one block each.
      if (!Array.isArray(content) || body["prompt_cache_key"] !== undefined) out.push(block(`${role}:${JSON.stringify(m)}`, undefined))
      else for (const b of content as Array<Json>) push(role, b)
    }
    return out
  }
}
