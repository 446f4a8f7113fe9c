/**
 * OpenAI Responses API input: the `input` items, `instructions` and tools a
 * turn request may carry when `format` is `"openai-responses"`.
 *
 * Items: `message` (roles `user`, `assistant`, `system`, `developer`; content
 * a string or `input_text` / `output_text` / `input_image` parts, other parts
 * such as `input_file` or `refusal` are kept as they are), `function_call`,
 * `function_call_output`, `custom_tool_call` / `custom_tool_call_output`
 * (free-form input), `reasoning` (kept verbatim, `encrypted_content`
 * included), the call items of hosted tools that carry their own result
 * (`web_search_call`, `file_search_call`, `code_interpreter_call`,
 * `image_generation_call`, `mcp_call`, `mcp_list_tools`: kept verbatim) and
 * `compaction` (a provider compaction, kept verbatim: the latest one is a
 * summary boundary, nothing before it is sent). Tools: `function` tools, and hosted tools (`web_search`,
 * `file_search`, ...) which are passed through untouched.
 */
import { Schema } from "effect"

const Loose = Schema.Record({ key: Schema.String, value: Schema.Unknown })

export const InputText = Schema.Struct({ type: Schema.Literal("input_text"), text: Schema.String })
export type InputText = typeof InputText.Type

export const OutputText = Schema.Struct(
  { type: Schema.Literal("output_text"), text: Schema.String, annotations: Schema.optional(Schema.Array(Schema.Unknown)) },
  Loose,
)
export type OutputText = typeof OutputText.Type

export const InputImage = Schema.Struct({
  type: Schema.Literal("input_image"),
  image_url: Schema.optional(Schema.NullOr(Schema.String)),
  file_id: Schema.optional(Schema.NullOr(Schema.String)),
  detail: Schema.optional(Schema.String),
})
export type InputImage = typeof InputImage.Type

const KNOWN_PARTS: ReadonlyArray<string> = ["input_text", "output_text", "input_image"]

/** Any other content part (`input_file`, `input_audio`, `refusal`, ...): kept as it is. */
export const OtherPart = Schema.Struct(
  {
    type: Schema.String.pipe(Schema.filter((t) => !KNOWN_PARTS.includes(t), { message: () => "malformed content part" })),
  },
  Loose,
)
export type OtherPart = typeof OtherPart.Type

export const ContentPart = Schema.Union(InputText, OutputText, InputImage, OtherPart)
export type ContentPart = typeof ContentPart.Type

export const MessageItem = Schema.Struct({
  type: Schema.optional(Schema.Literal("message")),
  role: Schema.Literal("user", "assistant", "system", "developer"),
  content: Schema.Union(Schema.String, Schema.Array(ContentPart)),
  id: Schema.optional(Schema.String),
  status: Schema.optional(Schema.String),
}).annotations({ identifier: "ResponsesMessageItem" })
export type MessageItem = typeof MessageItem.Type

export const FunctionCallItem = Schema.Struct({
  type: Schema.Literal("function_call"),
  call_id: Schema.String.pipe(Schema.minLength(1)),
  name: Schema.String.pipe(Schema.minLength(1)),
  arguments: Schema.String,
  id: Schema.optional(Schema.String),
  status: Schema.optional(Schema.String),
}).annotations({ identifier: "ResponsesFunctionCallItem" })
export type FunctionCallItem = typeof FunctionCallItem.Type

export const FunctionCallOutputItem = Schema.Struct({
  type: Schema.Literal("function_call_output"),
  call_id: Schema.String.pipe(Schema.minLength(1)),
  output: Schema.Union(Schema.String, Schema.Array(ContentPart)),
  id: Schema.optional(Schema.String),
  status: Schema.optional(Schema.String),
}).annotations({ identifier: "ResponsesFunctionCallOutputItem" })
export type FunctionCallOutputItem = typeof FunctionCallOutputItem.Type

/** A call of a custom (free-form input) tool. */
export const CustomToolCallItem = Schema.Struct({
  type: Schema.Literal("custom_tool_call"),
  call_id: Schema.String.pipe(Schema.minLength(1)),
  name: Schema.String.pipe(Schema.minLength(1)),
  input: Schema.String,
  id: Schema.optional(Schema.String),
  status: Schema.optional(Schema.String),
}).annotations({ identifier: "ResponsesCustomToolCallItem" })
export type CustomToolCallItem = typeof CustomToolCallItem.Type

