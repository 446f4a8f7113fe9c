/**
 * The price of a model call: a table per provider and model family of base
 * input and output prices, the cache read discount, the cache write premium
 * per cache lifetime (TTL tier), the minimum cacheable prefix and how the
 * provider caches (explicit breakpoints or automatic prefixes), the
 * effective cost of one request from its billed token split ({@link cost}),
 * and what one edit of the cached prefix costs now and saves later
 * ({@link edit}, for an edit planner). Pure, no I/O.
 *
 * Defaults (USD per million tokens, from the providers' public price lists
 * and prompt-caching guides, late 2025):
 *
 * - **Anthropic** (explicit `cache_control` breakpoints, at most 4, lookback
 *   of 20 blocks per breakpoint): cache read 0.1×; cache write 1.25× for the
 *   5-minute TTL and 2× for the 1-hour TTL, the TTL refreshed by every read.
 *   Opus 4.5+ $5 / $25 (min prefix 4,096); Opus 4 / 4.1 and Claude 3 Opus
 *   $15 / $75 (1,024); Sonnet 4.6+ $3 / $15 (2,048); Sonnet 4 / 4.5 and
 *   Claude 3.5 / 3.7 Sonnet $3 / $15 (1,024); Haiku 4.5 $1 / $5 (4,096);
 *   Claude 3.5 Haiku $0.80 / $4 (2,048); Claude 3 Haiku $0.25 / $1.25
 *   (2,048). An unknown `claude-*` gets Sonnet prices with the largest
 *   documented minimum (4,096), so no caching is assumed that might not occur.
 * - **OpenAI** (automatic prefix caching from 1,024 tokens, hits in
 *   128-token increments beyond the first 1,024; no write premium; the
 *   in-memory cache is kept for 5–10 minutes of inactivity — modelled as
 *   5 — and at most one hour; `prompt_cache_retention: "24h"` on the models
 *   that support it): GPT-5 family (gpt-5, gpt-5.1, incl. codex) $1.25 / $10,
 *   mini $0.25 / $2, nano $0.05 / $0.40, cached input 0.1×; GPT-4.1 $2 / $8,
 *   mini $0.40 / $1.60, nano $0.10 / $0.40, cached 0.25×; o3 $2 / $8 and
 *   o4-mini $1.10 / $4.40, cached 0.25×; GPT-4o $2.50 / $10 and 4o-mini
 *   $0.15 / $0.60, cached 0.5×; o1 $15 / $60, cached 0.5×. An unknown
 *   `gpt-*` / `o*` model: $2.50 / $10 with cached 0.1× (the largest
 *   discount, so the loss of cached tokens an edit causes is never
 *   underestimated).
 * - **Gemini** (implicit caching, automatic prefix, no write premium):
 *   2.5 Pro $1.25 / $10 and 2.5 Flash $0.30 / $2.50, cached 0.25×, min 2,048;
 *   Gemini 3 Pro $2 / $12, cached 0.1×, min 4,096. TTL not documented for
 *   implicit caching: 5 minutes assumed.
 * - **Unknown model** ({@link conservative}): $3 / $15, cache read 0.1×,
 *   write 1.25×, 5-minute TTL, min prefix 4,096, explicit breakpoints — the
 *   assumptions under which a prefix edit looks most expensive and saves least.
 *
 * Configured prices ({@link make}): {@link PriceRow}s `{ "match": "<name
 * prefix>", ...any ModelPrices fields }` checked before the built-in table,
 * in order, first match wins; a row's missing fields come from the built-in
 * row of the model's name. `PriceFile` validates a price file (the worker's
 * `CTXD_PRICES_FILE`).
 */

/** Which provider bills the call. */
export type Provider = "anthropic" | "openai" | "gemini" | "unknown"

/** How the provider decides what is cached. */
export type Mechanism =
  /** Anthropic: prefixes up to `cache_control` breakpoints, written at a premium. */
  | "explicit"
  /** OpenAI, Gemini: the longest previously seen prefix, no write premium. */
  | "automatic"

/** One cache lifetime: its name as the API spells it, its TTL and its write premium. */
export interface CacheTier {
  /** `"5m"`, `"1h"` (Anthropic), `"in_memory"`, `"24h"` (OpenAI), `"implicit"` (Gemini). */
  readonly name: string
  /** Seconds without a read after which the entry is gone. */
  readonly ttlSeconds: number
  /** Written tokens cost this multiple of the base input price (1 = no premium). */
  readonly writeMultiplier: number
  /** Entries are gone this long after they were written, reads or not (OpenAI in-memory: 1 h). */
  readonly maxLifetimeSeconds?: number | undefined
}

