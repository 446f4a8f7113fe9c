/**
 * Anthropic's opaque blocks: `thinking` (signed) and `redacted_thinking`
 * (encrypted `data`) are reasoning; `compaction` is the provider's own
 * summary; anything else reads elsewhere as a note that it was omitted.
 */
import * as OpaqueBlock from "../OpaqueBlock.ts"
import * as Binding from "./Binding.ts"

const REASONING: ReadonlySet<string> = new Set(["thinking", "redacted_thinking"])

/** Anthropic's opaque-block rules. */
export const rules: OpaqueBlock.Rules<"anthropic"> = {
  format: "anthropic",
  isReasoning: (block) => REASONING.has(OpaqueBlock.blockType(block)),
  compaction: "compaction",
  note: (part) => OpaqueBlock.omitted(part.format, OpaqueBlock.blockType(part.block)),
  reads: Binding.reads,
  inputProblem: (items, field) => {
    const messages = Array.isArray(items) ? items : []
    for (const [i, m] of messages.entries()) {
      const content: unknown = OpaqueBlock.isRecord(m) ? m["content"] : undefined
      if (!Array.isArray(content)) continue
      for (const [j, block] of content.entries()) {
        const type = OpaqueBlock.blockType(block)
        const key = type === "thinking" ? "signature" : type === "redacted_thinking" ? "data" : undefined
        if (key === undefined || !OpaqueBlock.isRecord(block)) continue
        const value = block[key]
        // the API refuses thinking without its signature ("Field required"): send it back exactly as it came
        if (typeof value !== "string" || value === "")
          return {
            path: `${field}[${i}].content[${j}].${key}`,
            message: `a ${type} block needs its ${key}, exactly as the API returned it`,
          }
      }
    }
    return undefined
  },
  dropFailing: { body: { thinking: Binding.dropBlockThinking }, betaHeader: Binding.BETA },
}
