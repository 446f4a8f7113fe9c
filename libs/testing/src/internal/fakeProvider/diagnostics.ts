/**
 * Cache diagnostics as the APIs answer them: each request's fingerprint is
 * kept under its response id; a later request naming that id gets the first
 * place it diverged.
 *
 * - Anthropic (`diagnostics.previous_message_id`,
 *   https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics):
 *   `diagnostics: {cache_miss_reason: {type: model_changed | system_changed |
 *   tools_changed | messages_changed, cache_missed_input_tokens}}`,
 *   `previous_message_not_found` for an unknown id; `null` when the request
 *   asked for none (nothing is recorded then), named no previous message or
 *   nothing diverged (a request that only appends).
 * - OpenAI Responses (`prompt_cache_options.comparison_response_id`):
 *   `prompt_cache_diagnostics` `{type: cache_miss, reason, cache_missed_tokens,
 *   comparison_reusable_tokens}`, `cache_hit` or `comparison_response_not_found`
 *   (the SDK's `Response.CacheMiss | CacheHit | ComparisonResponseNotFound`).
 *
 * The tokens are the fake's own prompt tokens (Anthropic: each block's hash
 * repeated over its tokens, so a divergence is found per block).
 */
import { createHash } from "node:crypto"
import * as Cache from "./cache.ts"
import { isRecord, type Json, stableJson } from "./json.ts"

const unmarked = (value: unknown): string => JSON.stringify(value ?? null, (key, v: unknown) => (key === "cache_control" ? undefined : v))

const hash32 = (key: string): number => createHash("sha1").update(key).digest().readUInt32BE(0)

/** The `diagnostics` of an Anthropic response (`null` also for a request without the field, as the SDK's `Message` says). */
export const anthropic = (caches: Cache.Caches, body: Json, blocks: ReadonlyArray<Cache.PromptBlock>, id: string): Json | null => {
  if (!isRecord(body["diagnostics"])) return null
  const tokens: Array<number> = []
  // only the messages' blocks: system and tools are compared as wholes
  const messages = blocks.slice(blocks.length - messageBlocks(body, blocks))
  for (const block of messages) {
    const h = hash32(block.key)
    for (let i = 0; i < block.tokens; i++) tokens.push(h)
  }
  const fingerprint: Cache.Fingerprint = {
    model: String(body["model"]),
    key: "",
    tools: unmarked(body["tools"]),
    system: unmarked(body["system"]),
    tokens,
  }
  Cache.remember(caches, id, fingerprint)
  const previous = body["diagnostics"]["previous_message_id"]
  if (typeof previous !== "string") return null
  const then = caches.fingerprints.get(previous)
  if (then === undefined) return { cache_miss_reason: { type: "previous_message_not_found" } }
  const { changed, reusable } = Cache.divergence(then, fingerprint)
  if (changed === undefined) return null
  const type = {
    model: "model_changed",
    key: "model_changed",
    tools: "tools_changed",
    system: "system_changed",
    messages: "messages_changed",
  }[changed]
  return { cache_miss_reason: { type, cache_missed_input_tokens: Math.max(0, then.tokens.length - reusable) } }
}

/** How many of `blocks` (the prompt's, tools and system first) are the messages'. */
const messageBlocks = (body: Json, blocks: ReadonlyArray<Cache.PromptBlock>): number => {
  const tools = Array.isArray(body["tools"]) ? body["tools"].length : 0
  const system =
    typeof body["system"] === "string" ? (body["system"] === "" ? 0 : 1) : Array.isArray(body["system"]) ? body["system"].length : 0
  return Math.max(0, blocks.length - tools - system)
}

/**
 * `prompt_cache_diagnostics` of a Responses request that names `prompt_cache_options.comparison_response_id`,
 * recording this response's fingerprint for later ones; undefined when none was asked for.
 */
export const responses = (caches: Cache.Caches, body: Json, tokens: ReadonlyArray<number>, id: string): Json | undefined => {
  const options = isRecord(body["prompt_cache_options"]) ? body["prompt_cache_options"] : undefined
  const fingerprint: Cache.Fingerprint = {
    model: String(body["model"]),
    key: String(body["prompt_cache_key"] ?? ""),
    tools: stableJson(body["tools"] ?? []),
    system: stableJson(body["instructions"] ?? ""),
    tokens,
  }
  Cache.remember(caches, id, fingerprint)
  const compared = options?.["comparison_response_id"]
  if (typeof compared !== "string") return undefined
  const then = caches.fingerprints.get(compared)
  if (then === undefined) return { type: "comparison_response_not_found" }
  const { changed, reusable } = Cache.divergence(then, fingerprint)
  if (changed === undefined) return { type: "cache_hit" }
  // instructions are part of the input to the API: no reason of their own
  const reason = {
    model: "model_changed",
    key: "prompt_cache_key_changed",
    tools: "tools_changed",
    system: "input_changed",
    messages: "input_changed",
  }[changed]
  return { type: "cache_miss", reason, cache_missed_tokens: tokens.length - reusable, comparison_reusable_tokens: reusable }
}
