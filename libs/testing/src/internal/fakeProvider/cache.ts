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
 * OpenAI GPT-5.6+ (breakpoints, {@link openaiBreakpoints}): entries are the
 * exact token prefixes ending at a breakpoint — with `prompt_cache_options.mode:
 * "explicit"` the latest four marked ones, else the latest three and one at
 * the end of the prompt (the managed one) — living the request's TTL (30
 * minutes, 12 hours), refreshed on use, the newest 80 kept. A request reads
 * the longest live entry its prompt starts with (no block lookback limit) and
 * writes, billed, the tokens from there to its last written breakpoint
 * (`cache_write_tokens`).
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
  readonly openaiExplicit: Map<string, Array<OpenAIEntry & { readonly ttlMs: number }>>
  readonly gemini: Map<string, Array<OpenAIEntry>>
  /** What cache diagnostics compare a later request with, by response / message id (the newest {@link FINGERPRINTS}). */
  readonly fingerprints: Map<string, Fingerprint>
}

/** A request's structure as diagnostics compare it: model, cache key, tools, system and the prompt's tokens. */
export interface Fingerprint {
  readonly model: string
  readonly key: string
  readonly tools: string
  readonly system: string
  readonly tokens: ReadonlyArray<number>
}

const FINGERPRINTS = 1_000

/** Records `fingerprint` under `id`. */
export const remember = (caches: Caches, id: string, fingerprint: Fingerprint): void => {
  caches.fingerprints.set(id, fingerprint)
  if (caches.fingerprints.size > FINGERPRINTS) caches.fingerprints.delete(caches.fingerprints.keys().next().value!)
}

/** Where `now` first differs from `then`: the first field that changed, and the tokens of `now` before the difference. */
export const divergence = (
  then: Fingerprint,
  now: Fingerprint,
): { readonly changed: "model" | "key" | "tools" | "system" | "messages" | undefined; readonly reusable: number } => {
  if (then.model !== now.model) return { changed: "model", reusable: 0 }
  if (then.key !== now.key) return { changed: "key", reusable: 0 }
  if (then.tools !== now.tools) return { changed: "tools", reusable: 0 }
  if (then.system !== now.system) return { changed: "system", reusable: 0 }
  const lcp = commonPrefix(Uint32Array.from(then.tokens), Uint32Array.from(now.tokens))
  // the previous prompt extended is no divergence: its every token is reused
  return lcp >= then.tokens.length ? { changed: undefined, reusable: lcp } : { changed: "messages", reusable: lcp }
}

export const makeCaches = (): Caches => ({
  anthropic: new Map(),
  openai: new Map(),
  openaiExplicit: new Map(),
  gemini: new Map(),
  fingerprints: new Map(),
})

export const clearCaches = (caches: Caches): void => {
  caches.anthropic.clear()
  caches.openai.clear()
  caches.openaiExplicit.clear()
  caches.gemini.clear()
  caches.fingerprints.clear()
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

/** The `prompt_cache_options.ttl` values, in ms. */
export const OPENAI_TTL_MS: Readonly<Record<string, number>> = { "30m": 30 * 60_000, "12h": 12 * 60 * 60_000 }
const OPENAI_WRITES = 4
const OPENAI_LIVE_BREAKPOINTS = 80

/** The read and billed write of an OpenAI request on a model with explicit caching, recording its breakpoints. */
export const openaiBreakpoints = (
  caches: Caches,
  namespace: string,
  tokens: ReadonlyArray<number>,
  options: { readonly marks: ReadonlyArray<number>; readonly explicit: boolean; readonly ttlMs: number; readonly now: number },
): { readonly cached: number; readonly written: number } => {
  const prompt = Uint32Array.from(tokens)
  const kept = (caches.openaiExplicit.get(namespace) ?? []).filter((e) => e.expiresAt > options.now)
  let best: (typeof kept)[number] | undefined
  for (const entry of kept) {
    if (
      entry.tokens.length > (best?.tokens.length ?? 0) &&
      entry.tokens.length <= prompt.length &&
      commonPrefix(prompt, entry.tokens) === entry.tokens.length
    )
      best = entry
  }
  const cached = best?.tokens.length ?? 0
  if (best !== undefined) best.expiresAt = Math.max(best.expiresAt, options.now + best.ttlMs)
  const marks = [...new Set(options.marks)].sort((a, b) => a - b)
  const writes = options.explicit ? marks.slice(-OPENAI_WRITES) : [...marks.slice(-(OPENAI_WRITES - 1)), prompt.length]
  let written = cached
  for (const at of writes) {
    if (at < OPENAI_MIN) continue
    const same = kept.find((e) => e.tokens.length === at && commonPrefix(e.tokens, prompt) === at)
    if (same !== undefined) same.expiresAt = Math.max(same.expiresAt, options.now + options.ttlMs)
    else kept.push({ tokens: prompt.slice(0, at), expiresAt: options.now + options.ttlMs, ttlMs: options.ttlMs })
    written = Math.max(written, at)
  }
  if (kept.length > OPENAI_LIVE_BREAKPOINTS) kept.splice(0, kept.length - OPENAI_LIVE_BREAKPOINTS)
  caches.openaiExplicit.set(namespace, kept)
  return { cached, written: written - cached }
}

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
