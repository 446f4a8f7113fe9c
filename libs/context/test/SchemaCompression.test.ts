import type { Conversation } from "@ctxd/contracts"
import { Workloads } from "@ctxd/testing"
import { LocalCounter } from "@ctxd/tokens"
import fc from "fast-check"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as Normalize from "../src/Normalize.ts"
import * as SchemaCompression from "../src/SchemaCompression.ts"

type Json = Record<string, unknown>
const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Structural problems of a JSON Schema: every `properties` / `$defs` value is
 * a schema (object or boolean), `required` lists only declared properties,
 * composition keywords hold arrays of schemas, `items` is a schema.
 */
const schemaProblems = (node: unknown, path = "$"): Array<string> => {
  if (typeof node === "boolean") return []
  if (!isRecord(node)) return [`${path}: not a schema`]
  const out: Array<string> = []
  const props = node["properties"]
  if (props !== undefined) {
    if (!isRecord(props)) out.push(`${path}.properties: not an object`)
    else for (const [k, v] of Object.entries(props)) out.push(...schemaProblems(v, `${path}.properties.${k}`))
  }
  const required = node["required"]
  if (required !== undefined) {
    if (!Array.isArray(required)) out.push(`${path}.required: not an array`)
    else for (const r of required) if (!isRecord(props) || !(String(r) in props)) out.push(`${path}.required: ${String(r)} undeclared`)
  }
  for (const key of ["$defs", "definitions"]) {
    const defs = node[key]
    if (isRecord(defs)) for (const [k, v] of Object.entries(defs)) out.push(...schemaProblems(v, `${path}.${key}.${k}`))
  }
  for (const key of ["anyOf", "oneOf", "allOf"]) {
    const list = node[key]
    if (list !== undefined) {
      if (!Array.isArray(list)) out.push(`${path}.${key}: not an array`)
      else list.forEach((v, i) => out.push(...schemaProblems(v, `${path}.${key}[${i}]`)))
    }
  }
  const items = node["items"]
  if (items !== undefined && !Array.isArray(items)) out.push(...schemaProblems(items, `${path}.items`))
  if (node["enum"] !== undefined && !Array.isArray(node["enum"])) out.push(`${path}.enum: not an array`)
  return out
}

/** Every property path of a schema (`a.b[]`), to check compression never drops or adds one. */
const paths = (node: unknown, prefix = ""): Array<string> => {
  if (!isRecord(node)) return []
  const out: Array<string> = []
  const props = node["properties"]
  if (isRecord(props)) {
    for (const [k, v] of Object.entries(props)) out.push(`${prefix}.${k}`, ...paths(v, `${prefix}.${k}`))
  }
  if (isRecord(node["items"])) out.push(...paths(node["items"], `${prefix}[]`))
  return out
}

const github = Normalize.tools("openai", Workloads.githubCatalog().tools)
const tauRaw = JSON.parse(readFileSync(join(Workloads.dataDir(), "tau-bench-tools.json"), "utf8")) as Record<string, Array<never>>
const tau = Normalize.tools("openai", [...tauRaw["airline"]!, ...tauRaw["retail"]!])

const sample: Conversation.Tool = {
  name: "search",
  description: "Search   issues.\n\nUse the GitHub   search syntax. Returns at most 100 results per page.",
  inputSchema: {
    $schema: "http://json-schema.org/draft-07/schema#",
    type: "object",
    title: "SearchArgs",
    description: "Arguments",
    additionalProperties: true,
    properties: {
      query: { type: "string", description: "  The   query ", examples: ["is:open"] },
      title: { type: "string", description: "A property named title", default: "" },
      description: { type: "string", $comment: "a property named description" },
      state: { type: "string", enum: ["open", "closed", "all"], default: "open", description: "State" },
      sort: { enum: ["a", "b", "c", "d", "e", "f", "g", "h", "i"], description: "Sort key" },
      labels: { type: "array", items: { type: "string", description: "A label", title: "Label" } },
      flags: { type: "boolean", default: false },
    },
    required: ["query", "title"],
  },
  toolset: "issues",
  readOnly: true,
}