/** Prices and cache rules of one model family. */
export interface ModelPrices {
  readonly provider: Provider
  /** The family the table row stands for, e.g. `claude-sonnet-4`. */
  readonly family: string
  /** USD per million uncached input tokens. */
  readonly inputPerMtok: number
  /** USD per million output tokens. */
  readonly outputPerMtok: number
  /** Cache reads cost this multiple of the input price. */
  readonly cacheReadMultiplier: number
  /** The cache lifetimes on offer; the first is the default. */
  readonly tiers: ReadonlyArray<CacheTier>
  /** Prefixes shorter than this are never cached. */
  readonly minCacheableTokens: number
  readonly mechanism: Mechanism
  /** Automatic caching: cached tokens beyond the minimum come in steps of this many (OpenAI 128). */
  readonly incrementTokens: number
  /** Explicit caching: at most this many breakpoints per request (Anthropic 4). */
  readonly maxBreakpoints: number
  /** Explicit caching: block boundaries checked for a hit before each breakpoint (Anthropic ~20). */
  readonly lookbackBlocks: number
}

/** The token split of one billed request. */
export interface Usage {
  /** Prefix tokens read from the cache. */
  readonly cacheRead: number
  /** Tokens written to the cache, per tier name (e.g. `{"5m": 1200}`). */
  readonly cacheWrite: Readonly<Record<string, number>>
  /** Input tokens neither read from nor written to the cache. */
  readonly uncached: number
  readonly output: number
}

const MINUTE = 60
const HOUR = 3600

const anthropicTiers: ReadonlyArray<CacheTier> = [
  { name: "5m", ttlSeconds: 5 * MINUTE, writeMultiplier: 1.25 },
  { name: "1h", ttlSeconds: HOUR, writeMultiplier: 2 },
]
const openaiInMemory: CacheTier = { name: "in_memory", ttlSeconds: 5 * MINUTE, writeMultiplier: 1, maxLifetimeSeconds: HOUR }
const openaiExtended: CacheTier = { name: "24h", ttlSeconds: 24 * HOUR, writeMultiplier: 1, maxLifetimeSeconds: 24 * HOUR }
const geminiImplicit: CacheTier = { name: "implicit", ttlSeconds: 5 * MINUTE, writeMultiplier: 1 }

const anthropic = (family: string, input: number, output: number, minCacheableTokens: number): ModelPrices => ({
  provider: "anthropic",
  family,
  inputPerMtok: input,
  outputPerMtok: output,
  cacheReadMultiplier: 0.1,
  tiers: anthropicTiers,
  minCacheableTokens,
  mechanism: "explicit",
  incrementTokens: 1,
  maxBreakpoints: 4,
  lookbackBlocks: 20,
})

const openai = (family: string, input: number, output: number, read: number, extended: boolean): ModelPrices => ({
  provider: "openai",
  family,
  inputPerMtok: input,
  outputPerMtok: output,
  cacheReadMultiplier: read,
  tiers: extended ? [openaiInMemory, openaiExtended] : [openaiInMemory],
  minCacheableTokens: 1024,
  mechanism: "automatic",
  incrementTokens: 128,
  maxBreakpoints: 0,
  lookbackBlocks: 0,
})

const gemini = (family: string, input: number, output: number, read: number, minCacheableTokens: number): ModelPrices => ({
  provider: "gemini",
  family,
  inputPerMtok: input,
  outputPerMtok: output,
  cacheReadMultiplier: read,
  tiers: [geminiImplicit],
  minCacheableTokens,
  mechanism: "automatic",
  incrementTokens: 1,
  maxBreakpoints: 0,
  lookbackBlocks: 0,
})

/** Prices of a model nothing is known about (see the module comment). */
export const conservative: ModelPrices = {
  ...anthropic("unknown", 3, 15, 4096),
  provider: "unknown",
  tiers: [anthropicTiers[0]!],
}

