/**
 * Tool schema compression: fewer tokens per tool definition, the output still
 * a valid JSON Schema for the provider. Four levels, each including the one
 * before it:
 *
 * - `none`: the tool as given (the same object).
 * - `minify`: every `description` (the tool's and the schema's) has its
 *   whitespace runs collapsed to one space and is trimmed; empty
 *   descriptions go. Schema keywords that tell the model nothing are
 *   dropped: `title`, `examples`, `$comment`, `$schema`, `required: []`,
 *   `additionalProperties: true` (the default) and a `default` that is
 *   `null`, `false`, `""`, `[]` or `{}`.
 * - `truncate`: also drops every `description` below the tool level (the
 *   root schema's, each property's, nested ones). Kept: the tool
 *   description, `type`, `enum`, `const`, `required`, `items`, formats and
 *   bounds, composition (`anyOf`...), `$ref` and `$defs`.
 * - `aggressive`: also cuts the tool description to its first sentence, at
 *   most {@link DESCRIPTION_CHARS} (120) characters (cut at a word, with
 *   `…`), and on optional properties (not listed in their parent's
 *   `required`, and everything below them) drops `default` and an `enum`
 *   of more than {@link ENUM_VALUES} (8) values (the `type` stays; when there
 *   was none it is inferred from the values). Tools with OpenAI
 *   `strict: true` keep their enums and defaults.
 *
 * Only schema positions are rewritten: property *names* such as `title` or
 * `description` are never dropped, and data (`enum`, `const`, `default`
 * values) is never walked into. ctxd's own virtual tools (`extra.ctxd` =
 * `"virtual"`) are never compressed. Deterministic; results are memoized per
 * tool object and level.
 */
import type { Conversation, Turn } from "@ctxd/contracts"

/** A compression level, weakest first (`none` < `minify` < `truncate` < `aggressive`). */
export type Level = Turn.ToolCompression

/** The levels in order. */
export const levels: ReadonlyArray<Level> = ["none", "minify", "truncate", "aggressive"]

/** The next stronger level, or `undefined` after `aggressive`. */
export const stronger = (level: Level): Level | undefined => levels[levels.indexOf(level) + 1]

/** `aggressive`: the longest tool description kept, in characters. */
export const DESCRIPTION_CHARS = 120
/** `aggressive`: optional properties keep an `enum` of at most this many values. */
export const ENUM_VALUES = 8

type Json = Record<string, unknown>

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** Keywords whose value is a map of name → schema. */
const SCHEMA_MAPS: ReadonlySet<string> = new Set(["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"])
/** Keywords whose value is one schema (or, for `items`, possibly an array of schemas). */
const SCHEMA_VALUES: ReadonlySet<string> = new Set([
  "items",
  "additionalItems",
  "additionalProperties",
  "unevaluatedItems",
  "unevaluatedProperties",
  "not",
  "if",
  "then",
  "else",
  "contains",
  "propertyNames",
])
/** Keywords whose value is an array of schemas. */
const SCHEMA_ARRAYS: ReadonlySet<string> = new Set(["anyOf", "oneOf", "allOf", "prefixItems"])
/** Dropped from `minify` on. */
const NOISE: ReadonlySet<string> = new Set(["title", "examples", "$comment", "$schema"])

/** Whitespace runs collapsed to one space, trimmed. */
export const collapse = (text: string): string => text.replace(/\s+/g, " ").trim()

/** The first sentence of `text` (collapsed), at most `max` characters, cut at a word with `…`. */
export const firstSentence = (text: string, max = DESCRIPTION_CHARS): string => {
  const flat = collapse(text)
  const end = /[.!?](?=\s|$)/.exec(flat)
  const sentence = end === null ? flat : flat.slice(0, end.index + 1)
  if (sentence.length <= max) return sentence
  const cut = sentence.slice(0, max - 1)
  const space = cut.lastIndexOf(" ")
  return `${(space > max / 2 ? cut.slice(0, space) : cut).replace(/[\s,;:.]+$/, "")}…`
}

const isEmptyValue = (v: unknown): boolean =>
  v === null || v === false || v === "" || (Array.isArray(v) && v.length === 0) || (isRecord(v) && Object.keys(v).length === 0)

