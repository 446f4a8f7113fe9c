/**
 * OpenAI's model table (shared by the Chat Completions and Responses
 * adapters): GPT families with prices (USD per million tokens), cache rules,
 * limits and capabilities, first match wins. Read 2026-12 from the OpenAI
 * API docs:
 *
 * - prompt caching: https://developers.openai.com/api/docs/guides/prompt-caching
 *   — automatic from 1,024 tokens; "cache writes have no additional fee on
 *   models before the GPT-5.6 family. For GPT-5.6 models and later model
 *   families, cache writes cost 1.25× the uncached input token rate", and
 *   those take explicit `prompt_cache_breakpoint` markers (up to four cache
 *   writes a request, one of them the implicit one: LangChain4j's
 *   `OpenAiOfficialPromptCacheBreakpoint` docs; the guide's own count was
 *   not found). Their TTL is `prompt_cache_options.ttl` (`30m` default).
 * - models: https://developers.openai.com/api/docs/models/<model>
 * - tool search: https://developers.openai.com/api/docs/guides/tools-tool-search
 *   — "Only gpt-5.4 and later models support tool_search" (Responses API);
 *   the GPT-5.6+ rows claim it. GPT-5.4 and GPT-5.5 have no row of their
 *   own (the `gpt-5` row prices them), so ctxd leaves it off there.
 * - older rows: the providers' price lists and caching guide of late 2025.
 */
import * as ModelRow from "../../ModelRow.ts"

const inMemory: ModelRow.CacheTier = {
  name: "in_memory",
  ttlSeconds: 5 * ModelRow.MINUTE,
  writeMultiplier: 1,
  maxLifetimeSeconds: ModelRow.HOUR,
}
const extended: ModelRow.CacheTier = {
  name: "24h",
  ttlSeconds: 24 * ModelRow.HOUR,
  writeMultiplier: 1,
  maxLifetimeSeconds: 24 * ModelRow.HOUR,
}
/**
 * GPT-5.6+: writes billed at 1.25× (the guide above), each breakpoint kept at
 * least `prompt_cache_options.ttl`, `30m` by default (the `openai` SDK's
 * `PromptCacheOptions`; `prompt_cache_retention` is deprecated for it).
 * Responses also takes `12h`, but no page gives its write price, so no row
 * offers it (a price file can add `{name: "12h", ...}`).
 */
const billed: ModelRow.CacheTier = { name: "30m", ttlSeconds: 30 * ModelRow.MINUTE, writeMultiplier: 1.25 }

interface Spec {
  readonly input: number
  readonly output: number
  readonly read: number
  readonly window: number
  readonly out: number
  /** The `24h` retention is offered (besides `in_memory`). */
  readonly extended?: boolean
  readonly known?: boolean
}

const row = (family: string, s: Spec): ModelRow.ModelPrices => ({
  provider: "openai",
  family,
  known: s.known ?? true,
  inputPerMtok: s.input,
  outputPerMtok: s.output,
  cacheReadMultiplier: s.read,
  tiers: s.extended === true ? [inMemory, extended] : [inMemory],
  minCacheableTokens: 1024,
  mechanism: "automatic",
  incrementTokens: 128,
  maxBreakpoints: 0,
  lookbackBlocks: 0,
  contextWindow: s.window,
  maxOutputTokens: s.out,
  capabilities: ModelRow.noCapabilities,
})

/** A GPT-5.6+ row: billed writes, up to 4 breakpoints, no 128-token rounding (the implicit breakpoint is managed). */
const writes = (family: string, s: Spec): ModelRow.ModelPrices => ({
  ...row(family, s),
  tiers: [billed],
  incrementTokens: 1,
  maxBreakpoints: 4,
  capabilities: { ...ModelRow.noCapabilities, explicitCacheBreakpoints: true, toolSearch: true },
})

const WINDOW_56 = 1_050_000

