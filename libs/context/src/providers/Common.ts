/**
 * The neutral pieces every adapter's normalizer shares: the normalized
 * message and request shapes, opaque parts, `data:` URLs, tool call
 * arguments, tool annotations and the `system` field.
 */
import type { Conversation, Turn } from "@ctxd/contracts"

/** A neutral message and the index of the request message it came from. */
export interface NormalizedMessage {
  readonly message: Conversation.Message
  readonly sourceIndex: number
}

/** A whole turn request in neutral form. */
export interface NormalizedRequest {
  readonly messages: ReadonlyArray<NormalizedMessage>
  readonly system: ReadonlyArray<Conversation.SystemSection>
  readonly tools: ReadonlyArray<Conversation.Tool>
}

/** A pairing violation: `message` already names `messages[sourceIndex]`. */
export interface PairingError {
  /** Index of the offending message in the request's `messages`. */
  readonly sourceIndex: number
  /** Index of the offending message in the normalized list. */
  readonly index: number
  readonly message: string
}

/** True for a plain object (not an array). */
export const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A copy of an uninterpreted block without `cache_control` (ctxd places breakpoints itself). */
const stripCache = (block: Record<string, unknown>): Record<string, unknown> => {
  if (!("cache_control" in block)) return block
  const { cache_control: _drop, ...rest } = block
  return rest
}

/** An uninterpreted block of `format`, kept verbatim but for `cache_control`. */
export const opaque = (format: Conversation.OpaquePart["format"], block: Record<string, unknown>): Conversation.OpaquePart => ({
  type: "opaque",
  format,
  block: stripCache(block),
})

/** A `data:` URL with a base64 payload: its media type and data. */
export const DATA_URL = /^data:([^;,]+);base64,(.*)$/s

/** Tool call arguments: the parsed object, `{}` when they do not parse to one. */
export const parseArguments = (raw: string): unknown => {
  try {
    const parsed: unknown = JSON.parse(raw)
    return isRecord(parsed) ? parsed : {}
  } catch {
    return {}
  }
}

/** An open (not yet answered) tool call, for answering Gemini function responses that carry no id. */
export interface OpenCall {
  readonly id: string
  readonly name: string
  /** The order of the message that made the call: a larger step is more recent. */
  readonly step: number
}

/** The neutral `readOnly` field from a tool's `annotations.readOnlyHint`. */
export const readOnlyOf = (annotations: { readonly readOnlyHint?: boolean | undefined } | undefined) =>
  annotations?.readOnlyHint === undefined ? {} : { readOnly: annotations.readOnlyHint }

/**
 * The request's `system` field → sections. A string becomes one section
 * `{id: "system", cache: "5m"}`; an empty string or an absent field gives no
 * sections; list items keep their order and default to `cache: "5m"`. A
 * workspace reference gives `workspace`: the bundle's sections the shell read
 * (none when it read none).
 */
export const system = (
  value: Turn.System | undefined,
  workspace?: ReadonlyArray<Conversation.SystemSection>,
): Array<Conversation.SystemSection> => {
  if (value === undefined || value === "") return []
  if (typeof value === "string") return [{ id: "system", text: value, cache: "5m" }]
  if ("workspace" in value) return [...(workspace ?? [])]
  return value.map((s) => ({ id: s.id, text: s.text, cache: s.cache ?? "5m" }))
}
