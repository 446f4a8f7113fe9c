/**
 * Opaque parts rendered into the other provider's format. Such parts only
 * meet the other renderer when a session changes format between turns.
 */
import type { Conversation } from "@ctxd/contracts"
import * as ProviderCompaction from "../ProviderCompaction.ts"
import * as Reasoning from "../Reasoning.ts"

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The `type` of an opaque block, or `"unknown"`. */
export const blockType = (part: Conversation.OpaquePart): string =>
  isRecord(part.block) && typeof part.block["type"] === "string" ? part.block["type"] : "unknown"

/**
 * A text stand-in for an opaque part of the other format: an OpenAI refusal
 * becomes its text; reasoning ({@link Reasoning.isReasoning}: Anthropic
 * thinking blocks, Responses reasoning items, Gemini thoughts: only the
 * provider that signed it can read it), provider compactions (opaque to
 * another provider; ctxd still holds the history they summarize) and Gemini
 * bare signatures are dropped (`undefined`); anything else becomes a short
 * note `[<format> <type> block omitted]` (a Gemini part's type is its datum
 * field: `fileData`, `executableCode`, ...).
 */
export const note = (part: Conversation.OpaquePart): string | undefined => {
  if (Reasoning.isReasoning(part)) return undefined
  if (part.format === "gemini") return geminiNote(part)
  const type = blockType(part)
  if (ProviderCompaction.formatOf(part) !== undefined) return undefined
  if (part.format === "openai" && type === "refusal" && isRecord(part.block) && typeof part.block["refusal"] === "string") {
    return part.block["refusal"]
  }
  return `[${part.format} ${type} block omitted]`
}

/** Shallow copy of an opaque block without `cache_control` (a fresh object the renderer may mark). */
export const copyBlock = (part: Conversation.OpaquePart): Record<string, unknown> => {
  if (!isRecord(part.block)) return { type: "unknown" }
  const { cache_control: _drop, ...rest } = part.block
  return rest
}

/** The datum field of a Gemini part (`text`, `fileData`, ...), or `"unknown"`. */
export const geminiKind = (block: unknown): string => {
  if (!isRecord(block)) return "unknown"
  return Object.keys(block).find((k) => k !== "thoughtSignature" && k !== "thought" && block[k] !== undefined) ?? "unknown"
}

const geminiNote = (part: Conversation.OpaquePart): string | undefined => {
  const block = part.block
  if (!isRecord(block)) return undefined
  // thoughts, and signed empty texts, mean nothing outside Gemini
  if (block["thought"] === true) return undefined
  if (typeof block["text"] === "string") return block["text"] === "" ? undefined : block["text"]
  return `[gemini ${geminiKind(block)} block omitted]`
}

/** A hosted tool (Responses `web_search`, Gemini `googleSearch`, ...): only its own format's renderer sends it. */
export const isHosted = (tool: Conversation.Tool): boolean => isRecord(tool.extra?.["hosted"])

/** The format a hosted tool belongs to: Responses hosted tools have a `type`, Gemini built-in tools do not. */
export const hostedFormat = (tool: Conversation.Tool): "openai-responses" | "gemini" | undefined => {
  const hosted = tool.extra?.["hosted"]
  if (!isRecord(hosted)) return undefined
  return typeof hosted["type"] === "string" ? "openai-responses" : "gemini"
}

export { isRecord }