export const CustomToolCallOutputItem = Schema.Struct({
  type: Schema.Literal("custom_tool_call_output"),
  call_id: Schema.String.pipe(Schema.minLength(1)),
  output: Schema.Union(Schema.String, Schema.Array(ContentPart)),
  id: Schema.optional(Schema.String),
}).annotations({ identifier: "ResponsesCustomToolCallOutputItem" })
export type CustomToolCallOutputItem = typeof CustomToolCallOutputItem.Type

/** A reasoning item: kept verbatim (its `encrypted_content` must go back with the call after it). */
export const ReasoningItem = Schema.Struct(
  {
    type: Schema.Literal("reasoning"),
    id: Schema.optional(Schema.String),
    summary: Schema.Array(Schema.Struct({ type: Schema.String, text: Schema.String })),
    encrypted_content: Schema.optional(Schema.NullOr(Schema.String)),
  },
  Loose,
).annotations({ identifier: "ResponsesReasoningItem" })
export type ReasoningItem = typeof ReasoningItem.Type

/** The hosted-tool call items ctxd carries back verbatim: each holds its own result (no separate output item). */
export const HOSTED_CALL_TYPES = [
  "web_search_call",
  "file_search_call",
  "code_interpreter_call",
  "image_generation_call",
  "mcp_call",
  "mcp_list_tools",
  // a server-executed tool search: the call and its output, the loaded definitions in `tools`
  "tool_search_call",
  "tool_search_output",
] as const

/** A hosted tool's call item (see {@link HOSTED_CALL_TYPES}): kept verbatim as an assistant-side item. */
export const HostedCallItem = Schema.Struct(
  {
    type: Schema.Literal(...HOSTED_CALL_TYPES),
    id: Schema.String.pipe(Schema.minLength(1)),
  },
  Loose,
).annotations({ identifier: "ResponsesHostedCallItem" })
export type HostedCallItem = typeof HostedCallItem.Type

/**
 * A compaction item (server-side compaction in `responses.create` with
 * `context_management`, or `POST /responses/compact`): `encrypted_content`
 * carries the state of everything before it, opaque; kept verbatim.
 */
export const CompactionItem = Schema.Struct({
  type: Schema.Literal("compaction"),
  encrypted_content: Schema.String.pipe(Schema.minLength(1)),
  id: Schema.optional(Schema.NullOr(Schema.String)),
}).annotations({ identifier: "ResponsesCompactionItem" })
export type CompactionItem = typeof CompactionItem.Type

export const Item = Schema.Union(
  MessageItem,
  FunctionCallItem,
  FunctionCallOutputItem,
  CustomToolCallItem,
  CustomToolCallOutputItem,
  ReasoningItem,
  HostedCallItem,
  CompactionItem,
).annotations({
  identifier: "ResponsesInputItem",
})
export type Item = typeof Item.Type

/** MCP-style tool annotations; ctxd reads `readOnlyHint`. */
export const ToolAnnotations = Schema.Struct({ readOnlyHint: Schema.optional(Schema.Boolean) }, Loose)

export const FunctionTool = Schema.Struct({
  type: Schema.Literal("function"),
  name: Schema.String.pipe(Schema.pattern(/^[a-zA-Z0-9_-]{1,128}$/)),
  description: Schema.optional(Schema.NullOr(Schema.String)),
  parameters: Schema.optional(Schema.NullOr(Loose)),
  strict: Schema.optional(Schema.NullOr(Schema.Boolean)),
  /** ctxd extension: the toolset this tool belongs to. */
  toolset: Schema.optional(Schema.String),
  /** ctxd extension: MCP annotations. */
  annotations: Schema.optional(ToolAnnotations),
}).annotations({ identifier: "ResponsesFunctionTool" })
export type FunctionTool = typeof FunctionTool.Type

/** A hosted tool (`web_search`, `file_search`, `code_interpreter`, ...): passed through untouched. */
export const HostedTool = Schema.Struct(
  {
    type: Schema.String.pipe(Schema.filter((t) => t !== "function" && t.length > 0, { message: () => "malformed function tool" })),
  },
  Loose,
).annotations({ identifier: "ResponsesHostedTool" })
export type HostedTool = typeof HostedTool.Type

export const Tool = Schema.Union(FunctionTool, HostedTool).annotations({ identifier: "ResponsesTool" })
export type Tool = typeof Tool.Type
