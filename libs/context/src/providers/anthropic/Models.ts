/**
 * Anthropic's model table: Claude families with prices (USD per million
 * tokens), cache rules, limits and capabilities, first match wins. Read
 * 2026-12 from the Claude platform docs; each row cites its page:
 *
 * - pricing: https://platform.claude.com/docs/en/about-claude/pricing
 *   (5-minute writes 1.25×, 1-hour writes 2×, reads per model)
 * - models: https://platform.claude.com/docs/en/models/overview and the
 *   per-model pages `…/docs/en/models/<model>/overview`
 * - prefix check (`bindsReasoningToPrefix`):
 *   https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks
 *   (supported models: Fable / Mythos 5.1 and 5.2, Opus 5.5, Sonnet 5.5,
 *   Haiku 5.5; Fable 5 and Mythos 5 do not run it). The same page tells to
 *   append instructions as `role: "system"` messages (`midConversationSystem`).
 * - tool search with `defer_loading` (`toolSearch`):
 *   https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool
 * - on-demand compaction (`providerCompaction`):
 *   https://platform.claude.com/docs/en/build-with-claude/compaction-on-demand
 *   (supported models: Fable / Mythos 5.1 and 5, Opus 5.5, 5, 4.8, 4.7, 4.6,
 *   Sonnet 5.5, 5, 4.6, Haiku 5.5; Fable / Mythos 5.2 are not listed, so not
 *   assumed).
 * - minimum cacheable prompt:
 *   https://platform.claude.com/docs/en/build-with-claude/prompt-caching —
 *   the 5.5 / 5.1 / 5.2 minimums were not found: those rows take 4,096 (the
 *   largest documented), so no caching is assumed that might not occur.
 */
import * as ModelRow from "../../ModelRow.ts"

const tiers: ReadonlyArray<ModelRow.CacheTier> = [
  { name: "5m", ttlSeconds: 5 * ModelRow.MINUTE, writeMultiplier: 1.25 },
  { name: "1h", ttlSeconds: ModelRow.HOUR, writeMultiplier: 2 },
]

/** Capabilities of a model that runs the prefix check (see the module comment). */
const bound: ModelRow.Capabilities = {
  bindsReasoningToPrefix: true,
  toolSearch: true,
  midConversationSystem: true,
  explicitCacheBreakpoints: true,
}
const searching: ModelRow.Capabilities = { ...ModelRow.noCapabilities, toolSearch: true, explicitCacheBreakpoints: true }
const plain: ModelRow.Capabilities = { ...ModelRow.noCapabilities, explicitCacheBreakpoints: true }
/** The same with on-demand compaction (see the module comment). */
const boundCompacting: ModelRow.Capabilities = { ...bound, providerCompaction: true }
const searchingCompacting: ModelRow.Capabilities = { ...searching, providerCompaction: true }

const M = 1_000_000

interface Spec {
  readonly input: number
  readonly output: number
  readonly read: number
  readonly min: number
  readonly window: number
  readonly out: number
  readonly caps: ModelRow.Capabilities
  readonly known?: boolean
}

const row = (family: string, s: Spec): ModelRow.ModelPrices => ({
  provider: "anthropic",
  family,
  known: s.known ?? true,
  inputPerMtok: s.input,
  outputPerMtok: s.output,
  cacheReadMultiplier: s.read,
  tiers,
  minCacheableTokens: s.min,
  mechanism: "explicit",
  incrementTokens: 1,
  maxBreakpoints: 4,
  lookbackBlocks: 20,
  contextWindow: s.window,
  maxOutputTokens: s.out,
  capabilities: s.caps,
})

