/**
 * Canonical forms and fingerprints, so that "the same call" means the same
 * thing whatever the provider or the model did with key order and whitespace.
 */
import { createHash } from "node:crypto"

/**
 * Canonical JSON: object keys sorted (by UTF-16 code unit, like
 * `Array.prototype.sort`), no insignificant whitespace. Follows
 * `JSON.stringify` for everything else: `toJSON` is honoured, `undefined`,
 * functions and symbols are dropped from objects and become `null` in arrays,
 * non-finite numbers become `null`, `-0` becomes `0`. Bigints are written as
 * decimal strings and a cyclic reference as the string `"[Circular]"`, so
 * this never throws. Whitespace inside string values is kept: it is data.
 */
export const canonicalJson = (value: unknown): string => write(value, new Set()) ?? "null"

const write = (value: unknown, seen: Set<object>): string | undefined => {
  if (value === null) return "null"
  switch (typeof value) {
    case "string":
      return JSON.stringify(value)
    case "number":
      return Number.isFinite(value) ? JSON.stringify(value === 0 ? 0 : value) : "null"
    case "boolean":
      return value ? "true" : "false"
    case "bigint":
      return JSON.stringify(value.toString())
    case "object":
      break
    default:
      return undefined
  }
  const withJson = value as { toJSON?: unknown }
  if (typeof withJson.toJSON === "function") return write((withJson.toJSON as () => unknown)(), seen)
  if (seen.has(value)) return JSON.stringify("[Circular]")
  seen.add(value)
  try {
    if (Array.isArray(value)) return `[${value.map((item) => write(item, seen) ?? "null").join(",")}]`
    const record = value as Record<string, unknown>
    const fields: Array<string> = []
    for (const key of Object.keys(record).sort()) {
      const text = write(record[key], seen)
      if (text !== undefined) fields.push(`${JSON.stringify(key)}:${text}`)
    }
    return `{${fields.join(",")}}`
  } finally {
    seen.delete(value)
  }
}

/**
 * The canonical JSON of a tool call's arguments. `input` is the parsed
 * arguments; when it is missing, or is itself a string holding a JSON object
 * or array (some runtimes pass the raw string), the JSON is parsed first, so
 * `{"a":1,"b":2}` and `{ "b": 2, "a": 1 }` give the same text. A string that
 * is not JSON stays a plain string.
 */
export const canonicalArgs = (input: unknown, raw?: string): string => {
  if (input === undefined && raw !== undefined) return canonicalJson(parseLoose(raw))
  if (typeof input === "string") return canonicalJson(parseLoose(input))
  return canonicalJson(input ?? {})
}

const parseLoose = (text: string): unknown => {
  const trimmed = text.trim()
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      return JSON.parse(trimmed)
    } catch {
      return text
    }
  }
  return trimmed === "" ? {} : text
}

/** Length of a {@link fingerprint}: 16 base64url characters (96 bits of SHA-256). */
export const FINGERPRINT_LENGTH = 16

/**
 * A short stable fingerprint of one or more strings: SHA-256 of the pieces
 * (each length-prefixed, so `["ab","c"]` and `["a","bc"]` differ), base64url,
 * first {@link FINGERPRINT_LENGTH} characters.
 */
export const fingerprint = (...pieces: ReadonlyArray<string>): string => {
  const hash = createHash("sha256")
  for (const piece of pieces) hash.update(`${piece.length}:`).update(piece)
  return hash.digest("base64url").slice(0, FINGERPRINT_LENGTH)
}
