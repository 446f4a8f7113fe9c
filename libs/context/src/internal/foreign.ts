/**
 * Opaque parts rendered into the other provider's format. Such parts only
 * meet the other renderer when a session changes format between turns.
 */
import type { Conversation } from "@ctxd/contracts"
import * as ProviderCompaction from "../ProviderCompaction.ts"
import * as Opaque from "../providers/Opaque.ts"
import * as OpaqueBlock from "../providers/OpaqueBlock.ts"
import * as Reasoning from "../Reasoning.ts"

const { isRecord } = OpaqueBlock

/** The `type` of an opaque block, or `"unknown"`. */
export const blockType = (part: Conversation.OpaquePart): string => OpaqueBlock.blockType(part.block)

/**
 * A text stand-in for an opaque part of the other format: reasoning
 * ({@link Reasoning.isReasoning}: only the provider that signed it can read
 * it) and provider compactions (opaque to another provider; ctxd still holds
 * the history they summarize) are dropped (`undefined`); anything else reads
 * as its format's adapter says ({@link OpaqueBlock.Rules.note}: an OpenAI
 * refusal its text, a Gemini text its text, else a short note
 * `[<format> <type> block omitted]`).
 */
export const note = (part: Conversation.OpaquePart): string | undefined => {
  if (Reasoning.isReasoning(part) || ProviderCompaction.formatOf(part) !== undefined) return undefined
  return Opaque.of(part.format).note(part)
}

/** Shallow copy of an opaque block without `cache_control` (a fresh object the renderer may mark). */
export const copyBlock = (part: Conversation.OpaquePart): Record<string, unknown> => {
  if (!isRecord(part.block)) return { type: "unknown" }
  const { cache_control: _drop, ...rest } = part.block
  return rest
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
