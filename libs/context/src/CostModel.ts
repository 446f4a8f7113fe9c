/**
 * The price of a model call: the model table (per provider and model family
 * base input and output prices, the cache read discount, the cache write
 * premium per cache lifetime (TTL tier), the minimum cacheable prefix, how
 * the provider caches, the window and output limits and the capability
 * flags), the effective cost of one request from its billed token split
 * ({@link cost}), and what one edit of the cached prefix costs now and saves
 * later ({@link edit}, for an edit planner). Pure, no I/O.
 *
 * The rows live with their provider adapter and cite the provider's pages:
 * `providers/anthropic/Models.ts`, `providers/openai-chat/Models.ts`,
 * `providers/gemini/Models.ts` (gathered in `providers/ModelRows.ts`; the
 * row shape is `ModelRow`). docs/providers.md's "Model table" lists them.
 * In short: Anthropic writes cost 1.25× (5 min) and 2× (1 h); OpenAI writes
 * are free before GPT-5.6 and cost 1.25× from GPT-5.6 on; Gemini's implicit
 * caching has no write premium.
 *
 * A name no row matches, or only a provider's catch-all row (any other
 * `claude-*`, `gpt-*`, `gemini-*`), is an **unknown model**: `known` is
 * false (the turn report says so and a metric counts it) and its row is
 * conservative. With no row at all that is {@link conservative}: $3 / $15,
 * cache read 0.1×, write 1.25×, 5-minute TTL, min prefix 4,096, explicit
 * breakpoints (the assumptions under which a prefix edit looks most
 * expensive and saves least), a 128,000-token window with a 4,096-token
 * output reserve, no capability.
 *
 * Configured prices ({@link make}): {@link PriceRow}s `{ "match": "<name
 * prefix>", ...any ModelPrices fields }` checked before the built-in table,
 * in order, first match wins; a row's missing fields come from the built-in
 * row of the model's name, and a model a configured row matches is known.
 * `PriceFile` validates a price file (the worker's `CTXD_PRICES_FILE`).
 */
import type * as ModelRow from "./ModelRow.ts"
import { noCapabilities } from "./ModelRow.ts"
import * as ModelRows from "./providers/ModelRows.ts"

/** Which provider bills the call. */
export type Provider = ModelRow.Provider

/** How the provider decides what is cached. */
export type Mechanism = ModelRow.Mechanism

/** One cache lifetime: its name as the API spells it, its TTL and its write premium. */
export type CacheTier = ModelRow.CacheTier

/** What a model family can do (see `ModelRow.Capabilities`). */
export type Capabilities = ModelRow.Capabilities

/** Prices, cache rules, limits and capabilities of one model family (see `ModelRow.ModelPrices`). */
export type ModelPrices = ModelRow.ModelPrices

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

/** Prices of a model nothing is known about (see the module comment). */
export const conservative: ModelPrices = {
  provider: "unknown",
  family: "unknown",
  known: false,
  inputPerMtok: 3,
  outputPerMtok: 15,
  cacheReadMultiplier: 0.1,
  tiers: [{ name: "5m", ttlSeconds: 300, writeMultiplier: 1.25 }],
  minCacheableTokens: 4096,
  mechanism: "explicit",
  incrementTokens: 1,
  maxBreakpoints: 4,
  lookbackBlocks: 20,
  contextWindow: 128_000,
  maxOutputTokens: 4_096,
  capabilities: noCapabilities,
}

/** Rows by model name (lower case), first match wins; each provider's file cites its sources. */
export const table: ReadonlyArray<ModelRow.Row> = ModelRows.rows

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
 * whole tier list; `capabilities` sets the flags it names (the others come
 * from the built-in row). `PriceFile` validates rows read from a file.
 */
export interface PriceRow extends Partial<Omit<ModelPrices, "capabilities" | "known">> {
  readonly match: string
  readonly capabilities?: Partial<Capabilities> | undefined
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
 * overrides; a configured row makes the model known). A name no row
 * matches gets the built-in row.
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
      const { match: _match, capabilities, ...fields } = rows[at]!
      const flags = capabilities === undefined ? {} : { capabilities: { ...lookup(name).capabilities, ...capabilities } }
      return lookup(name, { ...fields, ...flags, known: true })
    },
  }
}

/** The built-in table alone. */
export const builtIn: PriceTable = make([])
