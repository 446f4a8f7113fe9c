/** Small helpers over untyped JSON request bodies. */

export type Json = Record<string, unknown>

export const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** A copy of `value` without any `cache_control` key, at any depth. */
export const stripCacheControl = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(stripCacheControl)
  if (!isRecord(value)) return value
  const out: Json = {}
  for (const [k, v] of Object.entries(value)) if (k !== "cache_control") out[k] = stripCacheControl(v)
  return out
}

/** JSON with object keys sorted, so equal values serialize equally. */
export const stableJson = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`
  if (!isRecord(value)) return JSON.stringify(value) ?? "null"
  const keys = Object.keys(value).sort()
  return `{${keys.map((k) => `${JSON.stringify(k)}:${stableJson(value[k])}`).join(",")}}`
}

/** Whitespace-collapsed `text`, cut to `max` characters. */
export const excerpt = (text: string, max: number): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`
}

/**
 * A minimal value that satisfies a JSON schema's required properties (used
 * when a request forces a tool call and no reply is scripted).
 */
export const sampleFromSchema = (schema: unknown, depth = 0): unknown => {
  if (!isRecord(schema) || depth > 8) return null
  if (schema["const"] !== undefined) return schema["const"]
  const enumValues = schema["enum"]
  if (Array.isArray(enumValues) && enumValues.length > 0) return enumValues[0]
  const type: unknown = Array.isArray(schema["type"]) ? schema["type"][0] : schema["type"]
  switch (type) {
    case "string":
      return ""
    case "number":
    case "integer":
      return 0
    case "boolean":
      return false
    case "array":
      return []
    case "null":
      return null
    default: {
      const props = isRecord(schema["properties"]) ? schema["properties"] : {}
      const required = Array.isArray(schema["required"]) ? schema["required"] : []
      const out: Json = {}
      for (const name of required) {
        if (typeof name === "string") out[name] = sampleFromSchema(props[name], depth + 1)
      }
      return out
    }
  }
}
