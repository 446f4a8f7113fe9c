/**
 * OpenAI Chat Completions input: the messages and tools a turn request may
 * carry when `format` is `"openai"`. Content parts ctxd does not interpret
 * (audio, files, refusals) are accepted and passed through unchanged.
 */
import { Schema } from "effect"

const Loose = Schema.Record({ key: Schema.String, value: Schema.Unknown })

export const TextPart = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
export type TextPart = typeof TextPart.Type

export const ImagePart = Schema.Struct({
  type: Schema.Literal("image_url"),
  image_url: Schema.Struct({ url: Schema.String, detail: Schema.optional(Schema.String) }),
})
export type ImagePart = typeof ImagePart.Type

const KNOWN_PARTS: ReadonlyArray<string> = ["text", "image_url"]

/** Any other content part (`input_audio`, `file`, `refusal`, ...): kept as it is. */
export const OtherPart = Schema.Struct(
  {
    type: Schema.String.pipe(Schema.filter((t) => !KNOWN_PARTS.includes(t), { message: () => "malformed content part" })),
  },
  Loose,
)
export type OtherPart = typeof OtherPart.Type

export const ContentPart = Schema.Union(TextPart, ImagePart, OtherPart)
export type ContentPart = typeof ContentPart.Type

const Name = Schema.optional(Schema.String)

export const SystemMessage = Schema.Struct({
  role: Schema.Literal("system", "developer"),
  content: Schema.Union(Schema.String, Schema.Array(TextPart)),
  name: Name,
})
export type SystemMessage = typeof SystemMessage.Type

export const UserMessage = Schema.Struct({
  role: Schema.Literal("user"),
  content: Schema.Union(Schema.String, Schema.Array(ContentPart)),
  name: Name,
})
export type UserMessage = typeof UserMessage.Type

export const ToolCall = Schema.Struct({
  id: Schema.String.pipe(Schema.minLength(1)),
  type: Schema.Literal("function"),
  function: Schema.Struct({ name: Schema.String.pipe(Schema.minLength(1)), arguments: Schema.String }),
})
export type ToolCall = typeof ToolCall.Type

export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  content: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, Schema.Array(ContentPart)))),
  tool_calls: Schema.optional(Schema.Array(ToolCall)),
  refusal: Schema.optional(Schema.NullOr(Schema.String)),
  name: Name,
})
export type AssistantMessage = typeof AssistantMessage.Type

export const ToolMessage = Schema.Struct({
  role: Schema.Literal("tool"),
  tool_call_id: Schema.String.pipe(Schema.minLength(1)),
  content: Schema.Union(Schema.String, Schema.Array(TextPart)),
})
export type ToolMessage = typeof ToolMessage.Type

export const Message = Schema.Union(SystemMessage, UserMessage, AssistantMessage, ToolMessage).annotations({
  identifier: "OpenAIMessage",
})
export type Message = typeof Message.Type

/** MCP-style tool annotations; ctxd reads `readOnlyHint`. */
export const ToolAnnotations = Schema.Struct({ readOnlyHint: Schema.optional(Schema.Boolean) }, Loose)

export const Tool = Schema.Struct({
  type: Schema.Literal("function"),
  function: Schema.Struct({
    name: Schema.String.pipe(Schema.pattern(/^[a-zA-Z0-9_-]{1,128}$/)),
    description: Schema.optional(Schema.String),
    parameters: Schema.optional(Loose),
    strict: Schema.optional(Schema.NullOr(Schema.Boolean)),
  }),
  /** ctxd extension: the toolset this tool belongs to. */
  toolset: Schema.optional(Schema.String),
  /** ctxd extension: MCP annotations. */
  annotations: Schema.optional(ToolAnnotations),
}).annotations({ identifier: "OpenAITool" })
export type Tool = typeof Tool.Type
