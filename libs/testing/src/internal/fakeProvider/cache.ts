/**
 * Prompt-cache simulation (enough to measure cache hits, not a model of the
 * providers' infrastructure).
 *
 * Anthropic (explicit breakpoints): the prompt is a list of blocks in the
 * API's processing order (tools, system, messages). Each block's identity is
 * a hash chained over every block before it, so a prefix is "the same" only
 * if all blocks up to it are byte-identical (`cache_control` markers excluded).
 * A request writes one entry per breakpoint whose prefix reaches
 * `minCacheableTokens`, living 5 minutes or 1 hour (refreshed on use). It
 * reads the longest stored prefix ending at a breakpoint or at most
 * `cacheLookbackBlocks - 1` blocks before one. Usage: `cache_read` = tokens of
 * that prefix, `cache_creation` = tokens from there to the last written
 * breakpoint (split by TTL), `input_tokens` = the rest.
 *
 * OpenAI (automatic): per namespace the token sequences of recent prompts
 * (at least 1024 tokens) are kept for 10 minutes (24 h with
 * `prompt_cache_retention: "24h"`). `cached_tokens` = the longest common
 * token prefix with any of them, rounded down to 1024 + k·128, or 0 below 1024.
 *
 * Gemini (implicit): the same prefix store per API key and model, prompts
 * kept for 5 minutes; `cachedContentTokenCount` = the longest common token
 * prefix, or 0 below the model's minimum (no rounding).
 */
import { createHash } from "node:crypto"

export type Ttl = "5m" | "1h"

/** One cacheable unit of an Anthropic prompt. */
export interface PromptBlock {
  /** Canonical content (without `cache_control`). */
  readonly key: string
  readonly tokens: number
  /** Set when the block carries a `cache_control` breakpoint. */
  readonly ttl: Ttl | undefined
}

/** Token split of an Anthropic request's input. */
export interface AnthropicSplit {
  readonly total: number
  readonly input: number
  readonly read: number
  readonly creation5m: number
  readonly creation1h: number
}

const TTL_MS: Record<Ttl, number> = { "5m": 5 * 60_000, "1h": 60 * 60_000 }
const OPENAI_MIN = 1_024
const OPENAI_STEP = 128
const OPENAI_RETENTION_MS = 10 * 60_000
const OPENAI_EXTENDED_MS = 24 * 60 * 60_000
const OPENAI_KEEP = 32

interface Entry {
  expiresAt: number
  readonly ttlMs: number
}

interface OpenAIEntry {
  readonly tokens: Uint32Array
  expiresAt: number
}

/** The mutable cache state of one fake provider. */
export interface Caches {
  readonly anthropic: Map<string, Map<string, Entry>>
  readonly openai: Map<string, Array<OpenAIEntry>>
  readonly gemini: Map<string, Array<OpenAIEntry>>
}

export const makeCaches = (): Caches => ({ anthropic: new Map(), openai: new Map(), gemini: new Map() })

export const clearCaches = (caches: Caches): void => {
  caches.anthropic.clear()
  caches.openai.clear()
  caches.gemini.clear()
}

const chain = (blocks: ReadonlyArray<PromptBlock>): Array<string> => {
  const out: Array<string> = []
  let prev = ""
  for (const block of blocks) {
    prev = createHash("sha256").update(prev).update("\u0000").update(block.key).digest("hex")
    out.push(prev)
  }
  return out
}