/** The JSON Schema type all values share, if any. */
const typeOfValues = (values: ReadonlyArray<unknown>): string | undefined => {
  const types = new Set(
    values.map((v) =>
      v === null ? "null" : Array.isArray(v) ? "array" : typeof v === "number" ? (Number.isInteger(v) ? "integer" : "number") : typeof v,
    ),
  )
  if (types.size === 1) return [...types][0]
  return types.size === 2 && types.has("integer") && types.has("number") ? "number" : undefined
}

interface Walk {
  readonly level: Exclude<Level, "none">
  /** Below an optional property. */
  readonly optional: boolean
  /** OpenAI strict tool: keep enums and defaults. */
  readonly strict: boolean
}

const walk = (node: unknown, ctx: Walk): unknown => {
  if (Array.isArray(node)) return node.map((n) => walk(n, ctx))
  if (!isRecord(node)) return node
  const out: Json = {}
  const required = Array.isArray(node["required"]) ? new Set(node["required"].filter((r) => typeof r === "string")) : new Set()
  const loosen = ctx.level === "aggressive" && ctx.optional && !ctx.strict
  for (const [key, value] of Object.entries(node)) {
    if (NOISE.has(key)) continue
    if (key === "description") {
      if (ctx.level !== "minify") continue
      const text = typeof value === "string" ? collapse(value) : value
      if (text !== "") out[key] = text
      continue
    }
    if (key === "default" && (isEmptyValue(value) || loosen)) continue
    if (key === "required" && Array.isArray(value) && value.length === 0) continue
    if (key === "additionalProperties" && value === true) continue
    if (key === "enum" && loosen && Array.isArray(value) && value.length > ENUM_VALUES) {
      if (node["type"] === undefined) {
        const type = typeOfValues(value)
        if (type !== undefined) out["type"] = type
      }
      continue
    }
    if (SCHEMA_MAPS.has(key) && isRecord(value)) {
      const map: Json = {}
      for (const [name, schema] of Object.entries(value)) {
        const optional = ctx.optional || (key === "properties" && !required.has(name))
        map[name] = walk(schema, { ...ctx, optional })
      }
      out[key] = map
      continue
    }
    if (SCHEMA_VALUES.has(key) || SCHEMA_ARRAYS.has(key)) {
      out[key] = walk(value, ctx)
      continue
    }
    out[key] = value
  }
  return out
}

/** Compresses a tool's argument schema at `level` (see the module doc); `none` returns it as is. */
export const compressSchema = (schema: unknown, level: Level, strict = false): unknown =>
  level === "none" ? schema : walk(schema, { level, optional: false, strict })

const compute = (tool: Conversation.Tool, level: Level): Conversation.Tool => {
  if (level === "none") return tool
  const strict = tool.extra?.["strict"] === true
  const out: { -readonly [K in keyof Conversation.Tool]: Conversation.Tool[K] } = {
    ...tool,
    inputSchema: compressSchema(tool.inputSchema, level, strict),
  }
  if (tool.description !== undefined) {
    const description = level === "aggressive" ? firstSentence(tool.description) : collapse(tool.description)
    if (description === "") delete out.description
    else out.description = description
  }
  return out
}

const memo = new WeakMap<Conversation.Tool, Partial<Record<Level, Conversation.Tool>>>()

/**
 * A tool compressed at `level`: name, `toolset`, `readOnly` and `extra` kept,
 * the description and the argument schema rewritten as the module doc says.
 * Memoized per tool object (a `WeakMap`), so a stable tool list costs one
 * compression; the result is a fresh object unless `level` is `none`.
 */
export const compress = (tool: Conversation.Tool, level: Level): Conversation.Tool => {
  if (level === "none" || tool.extra?.["ctxd"] === "virtual") return tool
  const known = memo.get(tool)
  const cached = known?.[level]
  if (cached !== undefined) return cached
  const out = compute(tool, level)
  if (known === undefined) memo.set(tool, { [level]: out })
  else known[level] = out
  return out
}

/** {@link compress} over a list, order kept. */
export const compressAll = (tools: ReadonlyArray<Conversation.Tool>, level: Level): ReadonlyArray<Conversation.Tool> =>
  level === "none" ? tools : tools.map((t) => compress(t, level))
