/**
 * A prompt-cache simulator: given the requests of a session in time order,
 * each as an ordered list of content blocks (a stable content hash and a
 * token count; for Anthropic, the `cache_control` breakpoints), it computes
 * per request the tokens read from the cache, written to it (per TTL tier)
 * and billed uncached, the way the provider bills them. Pure: the state is
 * a value threaded through {@link step}; {@link simulate} folds a list.
 *
 * **Explicit (Anthropic).** An entry is the exact prefix up to a block that
 * carried a breakpoint, with an expiry. For each breakpoint of a request the
 * block boundaries from the breakpoint back to `lookbackBlocks` (20) blocks
 * before it are checked, newest first, for a live entry; the longest hit over
 * all breakpoints is read. The tokens after the hit up to the last breakpoint
 * are written, each charged at the TTL tier of the first cacheable breakpoint
 * at or after it; the rest (after the last breakpoint, or everything when no
 * breakpoint is cacheable) is uncached input. A breakpoint whose prefix is
 * below `minCacheableTokens` caches nothing. Every breakpoint's entry (and
 * the entry read) gets its expiry set to now + its TTL: reads refresh it.
 *
 * **Automatic (OpenAI, Gemini).** A request at least `minCacheableTokens`
 * long is cached with all its prefixes (at block boundaries) after it is
 * served; a request reads the longest live prefix it shares with any earlier
 * one, rounded down to `minCacheableTokens` + a multiple of `incrementTokens`
 * (OpenAI: 1,024, 1,152, ...). No write premium: new tokens are uncached
 * input. Entries expire `ttlSeconds` after their last use and, with
 * `maxLifetimeSeconds`, that long after they were written.
 *
 * Simplifications (documented, deliberate): prefixes match per whole block
 * (a block that changed counts as a miss from its start, even when its first
 * tokens agree); a cache entry is usable by the next request whatever the gap
 * (no write latency); no eviction under memory pressure, no routing misses
 * (OpenAI requests of one session are assumed to share a `prompt_cache_key`
 * machine, below its ~15 requests/minute overflow); the first tier of the
 * model is used for automatic caching unless another is named.
 */
import type * as CostModel from "./CostModel.ts"

/** One content block of a rendered request. */
export interface Block {
  /** A hash of the block's content without any cache marker: equal hashes = identical blocks. */
  readonly hash: string
  readonly tokens: number
  /** Explicit caching: this block carries a breakpoint with this tier (e.g. `"5m"`, `"1h"`). */
  readonly breakpoint?: string | undefined
}

/** One model call. */
export interface Request {
  /** Seconds since the session started. */
  readonly at: number
  readonly blocks: ReadonlyArray<Block>
  /** Output tokens billed for the reply (copied into the usage). */
  readonly output?: number | undefined
}

/** What the simulator needs of a model (a {@link CostModel.ModelPrices} has all of it). */
export type Policy = Pick<
  CostModel.ModelPrices,
  "mechanism" | "tiers" | "minCacheableTokens" | "incrementTokens" | "maxBreakpoints" | "lookbackBlocks"
> & {
  /** Automatic caching: the tier in effect (e.g. OpenAI `"24h"`); default the first. */
  readonly retention?: string | undefined
}

interface Node {
  readonly children: Map<string, Node>
  /** Expiry of the entry ending at this node (seconds); −∞: no entry. */
  expiresAt: number
  /** When the entry was (re)written; for `maxLifetimeSeconds`. */
  writtenAt: number
  /** Tier of the entry. */
  tier: string
}

/** The cache of one session (opaque). */
export interface State {
  readonly root: Node
  readonly policy: Policy
}

const node = (): Node => ({ children: new Map(), expiresAt: Number.NEGATIVE_INFINITY, writtenAt: 0, tier: "" })

/** An empty cache. */
export const empty = (policy: Policy): State => ({ root: node(), policy })

const tierOf = (policy: Policy, name: string | undefined): CostModel.CacheTier =>
  (name === undefined ? undefined : policy.tiers.find((t) => t.name === name)) ?? policy.tiers[0]!

const live = (policy: Policy, n: Node, at: number): boolean => {
  if (!(at < n.expiresAt)) return false
  const max = tierOf(policy, n.tier).maxLifetimeSeconds
  return max === undefined || at < n.writtenAt + max
}

