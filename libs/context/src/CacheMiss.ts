/**
 * Cache misses explained: the prompt tokens that were cached before (the
 * session's previous prompt) or that ctxd expected the provider to read, and
 * were not read, each attributed to one cause:
 *
 * - `ctxd_edit`: ctxd changed the prefix itself, with its reason (the turn's
 *   `report.cache.reason`: `window`, `mask` — reasoning left out counts as
 *   one —, `budget`, `summary`, `knowledge`; `system` / `tools` when what ctxd
 *   adds there changed: memory, learnings, a loaded toolset, the compression
 *   rung);
 * - `ttl_expiry`: more time passed since the previous prompt than its TTL
 *   (ctxd's own clock: the planner's `ttl_expired`);
 * - `client_change`: the runtime changed what ctxd does not own — its system
 *   prompt or tools (ctxd compares a digest of them with the previous
 *   turn's), or, by the provider's diagnostics, the model or the body ctxd
 *   rendered (a divergence where ctxd made none);
 * - `unknown`: none of these can be told: a shortfall the provider's
 *   diagnostics do not explain (no divergence: expiry, eviction or routing),
 *   or without diagnostics.
 *
 * Two moments: {@link expected} at the turn, from ctxd's own knowledge (the
 * report's `cache.miss`); {@link billed} at the usage report, which adds the
 * shortfall below the expectation the provider billed, explained by its
 * diagnostics when the report carries them (`ctxd_cache_miss_tokens_total`).
 */
import type { Conversation } from "@ctxd/contracts"
import { createHash } from "node:crypto"
import type * as CacheDiagnostics from "./providers/CacheDiagnostics.ts"

/** Why prompt tokens were not read from the cache. */
export type Cause = "ctxd_edit" | "ttl_expiry" | "client_change" | "unknown"

/** Tokens missed for one cause. */
export interface Miss {
  readonly cause: Cause
  readonly tokens: number
  /** ctxd's edit (`window`, `mask`, ...), what the client changed (`system`, `tools`, `model`, `messages`, ...), or the diagnosis. */
  readonly reason?: string | undefined
}

/** Reasons of `report.cache.reason` that only ctxd's own edits produce. */
const EDITS: ReadonlySet<string> = new Set(["window", "mask", "budget", "summary", "knowledge"])

/** What a turn knows about its prompt and the previous one. */
export interface TurnFacts {
  /** Tokens of the session's previous prompt (undefined: none; its tokens were cached before). */
  readonly previousTokens: number | undefined
  /** Tokens the provider should read this turn (`report.cache.expectedReadTokens`). */
  readonly expectedReadTokens: number
  /** Why the prefix changed where it did (`report.cache.reason`). */
  readonly reason: string | undefined
  /** The client's own system prompt or tools differ from the previous turn's (undefined: not known). */
  readonly clientChanged: boolean | undefined
  /** Prompts below this were not cached (the model's minimum cacheable prefix). */
  readonly minCacheableTokens: number
}

/** The previous prompt's tokens this prompt will not read, and why (undefined: none). */
export const expected = (facts: TurnFacts): Miss | undefined => {
  const previous = facts.previousTokens
  if (previous === undefined || previous < facts.minCacheableTokens) return undefined
  const tokens = Math.max(0, Math.round(previous - facts.expectedReadTokens))
  if (tokens === 0) return undefined
  const reason = facts.reason
  if (reason === "ttl_expired") return { cause: "ttl_expiry", tokens }
  if (reason === "system" || reason === "tools") {
    const cause = facts.clientChanged === true ? "client_change" : facts.clientChanged === false ? "ctxd_edit" : "unknown"
    return { cause, tokens, reason }
  }
  if (reason !== undefined && EDITS.has(reason)) return { cause: "ctxd_edit", tokens, reason }
  // an append that reads less than the previous prompt (it fell below the minimum, or the view changed)
  return { cause: "unknown", tokens, ...(reason === undefined ? {} : { reason }) }
}

/** What a usage report adds: the billed read against the turn's expectation, in the provider's tokens. */
export interface BilledFacts {
  /** The turn's expected miss, if any (ctxd's tokens). */
  readonly expected: Miss | undefined
  /** ctxd's tokens → the provider's (billed prompt / estimated prompt). */
  readonly scale: number
  /** The turn's expected read, in the provider's tokens. */
  readonly expectedReadTokens: number
  readonly billedReadTokens: number
  /** The billed read is below the expectation's tolerance (`CacheCheck`'s `unexpected` break). */
  readonly unexpected: boolean
  /** The provider's diagnostics, when the report carried them. */
  readonly diagnosis?: CacheDiagnostics.Diagnosis | undefined
}

/** Every missed token of a billed turn, by cause: the turn's expected miss, then the unexpected shortfall. */
export const billed = (facts: BilledFacts): ReadonlyArray<Miss> => {
  const misses: Array<Miss> = []
  if (facts.expected !== undefined) {
    const tokens = Math.round(facts.expected.tokens * facts.scale)
    if (tokens > 0) misses.push({ ...facts.expected, tokens })
  }
  const short = Math.max(0, Math.round(facts.expectedReadTokens - facts.billedReadTokens))
  if (facts.unexpected && short > 0) misses.push(unexplained(short, facts.diagnosis))
  return misses
}

/** A shortfall ctxd did not expect: the client's change when the provider saw a divergence ctxd did not make. */
const unexplained = (tokens: number, diagnosis: CacheDiagnostics.Diagnosis | undefined): Miss => {
  if (diagnosis === undefined) return { cause: "unknown", tokens }
  if (diagnosis.kind === "diverged") return { cause: "client_change", tokens, reason: diagnosis.at }
  return { cause: "unknown", tokens, reason: diagnosis.kind }
}

const clientKeys = new WeakMap<object, WeakMap<object, string>>()

/**
 * A digest of the system prompt and tools as the client sent them (before
 * ctxd adds memory, learnings, toolsets or compresses), once per pair of
 * arrays: a change from the previous turn's is the client's.
 */
export const clientKey = (system: ReadonlyArray<Conversation.SystemSection>, tools: ReadonlyArray<Conversation.Tool>): string => {
  let byTools = clientKeys.get(system)
  if (byTools === undefined) clientKeys.set(system, (byTools = new WeakMap()))
  let key = byTools.get(tools)
  if (key === undefined) {
    const hash = createHash("sha1")
    for (const s of system) hash.update(s.text).update("\u0000")
    hash.update("\u0001")
    for (const t of tools) hash.update(JSON.stringify([t.name, t.description ?? null, t.inputSchema ?? null])).update("\u0000")
    key = hash.digest("hex").slice(0, 16)
    byTools.set(tools, key)
  }
  return key
}
