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
  inputProblem: (items, field) => {
    const list = Array.isArray(items) ? items : []
    for (const [i, item] of list.entries()) {
      if (OpaqueBlock.blockType(item) !== "reasoning") continue
      // "Item 'rs_…' of type 'reasoning' was provided without its required following item": the output it led to
      if (!ledTo(list[i + 1]))
        return { path: `${field}[${i}]`, message: "a reasoning item must be followed by the item it led to (a message or a call)" }
    }
    return undefined
  },
}

/** True for an item a reasoning item can lead to: output of the model (an assistant message, a call), not input or more reasoning. */
const ledTo = (item: unknown): boolean => {
  if (!OpaqueBlock.isRecord(item)) return false
  const type = OpaqueBlock.blockType(item)
  if (type === "reasoning" || type.endsWith("_output")) return false
  if (type === "message" || (type === "unknown" && "role" in item)) return item["role"] === "assistant"
  return true
}
