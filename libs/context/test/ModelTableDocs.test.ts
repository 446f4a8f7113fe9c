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

describe("docs/providers.md, section Model table", () => {
  it("shows the rows of the code", () => {
    const page = readFileSync(join(import.meta.dirname, "..", "..", "..", "docs", "providers.md"), "utf8")
    const shown = page.slice(page.indexOf("<!-- model-table -->\n") + 21, page.indexOf("\n<!-- /model-table -->"))
    expect(shown, render()).toBe(render())
  })
})
