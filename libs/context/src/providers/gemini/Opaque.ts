/**
 * Gemini's opaque parts: `thought: true` parts are reasoning (thought
 * signatures on text and call parts are fields of neutral parts, see
 * `Reasoning`); there is no provider compaction. A part's kind is its datum
 * field (`fileData`, `executableCode`, ...), as Gemini parts have no `type`.
 */
import * as OpaqueBlock from "../OpaqueBlock.ts"

/** The datum field of a Gemini part (`text`, `fileData`, ...), or `"unknown"`. */
export const kind = (block: unknown): string => {
  if (!OpaqueBlock.isRecord(block)) return "unknown"
  return Object.keys(block).find((k) => k !== "thoughtSignature" && k !== "thought" && block[k] !== undefined) ?? "unknown"
}

/** Gemini's opaque-block rules. */
export const rules: OpaqueBlock.Rules<"gemini"> = {
  format: "gemini",
  isReasoning: (block) => OpaqueBlock.isRecord(block) && block["thought"] === true,
  compaction: undefined,
  note: (part) => {
    const block = part.block
    if (!OpaqueBlock.isRecord(block)) return undefined
    // signed empty texts (a bare signature) mean nothing outside Gemini
    if (typeof block["text"] === "string") return block["text"] === "" ? undefined : block["text"]
    return OpaqueBlock.omitted(part.format, kind(block))
  },
}
