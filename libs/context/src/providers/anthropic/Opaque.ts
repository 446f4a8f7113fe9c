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
  dropFailing: { body: { thinking: Binding.dropBlockThinking }, betaHeader: Binding.BETA },
}