/** Rows by model name (lower case), first match wins; see the module comment for the sources. */
export const table: ReadonlyArray<readonly [RegExp, ModelPrices]> = [
  [/^claude-opus-4[-.]([5-9]|\d\d)/, anthropic("claude-opus-4.5+", 5, 25, 4096)],
  [/^claude-(opus-4|3-opus)/, anthropic("claude-opus-4", 15, 75, 1024)],
  [/^claude-sonnet-4[-.]([6-9]|\d\d)/, anthropic("claude-sonnet-4.6+", 3, 15, 2048)],
  [/^claude-(sonnet-4|3-7-sonnet|3-5-sonnet)/, anthropic("claude-sonnet-4", 3, 15, 1024)],
  [/^claude-haiku-4/, anthropic("claude-haiku-4.5", 1, 5, 4096)],
  [/^claude-3-5-haiku/, anthropic("claude-3.5-haiku", 0.8, 4, 2048)],
  [/^claude-3-haiku/, anthropic("claude-3-haiku", 0.25, 1.25, 2048)],
  [/^claude-/, anthropic("claude", 3, 15, 4096)],
  [/^gpt-5(\.\d+)?(-codex)?-mini/, openai("gpt-5-mini", 0.25, 2, 0.1, true)],
  [/^gpt-5(\.\d+)?-nano/, openai("gpt-5-nano", 0.05, 0.4, 0.1, false)],
  [/^gpt-5/, openai("gpt-5", 1.25, 10, 0.1, true)],
  [/^gpt-4\.1-mini/, openai("gpt-4.1-mini", 0.4, 1.6, 0.25, false)],
  [/^gpt-4\.1-nano/, openai("gpt-4.1-nano", 0.1, 0.4, 0.25, false)],
  [/^gpt-4\.1/, openai("gpt-4.1", 2, 8, 0.25, true)],
  [/^gpt-4o-mini/, openai("gpt-4o-mini", 0.15, 0.6, 0.5, false)],
  [/^gpt-4o/, openai("gpt-4o", 2.5, 10, 0.5, false)],
  [/^o4-mini/, openai("o4-mini", 1.1, 4.4, 0.25, false)],
  [/^o3/, openai("o3", 2, 8, 0.25, false)],
  [/^o1/, openai("o1", 15, 60, 0.5, false)],
  [/^(gpt-|o\d)/, openai("openai", 2.5, 10, 0.1, false)],
  [/^gemini-2\.5-pro/, gemini("gemini-2.5-pro", 1.25, 10, 0.25, 2048)],
  [/^gemini-2\.5-flash/, gemini("gemini-2.5-flash", 0.3, 2.5, 0.25, 2048)],
  [/^gemini-3/, gemini("gemini-3", 2, 12, 0.1, 4096)],
  [/^gemini-/, gemini("gemini", 1.25, 10, 0.25, 4096)],
]

/**
 * The prices of a model by name (case-insensitive; a `provider/` prefix such
 * as `anthropic/claude-sonnet-4-5` is ignored): the first matching row of
 * {@link table}, else {@link conservative}. `overrides` replace fields of
 * the row (a negotiated price, another TTL list).
 */
export const lookup = (name: string, overrides?: Partial<ModelPrices>): ModelPrices => {
  const row = table.find(([pattern]) => pattern.test(bareName(name)))?.[1] ?? conservative
  return overrides === undefined ? row : over(row, overrides)
}

/** A model name lower-cased, without a `provider/` prefix. */
const bareName = (name: string): string => {
  const lower = name.toLowerCase()
  return lower.includes("/") ? lower.slice(lower.lastIndexOf("/") + 1) : lower
}

/** `row` with the fields `overrides` sets (an `undefined` field keeps the row's). */
const over = (row: ModelPrices, overrides: Partial<ModelPrices>): ModelPrices => {
  const set = Object.entries(overrides).filter(([, value]) => value !== undefined)
  return set.length === 0 ? row : { ...row, ...Object.fromEntries(set) }
}

/** The tier named `name`, else the model's default (first) tier. */
export const tier = (prices: ModelPrices, name?: string): CacheTier =>
  (name === undefined ? undefined : prices.tiers.find((t) => t.name === name)) ?? prices.tiers[0]!

/** Written tokens under an unknown tier are charged the highest premium on offer. */
const writeMultiplier = (prices: ModelPrices, name: string): number =>
  prices.tiers.find((t) => t.name === name)?.writeMultiplier ?? Math.max(...prices.tiers.map((t) => t.writeMultiplier))

/** Sum of a usage's cache writes over all tiers. */
export const written = (usage: Usage): number => Object.values(usage.cacheWrite).reduce((a, b) => a + b, 0)

/**
 * Input cost of one request in base-input-token units (an uncached input
 * token = 1): reads × read multiplier + writes × their tier's premium +
 * uncached. Output is not included (see {@link cost}).
 */
export const inputUnits = (prices: ModelPrices, usage: Usage): number => {
  let units = usage.cacheRead * prices.cacheReadMultiplier + usage.uncached
  for (const [name, tokens] of Object.entries(usage.cacheWrite)) units += tokens * writeMultiplier(prices, name)
  return units
}

/**
 * Output cost of one request in base-input-token units (output price / input
 * price per token; not finite when the input price is 0).
 */
export const outputUnits = (prices: ModelPrices, usage: Usage): number => (usage.output * prices.outputPerMtok) / prices.inputPerMtok

