/**
 * Gemini API input (`generateContent`): the `contents`, `systemInstruction`
 * and tools a turn request may carry when `format` is `"gemini"`.
 *
 * Contents: `{role: "user" | "model", parts}` (`role` may be left out: then
 * `user`). A part carries one datum — `text` (a thought summary when
 * `thought: true`), `inlineData {mimeType, data}`, `fileData {fileUri,
 * mimeType?}`, `functionCall {name, args?, id?}`, `functionResponse {name,
 * response, id?}` or any other kind (`executableCode`, `codeExecutionResult`,
 * ...) — and may carry a `thoughtSignature` (an opaque token the model
 * returned, which must go back with its part). Parts ctxd does not interpret
 * are kept as they are.
 *
 * Tools: `{functionDeclarations: [...]}` (a declaration's argument schema in
 * `parameters`, Gemini's OpenAPI subset, or `parametersJsonSchema`, JSON
 * Schema), and built-in tools (`googleSearch`, `codeExecution`,
 * `urlContext`, ...) which are passed through untouched.
 */
import { Schema } from "effect"

const Loose = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** The fields of a part that hold its datum: a part carries exactly one (`executableCode` etc. count too). */
export const DATA_FIELDS: ReadonlyArray<string> = [
  "text",
  "inlineData",
  "fileData",
  "functionCall",
  "functionResponse",
  "executableCode",
  "codeExecutionResult",
  "toolCall",
  "toolResponse",
]

export const Blob = Schema.Struct({ mimeType: Schema.String, data: Schema.String }, Loose)
export type Blob = typeof Blob.Type

export const FunctionCall = Schema.Struct(
  {
    name: Schema.String.pipe(Schema.minLength(1)),
    args: Schema.optional(Loose),
    id: Schema.optional(Schema.String),
  },
  Loose,
)
export type FunctionCall = typeof FunctionCall.Type

export const FunctionResponse = Schema.Struct(
  {
    name: Schema.String.pipe(Schema.minLength(1)),
    /** The function's output: `{output}` or `{error}` by Gemini's convention, any object otherwise. */
    response: Loose,
    id: Schema.optional(Schema.String),
  },
  Loose,
)
export type FunctionResponse = typeof FunctionResponse.Type

/**
 * One part. Known data (`text`, `inlineData`, `functionCall`,
 * `functionResponse`) are read; everything else is kept verbatim.
 */
export const Part = Schema.Struct(
  {
    text: Schema.optional(Schema.String),
    /** A thought summary (`text` with `thought: true`): kept verbatim, sent back only to Gemini. */
    thought: Schema.optional(Schema.Boolean),
    /** The model's opaque signature of its thinking: goes back on the part it came on. */
    thoughtSignature: Schema.optional(Schema.String),
    inlineData: Schema.optional(Blob),
    fileData: Schema.optional(Loose),
    functionCall: Schema.optional(FunctionCall),
    functionResponse: Schema.optional(FunctionResponse),
  },
  Loose,
)
  .pipe(
    Schema.filter((p) => DATA_FIELDS.filter((k) => (p as Record<string, unknown>)[k] !== undefined).length === 1, {
      message: () =>
        "a part must carry exactly one of text, inlineData, fileData, functionCall, functionResponse, executableCode, codeExecutionResult",
    }),
  )
  .annotations({ identifier: "GeminiPart" })
export type Part = typeof Part.Type

export const Role = Schema.Literal("user", "model")
export type Role = typeof Role.Type

export const Content = Schema.Struct({
  /** `user` (also function responses) or `model`; absent: `user`. */
  role: Schema.optional(Role),
  parts: Schema.Array(Part),
}).annotations({ identifier: "GeminiContent" })
export type Content = typeof Content.Type

/** The system instruction: a string, or a Content whose text parts are read (its role is ignored). */
export const SystemInstruction = Schema.Union(
  Schema.String,
  Schema.Struct({
    role: Schema.optional(Schema.String),
    parts: Schema.Array(Part),
  }),
).annotations({ identifier: "GeminiSystemInstruction" })
export type SystemInstruction = typeof SystemInstruction.Type

/** MCP-style tool annotations; ctxd reads `readOnlyHint`. */
export const ToolAnnotations = Schema.Struct({ readOnlyHint: Schema.optional(Schema.Boolean) }, Loose)

export const FunctionDeclaration = Schema.Struct(
  {
    /** Gemini: starts with a letter or `_`; letters, digits, `_`, `.`, `:`, `-`; at most 64 characters. */
    name: Schema.String.pipe(Schema.pattern(/^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/)),
    description: Schema.optional(Schema.String),
    /** The arguments in Gemini's OpenAPI-subset schema. */
    parameters: Schema.optional(Loose),
    /** The arguments in JSON Schema (exclusive with `parameters`). */
    parametersJsonSchema: Schema.optional(Schema.Unknown),
    /** ctxd extension: the toolset this tool belongs to. */
    toolset: Schema.optional(Schema.String),
    /** ctxd extension: MCP annotations. */
    annotations: Schema.optional(ToolAnnotations),
  },
  Loose,
).annotations({ identifier: "GeminiFunctionDeclaration" })
export type FunctionDeclaration = typeof FunctionDeclaration.Type

/**
 * A tool: `functionDeclarations`, and/or built-in tools (`googleSearch`,
 * `codeExecution`, `urlContext`, ...) which are passed through untouched.
 */
export const Tool = Schema.Struct(
  {
    functionDeclarations: Schema.optional(Schema.Array(FunctionDeclaration)),
  },
  Loose,
).annotations({ identifier: "GeminiTool" })
export type Tool = typeof Tool.Type
