/**
 * Anthropic Messages input: the subset of the Messages API request that a
 * turn request may carry in `messages` and `tools` when `format` is
 * `"anthropic"`. Blocks ctxd does not interpret (thinking, documents, server
 * tool blocks) are accepted and passed through unchanged.
 */
import { Schema } from "effect"

const Loose = Schema.Record({ key: Schema.String, value: Schema.Unknown })

export const CacheControl = Schema.Struct({
  type: Schema.Literal("ephemeral"),
  ttl: Schema.optional(Schema.Literal("5m", "1h")),
})

export const TextBlock = Schema.Struct({
  type: Schema.Literal("text"),
  text: Schema.String,
  cache_control: Schema.optional(CacheControl),
})
export type TextBlock = typeof TextBlock.Type

export const ImageBlock = Schema.Struct({
  type: Schema.Literal("image"),
  source: Schema.Union(
    Schema.Struct({ type: Schema.Literal("base64"), media_type: Schema.String, data: Schema.String }),
    Schema.Struct({ type: Schema.Literal("url"), url: Schema.String }),
  ),
  cache_control: Schema.optional(CacheControl),
})
export type ImageBlock = typeof ImageBlock.Type

export const ToolUseBlock = Schema.Struct({
  type: Schema.Literal("tool_use"),
  id: Schema.String.pipe(Schema.minLength(1)),
  name: Schema.String.pipe(Schema.minLength(1)),
  input: Loose,
  cache_control: Schema.optional(CacheControl),
})
export type ToolUseBlock = typeof ToolUseBlock.Type

export const ToolResultBlock = Schema.Struct({
  type: Schema.Literal("tool_result"),
  tool_use_id: Schema.String.pipe(Schema.minLength(1)),
  content: Schema.optional(Schema.Union(Schema.String, Schema.Array(Schema.Union(TextBlock, ImageBlock)))),
  is_error: Schema.optional(Schema.Boolean),
  cache_control: Schema.optional(CacheControl),
})
export type ToolResultBlock = typeof ToolResultBlock.Type

const KNOWN_BLOCKS: ReadonlyArray<string> = ["text", "image", "tool_use", "tool_result"]

/** Any other block (`thinking`, `redacted_thinking`, `document`, a server-side `compaction`, ...): kept as it is. */
export const OtherBlock = Schema.Struct(
  {
    type: Schema.String.pipe(Schema.filter((t) => !KNOWN_BLOCKS.includes(t), { message: () => "malformed content block" })),
  },
  Loose,
)
export type OtherBlock = typeof OtherBlock.Type

export const ContentBlock = Schema.Union(TextBlock, ImageBlock, ToolUseBlock, ToolResultBlock, OtherBlock)
export type ContentBlock = typeof ContentBlock.Type

export const Message = Schema.Struct({
  /**
   * `system`: a mid-conversation system message, as models that take them
   * accept it right after a user turn (Claude Code sends one); stored where
   * it stands.
   */
  role: Schema.Literal("user", "assistant", "system"),
  content: Schema.Union(Schema.String, Schema.Array(ContentBlock)),
}).annotations({ identifier: "AnthropicMessage" })
export type Message = typeof Message.Type

/** MCP-style tool annotations; ctxd reads `readOnlyHint`. */
export const ToolAnnotations = Schema.Struct({ readOnlyHint: Schema.optional(Schema.Boolean) }, Loose)

export const Tool = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(/^[a-zA-Z0-9_-]{1,128}$/)),
  description: Schema.optional(Schema.String),
  input_schema: Loose,
  /** ctxd extension: the toolset this tool belongs to. */
  toolset: Schema.optional(Schema.String),
  /** ctxd extension: MCP annotations. */
  annotations: Schema.optional(ToolAnnotations),
  cache_control: Schema.optional(CacheControl),
}).annotations({ identifier: "AnthropicTool" })
export type Tool = typeof Tool.Type