/** GPT rows by model name (lower case, dated and alias names alike), first match wins. */
export const rows: ReadonlyArray<ModelRow.Row> = [
  // https://developers.openai.com/api/docs/models/gpt-5.6-luna ("Quick comparison": Terra $2.00 input); output $12 and
  // cached 0.1× from secondary sources (Vercel AI Gateway model page); writes 1.25×.
  [/^gpt-5\.6-terra/, writes("gpt-5.6-terra", { input: 2, output: 12, read: 0.1, window: WINDOW_56, out: 128_000 })],
  // https://developers.openai.com/api/docs/models/gpt-5.6-luna: $0.20 / $1.20, cached $0.02, writes 1.25×, 1,050,000 / 128,000.
  [/^gpt-5\.6-luna/, writes("gpt-5.6-luna", { input: 0.2, output: 1.2, read: 0.1, window: WINDOW_56, out: 128_000 })],
  // https://developers.openai.com/api/docs/models/gpt-5.6-sol: $4 / $20 (promotional, "at least until 2026-11-21"),
  // cached $0.40, writes 1.25×, 1,050,000 / 128,000. The `gpt-5.6` alias routes to Sol, so
  // does any other `gpt-5.6*` name (after Terra and Luna).
  [/^gpt-5\.6(?!\d)/, writes("gpt-5.6-sol", { input: 4, output: 20, read: 0.1, window: WINDOW_56, out: 128_000 })],
  // later families (GPT-5.7+, GPT-6.x): writes 1.25× per the caching guide; no official price page read, so Sol's
  // list price before its promotion ($5 / $30) and the GPT-5.6 limits; reported as unknown.
  [
    /^gpt-(5\.([7-9]|[1-9]\d)|([6-9]|[1-9]\d)(\.\d+)?)(?![\d])/,
    writes("gpt-5.6+", { input: 5, output: 30, read: 0.1, window: WINDOW_56, out: 128_000, known: false }),
  ],
  [/^gpt-5(\.\d+)?(-codex)?-mini/, row("gpt-5-mini", { input: 0.25, output: 2, read: 0.1, window: 400_000, out: 128_000, extended: true })],
  [/^gpt-5(\.\d+)?-nano/, row("gpt-5-nano", { input: 0.05, output: 0.4, read: 0.1, window: 400_000, out: 128_000 })],
  [/^gpt-5/, row("gpt-5", { input: 1.25, output: 10, read: 0.1, window: 400_000, out: 128_000, extended: true })],
  [/^gpt-4\.1-mini/, row("gpt-4.1-mini", { input: 0.4, output: 1.6, read: 0.25, window: 1_047_576, out: 32_768 })],
  [/^gpt-4\.1-nano/, row("gpt-4.1-nano", { input: 0.1, output: 0.4, read: 0.25, window: 1_047_576, out: 32_768 })],
  [/^gpt-4\.1/, row("gpt-4.1", { input: 2, output: 8, read: 0.25, window: 1_047_576, out: 32_768, extended: true })],
  [/^gpt-4o-mini/, row("gpt-4o-mini", { input: 0.15, output: 0.6, read: 0.5, window: 128_000, out: 16_384 })],
  [/^gpt-4o/, row("gpt-4o", { input: 2.5, output: 10, read: 0.5, window: 128_000, out: 16_384 })],
  [/^gpt-4-turbo/, row("gpt-4-turbo", { input: 2.5, output: 10, read: 0.1, window: 128_000, out: 4_096, known: false })],
  [/^o4-mini/, row("o4-mini", { input: 1.1, output: 4.4, read: 0.25, window: 200_000, out: 100_000 })],
  [/^o3/, row("o3", { input: 2, output: 8, read: 0.25, window: 200_000, out: 100_000 })],
  [/^o1/, row("o1", { input: 15, output: 60, read: 0.5, window: 200_000, out: 100_000 })],
  // any other GPT / o-series model: $2.50 / $10 with cached 0.1× (the largest discount, so the loss of cached
  // tokens an edit causes is never underestimated); reported as unknown.
  [/^(gpt-|o\d)/, row("openai", { input: 2.5, output: 10, read: 0.1, window: 128_000, out: 4_096, known: false })],
]
