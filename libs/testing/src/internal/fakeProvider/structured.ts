/**
 * Structured output: a request that gives a JSON schema for the answer gets,
 * by default (no scripted text or tool call), the smallest JSON text that
 * matches it — as the real APIs constrain the model to it — instead of the
 * default prose an agent CLI's title or routing call could not parse (Gemini
 * CLI retries its routing call until it can).
 *
 * Where each API takes the schema:
 * - Anthropic `output_config.format: {type: "json_schema", schema}`
 *   (https://platform.claude.com/docs/en/build-with-claude/structured-outputs);
 * - OpenAI Chat `response_format: {type: "json_schema", json_schema: {schema}}`,
 *   Responses `text.format: {type: "json_schema", schema}`
 *   (https://platform.openai.com/docs/guides/structured-outputs);
 * - Gemini `generationConfig.responseJsonSchema` (JSON Schema) or
 *   `responseSchema` (its OpenAPI subset, upper-case types)
 *   (https://ai.google.dev/gemini-api/docs/structured-output).
 * Plain JSON mode without a schema keeps the default text (ctxd's own
 * summarizer asks for it and handles any answer).
 */
import { isRecord, type Json } from "./json.ts"

const at = (value: unknown, ...path: ReadonlyArray<string>): unknown =>
  path.reduce<unknown>((v, key) => (isRecord(v) ? v[key] : undefined), value)

/** The answer's JSON schema a request gives, by API; `undefined` when it gives none. */
export const schemaOf = (api: "anthropic" | "openai" | "openai-responses" | "google", body: Json): unknown => {
  switch (api) {
    case "anthropic":
      return at(body, "output_config", "format", "type") === "json_schema" ? at(body, "output_config", "format", "schema") : undefined
    case "openai":
      return at(body, "response_format", "type") === "json_schema" ? at(body, "response_format", "json_schema", "schema") : undefined
    case "openai-responses":
      return at(body, "text", "format", "type") === "json_schema" ? at(body, "text", "format", "schema") : undefined
    case "google":
      return at(body, "generationConfig", "responseJsonSchema") ?? at(body, "generationConfig", "responseSchema")
  }
}

/** The smallest value matching `schema` (required properties only, first enum value, minimums). */
export const example = (schema: unknown, depth = 0): unknown => {
  if (!isRecord(schema) || depth > 16) return null
  if (Array.isArray(schema["enum"]) && schema["enum"].length > 0) return schema["enum"][0]
  if (schema["const"] !== undefined) return schema["const"]
  const variants = schema["anyOf"] ?? schema["oneOf"]
  if (Array.isArray(variants) && variants.length > 0) return example(variants[0], depth + 1)
  const types: unknown = schema["type"]
  const declared: unknown = Array.isArray(types) ? (types as ReadonlyArray<unknown>)[0] : types
  const type = typeof declared === "string" ? declared.toLowerCase() : isRecord(schema["properties"]) ? "object" : "string"
  switch (type) {
    case "object": {
      const properties = isRecord(schema["properties"]) ? schema["properties"] : {}
      const required = Array.isArray(schema["required"]) ? schema["required"].filter((k) => typeof k === "string") : []
      return Object.fromEntries(required.map((k) => [k, example(properties[k], depth + 1)]))
    }
    case "array": {
      const min = typeof schema["minItems"] === "number" ? schema["minItems"] : 0
      return Array.from({ length: min }, () => example(schema["items"], depth + 1))
    }
    case "integer":
    case "number":
      return typeof schema["minimum"] === "number" ? schema["minimum"] : 1
    case "boolean":
      return false
    case "null":
      return null
    default:
      return "fake"
  }
}

/** The default answer text for a structured request, or `undefined` when it gives no schema. */
export const defaultText = (api: "anthropic" | "openai" | "openai-responses" | "google", body: Json): string | undefined => {
  const schema = schemaOf(api, body)
  return schema === undefined ? undefined : JSON.stringify(example(schema))
}