describe("SchemaCompression.compress", () => {
  it("none returns the tool itself", () => {
    expect(SchemaCompression.compress(sample, "none")).toBe(sample)
  })

  it("minify collapses descriptions and drops keywords that add nothing, never property names", () => {
    const out = SchemaCompression.compress(sample, "minify")
    expect(out.description).toBe("Search issues. Use the GitHub search syntax. Returns at most 100 results per page.")
    expect(out.toolset).toBe("issues")
    expect(out.readOnly).toBe(true)
    expect(out.inputSchema).toEqual({
      type: "object",
      description: "Arguments",
      properties: {
        query: { type: "string", description: "The query" },
        title: { type: "string", description: "A property named title" },
        description: { type: "string" },
        state: { type: "string", enum: ["open", "closed", "all"], default: "open", description: "State" },
        sort: { enum: ["a", "b", "c", "d", "e", "f", "g", "h", "i"], description: "Sort key" },
        labels: { type: "array", items: { type: "string", description: "A label" } },
        flags: { type: "boolean" },
      },
      required: ["query", "title"],
    })
  })

  it("truncate drops every description below the tool, keeps types, enums, defaults and required", () => {
    const out = SchemaCompression.compress(sample, "truncate")
    expect(out.description).toBe("Search issues. Use the GitHub search syntax. Returns at most 100 results per page.")
    expect(out.inputSchema).toEqual({
      type: "object",
      properties: {
        query: { type: "string" },
        title: { type: "string" },
        description: { type: "string" },
        state: { type: "string", enum: ["open", "closed", "all"], default: "open" },
        sort: { enum: ["a", "b", "c", "d", "e", "f", "g", "h", "i"] },
        labels: { type: "array", items: { type: "string" } },
        flags: { type: "boolean" },
      },
      required: ["query", "title"],
    })
  })

  it("aggressive keeps the first sentence and drops long enums and defaults of optional properties", () => {
    const out = SchemaCompression.compress(sample, "aggressive")
    expect(out.description).toBe("Search issues.")
    const props = (out.inputSchema as Json)["properties"] as Json
    expect(props["state"]).toEqual({ type: "string", enum: ["open", "closed", "all"] })
    expect(props["sort"]).toEqual({ type: "string" })
    expect((out.inputSchema as Json)["required"]).toEqual(["query", "title"])
  })

  it("aggressive cuts a long first sentence at a word, and strict tools keep enums", () => {
    expect(SchemaCompression.firstSentence("word ".repeat(60), 40)).toMatch(/^(word )+word…$/)
    expect(SchemaCompression.firstSentence("word ".repeat(60), 40).length).toBeLessThanOrEqual(40)
    const strict = { ...sample, extra: { strict: true } }
    const props = (SchemaCompression.compress(strict, "aggressive").inputSchema as Json)["properties"] as Json
    expect(props["sort"]).toEqual({ enum: ["a", "b", "c", "d", "e", "f", "g", "h", "i"] })
  })

  it("never compresses ctxd's virtual tools", () => {
    const virtual: Conversation.Tool = { ...sample, extra: { ctxd: "virtual" } }
    expect(SchemaCompression.compress(virtual, "aggressive")).toBe(virtual)
  })

  it("is deterministic and memoized per tool object and level", () => {
    const a = SchemaCompression.compress(sample, "truncate")
    expect(SchemaCompression.compress(sample, "truncate")).toBe(a)
    expect(SchemaCompression.compress(structuredClone(sample), "truncate")).toEqual(a)
  })

  it("keeps every catalog schema valid, with the same properties, and saves tokens level by level", () => {
    const counter = LocalCounter.make({ backend: "tiktoken" })
    for (const catalog of [github, tau]) {
      let previous = Number.POSITIVE_INFINITY
      for (const level of SchemaCompression.levels) {
        const out = SchemaCompression.compressAll(catalog, level)
        out.forEach((t, i) => {
          expect(schemaProblems(t.inputSchema), `${t.name} at ${level}`).toEqual([])
          expect(paths(t.inputSchema)).toEqual(paths(catalog[i]!.inputSchema))
          expect(t.name).toBe(catalog[i]!.name)
        })
        const tokens = counter.countTools(out, "o200k_base")
        expect(tokens).toBeLessThanOrEqual(previous)
        previous = tokens
      }
      // truncate saves at least a third on both catalogs
      expect(counter.countTools(SchemaCompression.compressAll(catalog, "truncate"), "o200k_base")).toBeLessThan(
        (2 / 3) * counter.countTools(catalog, "o200k_base"),
      )
    }
  })

  it("keeps random schemas valid (property)", () => {
    const leaf: fc.Arbitrary<Json> = fc.record(
      {
        type: fc.constantFrom("string", "number", "integer", "boolean"),
        description: fc.string(),
        title: fc.string(),
        default: fc.oneof(fc.constant(null), fc.constant(""), fc.string(), fc.integer()),
        enum: fc.array(fc.string(), { maxLength: 12 }),
      },
      { requiredKeys: ["type"] },
    )
    const { schema } = fc.letrec<{ schema: Json }>((tie) => ({
      schema: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        leaf,
        fc
          .record({
            properties: fc.dictionary(fc.constantFrom("a", "title", "description", "default", "items", "enum"), tie("schema"), {
              maxKeys: 5,
            }),
            description: fc.string(),
            wantRequired: fc.array(fc.nat({ max: 5 })),
          })
          .map(({ properties, description, wantRequired }) => {
            const names = Object.keys(properties)
            const required = [...new Set(wantRequired.filter((i) => i < names.length).map((i) => names[i]!))]
            return { type: "object", description, properties, required }
          }),
        fc.record({ type: fc.constant("array"), items: tie("schema"), description: fc.string() }),
        fc.record({ anyOf: fc.array(tie("schema"), { minLength: 1, maxLength: 3 }) }),
      ),
    }))
    fc.assert(
      fc.property(schema, fc.constantFrom(...SchemaCompression.levels), (inputSchema, level) => {
        const tool: Conversation.Tool = { name: "t", description: "Do it. Then more.", inputSchema }
        const out = SchemaCompression.compress(tool, level)
        expect(schemaProblems(out.inputSchema)).toEqual([])
        expect(paths(out.inputSchema)).toEqual(paths(inputSchema))
        expect(SchemaCompression.compress(structuredClone(tool), level)).toEqual(out)
      }),
      { numRuns: 300 },
    )
  })
})
