/**
 * Chat Completions' opaque parts: no reasoning and no compaction travel in
 * this format; a `refusal` part reads elsewhere as its text, anything else
 * as a note that it was omitted.
 */
import * as OpaqueBlock from "../OpaqueBlock.ts"

/** Chat Completions' opaque-block rules. */
export const rules: OpaqueBlock.Rules<"openai"> = {
  format: "openai",
  isReasoning: () => false,
  compaction: undefined,
  note: (part) => {
    const type = OpaqueBlock.blockType(part.block)
    if (type === "refusal" && OpaqueBlock.isRecord(part.block) && typeof part.block["refusal"] === "string") return part.block["refusal"]
    return OpaqueBlock.omitted(part.format, type)
  },
}
