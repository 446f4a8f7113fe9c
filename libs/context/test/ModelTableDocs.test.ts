// docs/providers.md's "Model table" is the model table itself, rendered: this test renders the
// rows of the code and compares (on a difference it prints the table to paste between the markers).
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as CostModel from "../src/CostModel.ts"

const n = (x: number) => x.toLocaleString("en-US")
const flags = (c: CostModel.Capabilities) =>
  [
    c.bindsReasoningToPrefix && "prefix",
    c.toolSearch && "tool search",
    c.midConversationSystem && "mid system",
    c.explicitCacheBreakpoints && "breakpoints",
  ]
    .filter(Boolean)
    .join(", ") || "—"

/** The table as docs/providers.md shows it: one line per row, then the conservative one. */
const render = (): string =>
  [
    "| family (pattern) | in / out | read | writes (TTL ×) | min prefix | window / reserve | flags | known |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ...[...CostModel.table, [/(no row)/, CostModel.conservative] as const].map(([re, p]) =>
      [
        "",
        ` ${p.family} (\`${re.source.replace(/\|/g, "\\|")}\`) `,
        ` $${p.inputPerMtok} / $${p.outputPerMtok} `,
        ` ${p.cacheReadMultiplier}× `,
        ` ${p.tiers.map((t) => `${t.name} ${t.writeMultiplier}×`).join(", ")} `,
        ` ${n(p.minCacheableTokens)} `,
        ` ${n(p.contextWindow)} / ${n(p.maxOutputTokens)} `,
        ` ${flags(p.capabilities)} `,
        ` ${p.known ? "yes" : "no"} `,
        "",
      ].join("|"),
    ),
  ].join("\n")

/** Who writes the summaries on a row's models, and the provider's own compactions in a history. */
const compaction = (p: CostModel.ModelPrices): string => {
  const c = p.capabilities
  if (p.provider === "openai") return "ctxd's summaries; a Responses `compaction` item is a boundary"
  if (p.provider !== "anthropic") return "ctxd's summaries"
  if (c.providerCompaction !== true) return "ctxd's summaries; a `compaction` block is a boundary"
  return c.bindsReasoningToPrefix
    ? "the API writes them (`summarizer.backend` default `provider`)"
    : "ctxd's, or the API's with `summarizer.backend: provider`"
}

/** What ctxd does on a row's models, per lever (one cell each). */
const uses = (p: CostModel.ModelPrices): ReadonlyArray<string> => {
  const c = p.capabilities
  const anthropic = p.provider === "anthropic"
  return [
    c.bindsReasoningToPrefix ? "bound: no block sent after an edit before it" : "older turns' reasoning left out",
    !c.toolSearch
      ? "`load_toolset`"
      : anthropic
        ? "`defer_loading` + `tool_search_tool_bm25`"
        : "`defer_loading` + `tool_search` (Responses; Chat Completions: `load_toolset`)",
    c.midConversationSystem && anthropic ? "`role: system` after the turn" : "tail notes, learnings in `system`",
    !c.explicitCacheBreakpoints ? "automatic prefix" : anthropic ? "`cache_control`" : "`prompt_cache_breakpoint`",
    compaction(p),
  ]
}

/** The "What ctxd uses on which model" table: consecutive rows of one provider that get the same cells share a line. */
const renderUses = (): string => {
  const lines: Array<{ families: Array<string>; provider: string; cells: string }> = []
  for (const [, p] of CostModel.table) {
    const cells = uses(p).join(" | ")
    const last = lines.at(-1)
    if (last !== undefined && last.provider === p.provider && last.cells === cells) {
      if (!last.families.includes(p.family)) last.families.push(p.family)
    } else lines.push({ families: [p.family], provider: p.provider, cells })
  }
  return [
    "| model families | prefix-bound reasoning | tool search | mid-conversation system | explicit cache breakpoints | provider compaction |",
    "| --- | --- | --- | --- | --- | --- |",
    ...lines.map((l) => `| ${l.families.join(", ")} | ${l.cells} |`),
  ].join("\n")
}

const page = (): string => readFileSync(join(import.meta.dirname, "..", "..", "..", "docs", "providers.md"), "utf8")
const between = (text: string, marker: string): string =>
  text.slice(text.indexOf(`<!-- ${marker} -->\n`) + marker.length + 10, text.indexOf(`\n<!-- /${marker} -->`))

describe("docs/providers.md, section Model table", () => {
  it("shows the rows of the code", () => {
    expect(between(page(), "model-table"), render()).toBe(render())
  })
})

describe("docs/providers.md, section What ctxd uses on which model", () => {
  it("shows what the rows' flags make ctxd do", () => {
    expect(between(page(), "uses-table"), renderUses()).toBe(renderUses())
  })
})
