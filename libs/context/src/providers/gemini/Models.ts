/**
 * Google's model table: Gemini families with prices (USD per million
 * tokens), cache rules, limits and capabilities, first match wins. Read
 * 2026-12 from the Gemini API docs:
 *
 * - implicit caching: https://ai.google.dev/gemini-api/docs/caching —
 *   "enabled by default for all Gemini 2.5 and newer models", minimum 4,096
 *   tokens on Gemini 3.1 Pro and 3.5–3.8 Flash (and Gemini 4), 2,048 on 2.5.
 *   No write premium; its TTL is not documented: 5 minutes assumed.
 * - pricing: https://ai.google.dev/gemini-api/docs/pricing (read through
 *   transcriptions: models.dev's `gemini-3.6-flash.toml`, API Evangelist's
 *   pricing harvest of 2026-10-07); 3.5 Flash and 3.1 Pro prices were not
 *   found on a Google page (3.5 Flash from a reseller's page).
 * - thought signatures must be sent back unchanged, but no prefix binding
 *   is documented, and Gemini has no deferred tool loading nor explicit
 *   breakpoints (explicit caching is a separate cache object): no flag set.
 */
import * as ModelRow from "../../ModelRow.ts"

const implicit: ModelRow.CacheTier = { name: "implicit", ttlSeconds: 5 * ModelRow.MINUTE, writeMultiplier: 1 }

interface Spec {
  readonly input: number
  readonly output: number
  readonly read: number
  readonly min: number
  readonly window: number
  readonly out: number
  readonly known?: boolean
}

const row = (family: string, s: Spec): ModelRow.ModelPrices => ({
  provider: "gemini",
  family,
  known: s.known ?? true,
  inputPerMtok: s.input,
  outputPerMtok: s.output,
  cacheReadMultiplier: s.read,
  tiers: [implicit],
  minCacheableTokens: s.min,
  mechanism: "automatic",
  incrementTokens: 1,
  maxBreakpoints: 0,
  lookbackBlocks: 0,
  contextWindow: s.window,
  maxOutputTokens: s.out,
  capabilities: ModelRow.noCapabilities,
})

const WINDOW = 1_048_576

/** Gemini rows by model name (lower case, `-preview` and dated names alike), first match wins. */
export const rows: ReadonlyArray<ModelRow.Row> = [
  // pricing page (models.dev transcription): 3.6 Flash $0.75 / $3.75, cache read $0.075, introductory through
  // 2026-12-31 (2027: $1.50 / $7.50); 3.8 Flash $0.75 input likewise; 3.7 assumed alike. Minimum 4,096 (caching page).
  [/^gemini-3\.[6-9]-flash/, row("gemini-3.6-flash", { input: 0.75, output: 3.75, read: 0.1, min: 4096, window: 1_000_000, out: 65_536 })],
  // caching page: minimum 4,096; $1.50 / $9, cached $0.15, 1,000,000 / 64,000 from a reseller's model page (APIYI).
  [/^gemini-3\.5-flash/, row("gemini-3.5-flash", { input: 1.5, output: 9, read: 0.1, min: 4096, window: 1_000_000, out: 64_000 })],
  // caching page: 3.1 Pro minimum 4,096; price not found: Gemini 3 Pro's ($2 / $12, cached 0.1×).
  [/^gemini-3/, row("gemini-3", { input: 2, output: 12, read: 0.1, min: 4096, window: WINDOW, out: 65_536 })],
  // caching page: 2.5 Pro and Flash minimum 2,048.
  [/^gemini-2\.5-pro/, row("gemini-2.5-pro", { input: 1.25, output: 10, read: 0.25, min: 2048, window: WINDOW, out: 65_536 })],
  [/^gemini-2\.5-flash/, row("gemini-2.5-flash", { input: 0.3, output: 2.5, read: 0.25, min: 2048, window: WINDOW, out: 65_536 })],
  // any other Gemini (Gemini 4 Argon is on the caching page at 4,096, unpriced): 2.5 Pro prices, the largest minimum.
  [/^gemini-/, row("gemini", { input: 1.25, output: 10, read: 0.25, min: 4096, window: WINDOW, out: 8_192, known: false })],
]