/** Effective cost of one request in USD: input (reads, writes by TTL, uncached) plus output. */
export const cost = (prices: ModelPrices, usage: Usage): number =>
  (inputUnits(prices, usage) * prices.inputPerMtok + usage.output * prices.outputPerMtok) / 1e6

/** Adds two usages (tier by tier). */
export const add = (a: Usage, b: Usage): Usage => {
  const cacheWrite: Record<string, number> = { ...a.cacheWrite }
  for (const [name, tokens] of Object.entries(b.cacheWrite)) cacheWrite[name] = (cacheWrite[name] ?? 0) + tokens
  return { cacheRead: a.cacheRead + b.cacheRead, cacheWrite, uncached: a.uncached + b.uncached, output: a.output + b.output }
}

/** No tokens. */
export const zero: Usage = { cacheRead: 0, cacheWrite: {}, uncached: 0, output: 0 }

/** An edit of the cached prefix, in tokens (see {@link edit}). */
export interface Edit {
  /** Tokens after the edit point that the edited prompt sends (re-written once). */
  readonly rewritten: number
  /** Tokens the edit removes from the prompt (they would have been read every turn). */
  readonly removed: number
  /** Whether the prefix is still cached (false: the TTL ran out, everything is written anyway). */
  readonly warm: boolean
  /** Tier the rewritten prefix is written under (default: the model's first). */
  readonly tier?: string | undefined
}

/** What an edit costs now and saves later, in base-input-token units. */
export interface EditEconomics {
  /** Extra cost of this turn with the edit, against this turn without it (negative: cheaper at once). */
  readonly now: number
  /** Saved on each later warm turn. */
  readonly perTurn: number
  /** Later warm turns needed to recover `now` (0 when `now` ≤ 0; Infinity when nothing is saved). */
  readonly breakEvenTurns: number
}

/**
 * The economics of one prefix edit (lesson 5 of the design): without it the
 * turn reads `rewritten + removed` tokens (warm) or writes them (cold); with
 * it the turn writes `rewritten`. Later warm turns read `removed` fewer
 * tokens. A cold edit is free (it only writes less); a warm one pays off
 * after `breakEvenTurns` more turns within the TTL.
 */
export const edit = (prices: ModelPrices, e: Edit): EditEconomics => {
  const read = prices.cacheReadMultiplier
  const write = tier(prices, e.tier).writeMultiplier
  const without = (e.rewritten + e.removed) * (e.warm ? read : write)
  const now = e.rewritten * write - without
  const perTurn = e.removed * read
  const breakEvenTurns = now <= 0 ? 0 : perTurn > 0 ? now / perTurn : Number.POSITIVE_INFINITY
  return { now, perTurn, breakEvenTurns }
}

/**
 * One row of a configured price table: `match`, a model-name prefix
 * (case-insensitive; a trailing `*` is optional; `"*"` alone matches every
 * model), and the {@link ModelPrices} fields it sets. `tiers` replaces the
 * whole tier list. `PriceFile` validates rows read from a file.
 */
export interface PriceRow extends Partial<ModelPrices> {
  readonly match: string
}

/** A model price table: configured rows over the built-in {@link table}. */
export interface PriceTable {
  /** The configured rows, in order (empty: the built-in table alone). */
  readonly rows: ReadonlyArray<PriceRow>
  /** The prices of a model by name (see {@link make}). */
  readonly lookup: (name: string) => ModelPrices
}

/** The prefix a row's `match` stands for: trimmed, lower case, without the trailing `*`. */
export const matchPrefix = (match: string): string => match.trim().toLowerCase().replace(/\*$/, "")

/**
 * The price table with `rows` before the built-in one (pure; the rows are
 * trusted, `PriceFile` validates untrusted ones). A model name matches a row
 * when it, or the name without its `provider/` prefix, starts with the row's
 * {@link matchPrefix} (case-insensitive); the first matching row wins, its
 * fields over the built-in row of that name (as {@link lookup} with
 * overrides). A name no row matches gets the built-in row.
 */
export const make = (rows: ReadonlyArray<PriceRow>): PriceTable => {
  const prefixes = rows.map((row) => matchPrefix(row.match))
  return {
    rows,
    lookup: (name) => {
      const lower = name.toLowerCase()
      const bare = bareName(name)
      const at = prefixes.findIndex((p) => lower.startsWith(p) || bare.startsWith(p))
      if (at < 0) return lookup(name)
      const { match: _match, ...fields } = rows[at]!
      return lookup(name, fields)
    },
  }
}

/** The built-in table alone. */
export const builtIn: PriceTable = make([])