/** Splits a request's input tokens into uncached / read / written, and records the writes. */
export const anthropicSplit = (
  caches: Caches,
  namespace: string,
  blocks: ReadonlyArray<PromptBlock>,
  options: { readonly minCacheableTokens: number; readonly lookbackBlocks: number; readonly now: number },
): AnthropicSplit => {
  const total = blocks.reduce((n, b) => n + b.tokens, 0)
  const breakpoints = blocks.flatMap((b, i) => (b.ttl === undefined ? [] : [i]))
  if (breakpoints.length === 0) return { total, input: total, read: 0, creation5m: 0, creation1h: 0 }

  const hashes = chain(blocks)
  const cumulative: Array<number> = []
  blocks.reduce((n, b) => {
    cumulative.push(n + b.tokens)
    return n + b.tokens
  }, 0)
  let store = caches.anthropic.get(namespace)
  if (store === undefined) {
    store = new Map()
    caches.anthropic.set(namespace, store)
  }
  for (const [hash, entry] of store) if (entry.expiresAt <= options.now) store.delete(hash)

  const candidate = new Set<number>()
  for (const b of breakpoints) {
    for (let j = Math.max(0, b - options.lookbackBlocks + 1); j <= b; j++) candidate.add(j)
  }
  let readAt = -1
  for (let j = breakpoints[breakpoints.length - 1]!; j >= 0; j--) {
    const entry = candidate.has(j) ? store.get(hashes[j]!) : undefined
    if (entry !== undefined) {
      entry.expiresAt = options.now + entry.ttlMs
      readAt = j
      break
    }
  }
  const read = readAt < 0 ? 0 : cumulative[readAt]!

  let written = read
  let creation5m = 0
  let creation1h = 0
  for (const b of breakpoints) {
    const upTo = cumulative[b]!
    if (upTo < options.minCacheableTokens) continue
    const ttl = blocks[b]!.ttl!
    const ttlMs = TTL_MS[ttl]
    const existing = store.get(hashes[b]!)
    if (existing === undefined || existing.ttlMs < ttlMs) store.set(hashes[b]!, { expiresAt: options.now + ttlMs, ttlMs })
    else existing.expiresAt = Math.max(existing.expiresAt, options.now + ttlMs)
    if (upTo > written) {
      if (ttl === "1h") creation1h += upTo - written
      else creation5m += upTo - written
      written = upTo
    }
  }
  return { total, input: total - read - creation5m - creation1h, read, creation5m, creation1h }
}

const commonPrefix = (a: Uint32Array, b: Uint32Array): number => {
  const n = Math.min(a.length, b.length)
  let i = 0
  while (i < n && a[i] === b[i]) i++
  return i
}

/**
 * An automatic prefix cache (OpenAI, Gemini's implicit cache): the longest
 * common token prefix with a live earlier prompt of `namespace`, when at
 * least `min` tokens, rounded down by `round`; a hit extends that entry's
 * life, and a prompt of at least `min` tokens is recorded for later ones
 * (the newest {@link OPENAI_KEEP} per namespace).
 */
const prefixCached = (
  store: Map<string, Array<OpenAIEntry>>,
  namespace: string,
  tokens: ReadonlyArray<number>,
  options: { readonly min: number; readonly round: (lcp: number) => number; readonly retentionMs: number; readonly now: number },
): number => {
  const prompt = Uint32Array.from(tokens)
  const kept = (store.get(namespace) ?? []).filter((e) => e.expiresAt > options.now)
  let lcp = 0
  let best: OpenAIEntry | undefined
  for (const entry of kept) {
    const n = commonPrefix(prompt, entry.tokens)
    if (n > lcp) {
      lcp = n
      best = entry
    }
  }
  const cached = lcp < options.min ? 0 : options.round(lcp)
  if (best !== undefined && cached > 0) best.expiresAt = Math.max(best.expiresAt, options.now + options.retentionMs)
  if (prompt.length >= options.min) {
    const same = kept.findIndex((e) => e.tokens.length === prompt.length && commonPrefix(e.tokens, prompt) === prompt.length)
    if (same >= 0) kept.splice(same, 1)
    kept.push({ tokens: prompt, expiresAt: options.now + options.retentionMs })
    if (kept.length > OPENAI_KEEP) kept.splice(0, kept.length - OPENAI_KEEP)
  }
  store.set(namespace, kept)
  return cached
}

/** The cached prompt tokens of an OpenAI request (from 1,024 tokens, in 128-token steps), recording the prompt for later ones. */
export const openaiCached = (
  caches: Caches,
  namespace: string,
  tokens: ReadonlyArray<number>,
  options: { readonly extendedRetention: boolean; readonly now: number },
): number =>
  prefixCached(caches.openai, namespace, tokens, {
    min: OPENAI_MIN,
    round: (lcp) => OPENAI_MIN + Math.floor((lcp - OPENAI_MIN) / OPENAI_STEP) * OPENAI_STEP,
    retentionMs: options.extendedRetention ? OPENAI_EXTENDED_MS : OPENAI_RETENTION_MS,
    now: options.now,
  })

const GEMINI_RETENTION_MS = 5 * 60_000

/** The cached prompt tokens of a Gemini request (implicit caching, from `min` tokens), recording the prompt for later ones. */
export const geminiCached = (
  caches: Caches,
  namespace: string,
  tokens: ReadonlyArray<number>,
  options: { readonly min: number; readonly now: number },
): number =>
  prefixCached(caches.gemini, namespace, tokens, {
    min: options.min,
    round: (lcp) => lcp,
    retentionMs: GEMINI_RETENTION_MS,
    now: options.now,
  })