/** Marks `n` as an entry of `tier`, used at `at`: (re)written when it was not live. */
const touch = (policy: Policy, n: Node, at: number, tier: string): void => {
  if (!live(policy, n, at)) {
    n.writtenAt = at
    n.tier = tier
    n.expiresAt = at + tierOf(policy, tier).ttlSeconds
    return
  }
  // A live entry keeps its write time; a longer tier upgrades it.
  const ttl = Math.max(tierOf(policy, tier).ttlSeconds, tierOf(policy, n.tier).ttlSeconds)
  if (tierOf(policy, tier).ttlSeconds > tierOf(policy, n.tier).ttlSeconds) n.tier = tier
  n.expiresAt = Math.max(n.expiresAt, at + ttl)
}

/** The nodes of a request's prefixes (path[i] ends after block i) and their cumulative tokens. */
const walk = (root: Node, blocks: ReadonlyArray<Block>): { path: Array<Node>; cum: Array<number> } => {
  const path: Array<Node> = []
  const cum: Array<number> = []
  let at = root
  let sum = 0
  for (const b of blocks) {
    let next = at.children.get(b.hash)
    if (next === undefined) {
      next = node()
      at.children.set(b.hash, next)
    }
    sum += b.tokens
    path.push(next)
    cum.push(sum)
    at = next
  }
  return { path, cum }
}

const explicit = (state: State, request: Request): CostModel.Usage => {
  const { policy } = state
  const { blocks, at } = request
  const { path, cum } = walk(state.root, blocks)
  const total = cum.at(-1) ?? 0
  const marks: Array<number> = []
  blocks.forEach((b, i) => {
    if (b.breakpoint !== undefined) marks.push(i)
  })
  if (marks.length > policy.maxBreakpoints) {
    throw new RangeError(`${marks.length} cache breakpoints in one request (at most ${policy.maxBreakpoints})`)
  }
  let hit = -1
  for (const m of marks) {
    for (let j = m; j >= Math.max(0, m - policy.lookbackBlocks) && j > hit; j--) {
      if (live(policy, path[j]!, at)) {
        hit = j
        break
      }
    }
  }
  const read = hit === -1 ? 0 : cum[hit]!
  const cacheable = marks.filter((m) => cum[m]! >= policy.minCacheableTokens)
  const cacheWrite: Record<string, number> = {}
  let writes = 0
  let from = hit
  for (const m of cacheable) {
    if (m <= from) continue
    const tier = tierOf(policy, blocks[m]!.breakpoint).name
    const tokens = cum[m]! - (from === -1 ? 0 : cum[from]!)
    cacheWrite[tier] = (cacheWrite[tier] ?? 0) + tokens
    writes += tokens
    from = m
  }
  if (hit !== -1) touch(policy, path[hit]!, at, path[hit]!.tier)
  for (const m of cacheable) touch(policy, path[m]!, at, tierOf(policy, blocks[m]!.breakpoint).name)
  return { cacheRead: read, cacheWrite, uncached: total - read - writes, output: request.output ?? 0 }
}

const automatic = (state: State, request: Request): CostModel.Usage => {
  const { policy } = state
  const { blocks, at } = request
  let matched = 0
  let n = state.root
  for (const b of blocks) {
    const next = n.children.get(b.hash)
    if (next === undefined || !live(policy, next, at)) break
    matched += b.tokens
    n = next
  }
  const min = policy.minCacheableTokens
  const step = Math.max(1, policy.incrementTokens)
  const read = matched < min ? 0 : min + Math.floor((matched - min) / step) * step
  const { path, cum } = walk(state.root, blocks)
  const tier = tierOf(policy, policy.retention).name
  const total = cum.at(-1) ?? 0
  // A prompt below the minimum is not cached at all; a longer one is, with all its prefixes.
  if (total >= min) for (const p of path) touch(policy, p, at, tier)
  return { cacheRead: read, cacheWrite: {}, uncached: total - read, output: request.output ?? 0 }
}

/**
 * Bills one request against the cache and updates it (the state is mutated
 * in place and also returned, so a fold reads naturally). Requests must come
 * in time order.
 */
export const step = (state: State, request: Request): { readonly state: State; readonly usage: CostModel.Usage } => ({
  state,
  usage: state.policy.mechanism === "explicit" ? explicit(state, request) : automatic(state, request),
})

/** Bills a whole session's requests (time order) on an empty cache. */
export const simulate = (policy: Policy, requests: ReadonlyArray<Request>): Array<CostModel.Usage> => {
  const state = empty(policy)
  return requests.map((r) => step(state, r).usage)
}
