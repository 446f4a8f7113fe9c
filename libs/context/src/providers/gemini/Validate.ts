/**
 * Request validation of the Gemini API (`generateContent`, `countTokens`),
 * for the rules ctxd must never break (known fields, roles, non-empty parts
 * with one datum, function responses right after their function call turn,
 * as many and with the same names; for `gemini-3*` models a
 * `thoughtSignature` on the first function call of every model step of the
 * current turn; no unsigned empty text): the fake provider's validator for this API (pure, so it
 * lives with the adapter). Errors in Google's shape.
 */

type Json = Record<string, unknown>

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** A rejected request: the HTTP status, Google's status name and the message. */
export interface Problem {
  readonly code: number
  readonly status: string
  readonly message: string
}

const GENERATE_KEYS = new Set([
  "model",
  "contents",
  "systemInstruction",
  "tools",
  "toolConfig",
  "safetySettings",
  "generationConfig",
  "cachedContent",
  "serviceTier",
  "store",
])
const COUNT_KEYS = new Set(["contents", "generateContentRequest"])
const GENERATION_KEYS = new Set([
  "stopSequences",
  "responseMimeType",
  "responseSchema",
  "responseJsonSchema",
  "_responseJsonSchema",
  "responseModalities",
  "candidateCount",
  "maxOutputTokens",
  "temperature",
  "topP",
  "topK",
  "seed",
  "presencePenalty",
  "frequencyPenalty",
  "responseLogprobs",
  "logprobs",
  "enableEnhancedCivicAnswers",
  "speechConfig",
  "thinkingConfig",
  "imageConfig",
  "mediaResolution",
])
const PART_KEYS = new Set([
  "text",
  "thought",
  "thoughtSignature",
  "inlineData",
  "fileData",
  "functionCall",
  "functionResponse",
  "executableCode",
  "codeExecutionResult",
  "videoMetadata",
  "partMetadata",
  "mediaResolution",
  "toolCall",
  "toolResponse",
])
const DATA_KEYS = [
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
const CALL_KEYS = new Set(["name", "args", "id"])
const RESPONSE_KEYS = new Set(["name", "response", "id", "parts", "willContinue", "scheduling"])
const DECLARATION_KEYS = new Set([
  "name",
  "description",
  "parameters",
  "parametersJsonSchema",
  "response",
  "responseJsonSchema",
  "behavior",
])
const TOOL_KEYS = new Set([
  "functionDeclarations",
  "googleSearch",
  "googleSearchRetrieval",
  "codeExecution",
  "urlContext",
  "fileSearch",
  "googleMaps",
  "computerUse",
  "retrieval",
  "mcpServers",
])
const FUNCTION_NAME = /^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/

/** Gemini 3 models reject a function call step of the current turn without a thought signature. */
export const requiresSignatures = (model: string): boolean => /^gemini-3/i.test(model)

const bad = (message: string): Problem => ({ code: 400, status: "INVALID_ARGUMENT", message })
const unknown = (name: string, at?: string): Problem =>
  bad(`Invalid JSON payload received. Unknown name "${name}"${at === undefined ? "" : ` at '${at}'`}: Cannot find field.`)
const field = (path: string, text: string): Problem => bad(`* GenerateContentRequest.${path}: ${text}\n`)

const list = (u: unknown): ReadonlyArray<unknown> => (Array.isArray(u) ? u : [])

const validatePart = (part: unknown, at: string): Problem | undefined => {
  if (!isRecord(part))
    return bad(`Invalid value at '${at}' (type.googleapis.com/google.ai.generativelanguage.v1beta.Part), expected an object`)
  for (const key of Object.keys(part)) if (!PART_KEYS.has(key)) return unknown(key, at)
  const data = DATA_KEYS.filter((k) => part[k] !== undefined)
  if (data.length === 0) return field(`${at}.data`, "required oneof field 'data' must have one initialized field")
  if (data.length > 1) return bad(`Invalid value at '${at}': oneof field 'data' is already set. Cannot set '${data[1]!}'`)
  if (part["text"] !== undefined && typeof part["text"] !== "string") return bad(`Invalid value at '${at}.text' (TYPE_STRING)`)
  const signature = part["thoughtSignature"]
  // A content's `parts` are required (the Content type of the REST reference,
  // https://ai.google.dev/api/rest/v1beta/cachedContents, and Vertex AI's: "Required. Ordered
  // Parts that constitute a single message"). That a text part needs text is taken from the
  // API's error text, quoted below. Only a signed empty text
  // (the end of a thinking step) goes back as it came.
  if (part["text"] === "" && signature === undefined) {
    return bad("Unable to submit request because it has an empty text parameter. Add a value to the parameter and try again.")
  }
  if (signature !== undefined && (typeof signature !== "string" || signature === ""))
    return bad(`Invalid value at '${at}.thought_signature' (TYPE_BYTES)`)
  const blob = part["inlineData"]
  if (blob !== undefined && (!isRecord(blob) || typeof blob["mimeType"] !== "string" || typeof blob["data"] !== "string")) {
    return field(`${at}.inline_data`, "mime_type and data must be set")
  }
  const call = part["functionCall"]
  if (call !== undefined) {
    if (!isRecord(call)) return bad(`Invalid value at '${at}.function_call', expected an object`)
    for (const key of Object.keys(call)) if (!CALL_KEYS.has(key)) return unknown(key, `${at}.function_call`)
    if (typeof call["name"] !== "string" || call["name"] === "") return field(`${at}.function_call.name`, "Name cannot be empty.")
    if (call["args"] !== undefined && !isRecord(call["args"]))
      return bad(`Invalid value at '${at}.function_call.args' (type.googleapis.com/google.protobuf.Struct)`)
  }
  const response = part["functionResponse"]
  if (response !== undefined) {
    if (!isRecord(response)) return bad(`Invalid value at '${at}.function_response', expected an object`)
    for (const key of Object.keys(response)) if (!RESPONSE_KEYS.has(key)) return unknown(key, `${at}.function_response`)
    if (typeof response["name"] !== "string" || response["name"] === "")
      return field(`${at}.function_response.name`, "Name cannot be empty.")
    if (!isRecord(response["response"]))
      return field(`${at}.function_response.response`, "response must be a JSON object (google.protobuf.Struct)")
  }
  return undefined
}

const isResponseTurn = (parts: ReadonlyArray<Json>): boolean => parts.some((p) => p["functionResponse"] !== undefined)

/**
 * The function calling rules: a model turn with function calls is followed
 * by a user turn with exactly as many function responses, with the same
 * names (in any order), and a function response turn follows a function call
 * turn. For Gemini 3 models, in the current turn (after the last user turn
 * that is not only function responses) the first function call of each model
 * step carries a `thoughtSignature`.
 */
const validateCalls = (contents: ReadonlyArray<Json>, model: string): Problem | undefined => {
  const partsOf = (c: Json): ReadonlyArray<Json> => list(c["parts"]) as ReadonlyArray<Json>
  for (let i = 0; i < contents.length; i++) {
    const parts = partsOf(contents[i]!)
    const calls = parts.flatMap((p) => (isRecord(p["functionCall"]) ? [String(p["functionCall"]["name"])] : []))
    const responses = parts.flatMap((p) => (isRecord(p["functionResponse"]) ? [String(p["functionResponse"]["name"])] : []))
    if (responses.length > 0) {
      const previous = i > 0 ? contents[i - 1]! : undefined
      const asked =
        previous === undefined || previous["role"] !== "model"
          ? []
          : partsOf(previous).flatMap((p) => (isRecord(p["functionCall"]) ? [String(p["functionCall"]["name"])] : []))
      if (asked.length === 0) {
        return bad("Please ensure that function response turn comes immediately after a function call turn.")
      }
      if (asked.length !== responses.length) {
        return bad(
          "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.",
        )
      }
      const left = [...asked]
      for (const name of responses) {
        const at = left.indexOf(name)
        if (at < 0)
          return bad(
            `Please ensure that the name of function response part '${name}' matches the name of a function call part of the function call turn.`,
          )
        left.splice(at, 1)
      }
    }
    if (calls.length > 0) {
      if (contents[i]!["role"] !== "model") return bad("Please ensure that function call turns are model turns (role 'model').")
      if (i > 0 && contents[i - 1]!["role"] === "model") {
        return bad("Please ensure that function call turn comes immediately after a user turn or after a function response turn.")
      }
      const next = contents[i + 1]
      if (next !== undefined && !isResponseTurn(partsOf(next))) {
        return bad("Please ensure that function call turn comes immediately before a function response turn.")
      }
    }
  }
  if (!requiresSignatures(model)) return undefined
  let start = 0
  for (let i = 0; i < contents.length; i++) {
    const c = contents[i]!
    if (c["role"] !== "model" && !partsOf(c).every((p) => p["functionResponse"] !== undefined)) start = i
  }
  for (let i = start; i < contents.length; i++) {
    const parts = partsOf(contents[i]!)
    const k = parts.findIndex((p) => p["functionCall"] !== undefined)
    if (contents[i]!["role"] !== "model" || k < 0) continue
    if (typeof parts[k]!["thoughtSignature"] !== "string") {
      const name = String((parts[k]!["functionCall"] as Json)["name"])
      return bad(
        `Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call \`default_api:${name}\` , position ${i + 1}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.`,
      )
    }
  }
  return undefined
}

const validateContents = (contents: unknown, model: string): Problem | undefined => {
  if (!Array.isArray(contents) || contents.length === 0) return field("contents", "contents is not specified")
  for (const [i, content] of contents.entries()) {
    const at = `contents[${i}]`
    if (!isRecord(content))
      return bad(`Invalid value at '${at}' (type.googleapis.com/google.ai.generativelanguage.v1beta.Content), expected an object`)
    for (const key of Object.keys(content)) if (key !== "role" && key !== "parts") return unknown(key, at)
    const role = content["role"]
    if (role !== undefined && role !== "user" && role !== "model") return bad("Please use a valid role: user, model.")
    const parts = content["parts"]
    if (!Array.isArray(parts) || parts.length === 0) return field(`${at}.parts`, "contents.parts must not be empty.")
    for (const [k, part] of parts.entries()) {
      const problem = validatePart(part, `${at}.parts[${k}]`)
      if (problem !== undefined) return problem
    }
  }
  return validateCalls(contents as ReadonlyArray<Json>, model)
}

const validateTools = (tools: unknown): Problem | undefined => {
  if (tools === undefined) return undefined
  if (!Array.isArray(tools)) return bad("Invalid value at 'tools', expected a list")
  for (const [i, tool] of tools.entries()) {
    if (!isRecord(tool)) return bad(`Invalid value at 'tools[${i}]', expected an object`)
    for (const key of Object.keys(tool)) if (!TOOL_KEYS.has(key)) return unknown(key, `tools[${i}]`)
    for (const [k, d] of list(tool["functionDeclarations"]).entries()) {
      const at = `tools[${i}].function_declarations[${k}]`
      if (!isRecord(d)) return bad(`Invalid value at '${at}', expected an object`)
      for (const key of Object.keys(d)) if (!DECLARATION_KEYS.has(key)) return unknown(key, at)
      if (typeof d["name"] !== "string" || !FUNCTION_NAME.test(d["name"])) {
        return field(
          `${at}.name`,
          "Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 64.",
        )
      }
      if (d["parameters"] !== undefined && d["parametersJsonSchema"] !== undefined) {
        return field(`${at}.parameters_json_schema`, "parameters_json_schema and parameters cannot both be set.")
      }
    }
  }
  return undefined
}

const validateSystem = (system: unknown): Problem | undefined => {
  if (system === undefined) return undefined
  if (!isRecord(system))
    return bad(
      "Invalid value at 'system_instruction' (type.googleapis.com/google.ai.generativelanguage.v1beta.Content), expected an object",
    )
  for (const key of Object.keys(system)) if (key !== "role" && key !== "parts") return unknown(key, "system_instruction")
  const parts = system["parts"]
  if (!Array.isArray(parts) || parts.length === 0) return field("system_instruction.parts", "contents.parts must not be empty.")
  for (const [k, part] of parts.entries()) {
    const problem = validatePart(part, `system_instruction.parts[${k}]`)
    if (problem !== undefined) return problem
  }
  return undefined
}

/** The first problem of a `generateContent` body (REST shape) for `model`, or `undefined`. */
export const validateGenerate = (body: unknown, model: string): Problem | undefined => {
  if (!isRecord(body)) return bad("Invalid JSON payload received. Expected an object.")
  for (const key of Object.keys(body)) if (!GENERATE_KEYS.has(key)) return unknown(key)
  const generation = body["generationConfig"]
  if (generation !== undefined) {
    if (!isRecord(generation)) return bad("Invalid value at 'generation_config', expected an object")
    for (const key of Object.keys(generation)) if (!GENERATION_KEYS.has(key)) return unknown(key, "generation_config")
    const max = generation["maxOutputTokens"]
    if (max !== undefined && (typeof max !== "number" || !Number.isInteger(max) || max < 1)) {
      return bad("Invalid value at 'generation_config.max_output_tokens' (TYPE_INT32)")
    }
  }
  return validateSystem(body["systemInstruction"]) ?? validateTools(body["tools"]) ?? validateContents(body["contents"], model)
}

/**
 * A `countTokens` body: `{contents}` (what `@google/genai` sends) or
 * `{generateContentRequest}` (a whole `generateContent` body); returns the
 * body to count, or the problem.
 */
export const countBody = (body: unknown, model: string): { readonly body: Json } | { readonly problem: Problem } => {
  if (!isRecord(body)) return { problem: bad("Invalid JSON payload received. Expected an object.") }
  for (const key of Object.keys(body)) if (!COUNT_KEYS.has(key)) return { problem: unknown(key) }
  if (body["contents"] !== undefined && body["generateContentRequest"] !== undefined) {
    return { problem: bad("contents and generate_content_request cannot both be set.") }
  }
  const inner = isRecord(body["generateContentRequest"]) ? body["generateContentRequest"] : { contents: body["contents"] }
  const problem = validateGenerate(inner, model)
  return problem === undefined ? { body: inner } : { problem }
}