/** Claude rows by model name (lower case, dated and alias names alike), first match wins. */
export const rows: ReadonlyArray<ModelRow.Row> = [
  // pricing page: Fable 5.1 / Mythos 5.1 $10 / $50, cache hits $0.25 (0.025×); 1M / 128K (models overview).
  // Fable / Mythos 5.2 are on the prefix-check and tool-search pages, their prices were not found: 5.1's, with 0.1× reads.
  [
    /^claude-(fable|mythos)-5[-.]1(?!\d)/,
    row("claude-fable-5.1", { input: 10, output: 50, read: 0.025, min: 4096, window: M, out: 128_000, caps: boundCompacting }),
  ],
  [
    /^claude-(fable|mythos)-5[-.]([2-9]|[1-9]\d)(?!\d)/,
    row("claude-fable-5.2+", { input: 10, output: 50, read: 0.1, min: 4096, window: M, out: 128_000, caps: bound }),
  ],
  // https://platform.claude.com/docs/en/models/fable-5/overview: $10 / $50, 1M / 128K; pricing page: hits $1 (0.1×).
  // Minimum: 512 or 2,048 in secondary sources (LiteLLM prompt-caching docs, fableguide.com); the larger is kept.
  [
    /^claude-(fable|mythos)-5/,
    row("claude-fable-5", { input: 10, output: 50, read: 0.1, min: 2048, window: M, out: 128_000, caps: searchingCompacting }),
  ],
  // https://platform.claude.com/docs/en/models/opus-5-5/overview: $4 / $20, 5m write $5, 1h write $8, read $0.20 (0.05×), 1M / 128K.
  [
    /^claude-opus-5[-.]([5-9]|[1-9]\d)(?!\d)/,
    row("claude-opus-5.5", { input: 4, output: 20, read: 0.05, min: 4096, window: M, out: 128_000, caps: boundCompacting }),
  ],
  // https://platform.claude.com/docs/en/models/opus-5/overview: $5 / $25, 1M / 128K; minimum 512 (LiteLLM prompt-caching docs).
  [
    /^claude-opus-5/,
    row("claude-opus-5", { input: 5, output: 25, read: 0.1, min: 512, window: M, out: 128_000, caps: searchingCompacting }),
  ],
  // pricing page: Opus 4.5–4.8 $5 / $25, hits $0.50. Minimums 1,024 (4.8), 2,048 (4.7), 4,096 (4.5, 4.6).
  // https://platform.claude.com/docs/en/about-claude/models/whats-new-claude-4-8: Opus 4.8 takes
  // `role: "system"` messages right after a user turn, no beta needed (Claude Code sends them to it).
  [
    /^claude-opus-4[-.]8(?!\d)/,
    row("claude-opus-4.8", {
      input: 5,
      output: 25,
      read: 0.1,
      min: 1024,
      window: M,
      out: 128_000,
      caps: { ...searchingCompacting, midConversationSystem: true },
    }),
  ],
  [
    /^claude-opus-4[-.]7(?!\d)/,
    row("claude-opus-4.7", { input: 5, output: 25, read: 0.1, min: 2048, window: M, out: 128_000, caps: searchingCompacting }),
  ],
  [
    /^claude-opus-4[-.]6(?!\d)/,
    row("claude-opus-4.6", { input: 5, output: 25, read: 0.1, min: 4096, window: M, out: 128_000, caps: searchingCompacting }),
  ],
  [
    /^claude-opus-4[-.]([5-9]|[1-9]\d)(?!\d)/,
    row("claude-opus-4.5+", { input: 5, output: 25, read: 0.1, min: 4096, window: 200_000, out: 8_192, caps: searching }),
  ],
  // pricing page: Opus 4 / 4.1 (retired except on Bedrock / Google Cloud) and Opus 3 $15 / $75.
  [
    /^claude-(opus-4|3-opus)/,
    row("claude-opus-4", { input: 15, output: 75, read: 0.1, min: 1024, window: 200_000, out: 8_192, caps: plain }),
  ],
  // https://platform.claude.com/docs/en/models/sonnet-5-5/overview: $2 / $10, 5m $2.50, 1h $4, read $0.20 (0.1×; a cut to
  // $0.10 from 2026-10-07 is reported by third parties, not by the page read), 1M / 128K.
  [
    /^claude-sonnet-5[-.]([5-9]|[1-9]\d)(?!\d)/,
    row("claude-sonnet-5.5", { input: 2, output: 10, read: 0.1, min: 4096, window: M, out: 128_000, caps: boundCompacting }),
  ],
  // models overview: Sonnet 5 $2 / $10, 1M / 128K; minimum 1,024 (LiteLLM prompt-caching docs).
  [
    /^claude-sonnet-5/,
    row("claude-sonnet-5", { input: 2, output: 10, read: 0.1, min: 1024, window: M, out: 128_000, caps: searchingCompacting }),
  ],
  // Sonnet 4.6: 1,024 or 2,048 in the sources read; the larger is kept.
  [
    /^claude-sonnet-4[-.]([6-9]|[1-9]\d)(?!\d)/,
    row("claude-sonnet-4.6+", { input: 3, output: 15, read: 0.1, min: 2048, window: 200_000, out: 8_192, caps: searchingCompacting }),
  ],
  [
    /^claude-sonnet-4[-.]5(?!\d)/,
    row("claude-sonnet-4", { input: 3, output: 15, read: 0.1, min: 1024, window: 200_000, out: 8_192, caps: searching }),
  ],
  [
    /^claude-(sonnet-4|3-7-sonnet|3-5-sonnet)/,
    row("claude-sonnet-4", { input: 3, output: 15, read: 0.1, min: 1024, window: 200_000, out: 8_192, caps: plain }),
  ],
  // https://platform.claude.com/docs/en/models/haiku-5-5/overview: $0.10 / $0.50, 5m $0.125, 1h $0.20, read $0.01 for prompts
  // up to 100,000 tokens; longer prompts are billed 5× on every token (the multipliers are the same); 1M / 128K.
  [
    /^claude-haiku-5[-.]([5-9]|[1-9]\d)(?!\d)/,
    row("claude-haiku-5.5", { input: 0.1, output: 0.5, read: 0.1, min: 4096, window: M, out: 128_000, caps: boundCompacting }),
  ],
  // pricing page: Haiku 4.5 $1 / $5; 200K / 64K (models overview; the reserve stays 8,192).
  [/^claude-haiku-4/, row("claude-haiku-4.5", { input: 1, output: 5, read: 0.1, min: 4096, window: 200_000, out: 8_192, caps: searching })],
  [/^claude-3-5-haiku/, row("claude-3.5-haiku", { input: 0.8, output: 4, read: 0.1, min: 2048, window: 200_000, out: 8_192, caps: plain })],
  [/^claude-3-haiku/, row("claude-3-haiku", { input: 0.25, output: 1.25, read: 0.1, min: 2048, window: 200_000, out: 8_192, caps: plain })],
  // any other Claude: Sonnet prices, the largest minimum, no capability assumed; reported as unknown.
  [/^claude-/, row("claude", { input: 3, output: 15, read: 0.1, min: 4096, window: 200_000, out: 8_192, caps: plain, known: false })],
]
