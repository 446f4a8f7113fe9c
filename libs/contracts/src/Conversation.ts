/**
 * The provider-neutral conversation model. Every input format (Anthropic
 * Messages, OpenAI Chat Completions, OpenAI Responses, Gemini) is normalized
 * into it, it is what the store keeps, and every output format is rendered
 * from it.
 *
 * - `system` messages are pinned instructions that arrived inside `messages`
 *   (OpenAI `system`/`developer`); the request's own `system` field becomes
 *   {@link SystemSection}s instead.
 * - `tool` messages carry only `tool_result` parts (one or several, so an
 *   Anthropic user message with parallel results stays one message).
 */
import { Schema } from "effect"

/** Where an image comes from: inline base64 data or a URL. */
export const ImageSource = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("base64"), mediaType: Schema.String, data: Schema.String }),
  Schema.Struct({ kind: Schema.Literal("url"), url: Schema.String }),
)
export type ImageSource = typeof ImageSource.Type

export const TextPart = Schema.Struct({
  type: Schema.Literal("text"),
  text: Schema.String,
  /** Gemini `thoughtSignature` this text came with: sent back only in the Gemini format. */
  signature: Schema.optional(Schema.String),
})
export type TextPart = typeof TextPart.Type

export const ImagePart = Schema.Struct({
  type: Schema.Literal("image"),
  source: ImageSource,
  /** OpenAI `detail`, kept for a faithful round trip. */
  detail: Schema.optional(Schema.String),
})
export type ImagePart = typeof ImagePart.Type

/** A block we do not interpret (thinking, documents, refusals...): passed through in its own format. */
export const OpaquePart = Schema.Struct({
  type: Schema.Literal("opaque"),
  format: Schema.Literal("anthropic", "openai", "openai-responses", "gemini"),
  block: Schema.Unknown,
})
export type OpaquePart = typeof OpaquePart.Type

export const ToolCallPart = Schema.Struct({
  type: Schema.Literal("tool_call"),
  id: Schema.String,
  name: Schema.String,
  /** The parsed arguments object. */
  input: Schema.Unknown,
  /** OpenAI's raw `arguments` string, kept so a re-render is byte-identical. */
  arguments: Schema.optional(Schema.String),
  /** A Responses custom tool call: `arguments` is its free-form `input` (and `input` is `{input}`). */
  custom: Schema.optional(Schema.Boolean),
  /** Gemini `thoughtSignature` this call came with: sent back only in the Gemini format. */
  signature: Schema.optional(Schema.String),
  /**
   * True when ctxd made the id up (a Gemini call without one): the Gemini
   * renderer sends neither it nor its result's id.
   */
  generatedId: Schema.optional(Schema.Boolean),
})
export type ToolCallPart = typeof ToolCallPart.Type

export const ToolResultContent = Schema.Union(TextPart, ImagePart)
export type ToolResultContent = typeof ToolResultContent.Type

export const ToolResultPart = Schema.Struct({
  type: Schema.Literal("tool_result"),
  callId: Schema.String,
  content: Schema.Array(ToolResultContent),
  isError: Schema.Boolean,
})
export type ToolResultPart = typeof ToolResultPart.Type

export const Part = Schema.Union(TextPart, ImagePart, OpaquePart, ToolCallPart, ToolResultPart)
export type Part = typeof Part.Type

export const Role = Schema.Literal("system", "user", "assistant", "tool")
export type Role = typeof Role.Type

export const Message = Schema.Struct({
  role: Role,
  parts: Schema.Array(Part),
  /** OpenAI `name` (participant name), when given. */
  name: Schema.optional(Schema.String),
  /** For `system` messages: true when it arrived as OpenAI `developer`. */
  developer: Schema.optional(Schema.Boolean),
  /**
   * For `system` messages ctxd appended (memory, learnings, a loop nudge):
   * true — sent where it stands, as a mid-conversation system message where
   * the model takes one, else as user text at that place; never pinned to
   * the top-level system prompt.
   */
  midConversation: Schema.optional(Schema.Boolean),
})
export type Message = typeof Message.Type

/** Prompt-cache lifetime requested for a system section. */
export const CacheTtl = Schema.Literal("1h", "5m", "none")
export type CacheTtl = typeof CacheTtl.Type

export const SystemSection = Schema.Struct({
  id: Schema.String,
  text: Schema.String,
  cache: CacheTtl,
})
export type SystemSection = typeof SystemSection.Type

/** A tool definition, provider-neutral. */
export const Tool = Schema.Struct({
  name: Schema.String,
  description: Schema.optional(Schema.String),
  /** JSON Schema of the arguments. */
  inputSchema: Schema.Unknown,
  /** The toolset this tool belongs to (on-demand loading). */
  toolset: Schema.optional(Schema.String),
  /** True for tools that do not change anything (MCP `readOnlyHint`). */
  readOnly: Schema.optional(Schema.Boolean),
  /** Provider-specific extras passed through (OpenAI `strict`, Anthropic `type`). */
  extra: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
})
export type Tool = typeof Tool.Type

/** The ids of the tool calls a message makes. */
export const toolCallIds = (message: Message): ReadonlyArray<string> => message.parts.flatMap((p) => (p.type === "tool_call" ? [p.id] : []))

/** The call ids a message answers with tool results. */
export const toolResultIds = (message: Message): ReadonlyArray<string> =>
  message.parts.flatMap((p) => (p.type === "tool_result" ? [p.callId] : []))
