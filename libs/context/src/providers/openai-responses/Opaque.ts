/**
 * The Responses API's opaque items: `reasoning` items are reasoning;
 * `compaction` items the provider's own (encrypted) summary; anything else
 * reads elsewhere as a note that it was omitted.
 */
import * as OpaqueBlock from "../OpaqueBlock.ts"

/** The Responses API's opaque-block rules. */
export const rules: OpaqueBlock.Rules<"openai-responses"> = {
  format: "openai-responses",
  isReasoning: (block) => OpaqueBlock.blockType(block) === "reasoning",
  compaction: "compaction",
  note: (part) => OpaqueBlock.omitted(part.format, OpaqueBlock.blockType(part.block)),
}
