/**
 * Opaque parts rendered into the other provider's format. Such parts only
 * meet the other renderer when a session changes format between turns.
 */
import type { Conversation } from "@ctxd/contracts"
import * as Reasoning from "../Reasoning.ts"

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The `type` of an opaque block, or `"unknown"`. */
export const blockType = (part: Conversation.OpaquePart): string =>
  isRecord(part.block) && typeof part.block["type"] === "string" ? part.block["type"] : "unknown"

/**
 * A text stand-in for an opaque part of the other format: an OpenAI refusal
 * becomes its text; reasoning ({@link Reasoning.isReasoning}: Anthropic
 * thinking blocks, Responses reasoning items) is dropped (`undefined`: only
 * the provider that signed it can read it);
 * anything else becomes a short note `[<format> <type> block omitted]`.
 */
export const note = (part: Conversation.OpaquePart): string | undefined => {
  if (Reasoning.isReasoning(part)) return undefined
  const type = blockType(part)
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

/** A hosted Responses tool (`web_search`, ...): only the Responses renderer sends it. */
export const isHosted = (tool: Conversation.Tool): boolean => isRecord(tool.extra?.["hosted"])

export { isRecord }
