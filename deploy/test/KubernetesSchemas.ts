/**
 * JSON schemas of Kubernetes objects, offline: the definitions of the
 * Kubernetes OpenAPI spec as the npm package `kubernetes-models` (4.3.1,
 * Kubernetes 1.27) ships them — one module per definition under `_schemas/`,
 * each holding the definition as a JSON literal (`const schema = {...}`) and
 * registering it under its OpenAPI name (`io.k8s.api.apps.v1.Deployment`);
 * the `io.k8s.apimachinery.*` ones are in `@kubernetes-models/apimachinery`.
 * They are read as data (never run) and compiled with our own Ajv, made
 * strict the way kubectl and the "-strict" flavour of kubernetes-json-schema
 * are: an object with declared properties admits no other property, so a
 * misspelt field (`readinesProbe`) fails instead of being ignored.
 */
import { Ajv, type ValidateFunction } from "ajv"
import { readdirSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"

const require = createRequire(import.meta.url)

/** The `_schemas` directories of the packages that hold the definitions. */
const schemaDirs = (): Array<string> => [
  join(dirname(require.resolve("kubernetes-models/package.json")), "_schemas"),
  join(dirname(require.resolve("@kubernetes-models/apimachinery/package.json")), "_schemas"),
]

type Json = null | boolean | number | string | Array<Json> | { [key: string]: Json }

/** Every definition: OpenAPI name → schema. */
const readDefinitions = (): Map<string, Json> => {
  const definitions = new Map<string, Json>()
  for (const dir of schemaDirs()) {
    for (const file of readdirSync(dir)) {
      if (!file.endsWith(".js")) continue
      const text = readFileSync(join(dir, file), "utf8")
      const literal = /\nconst schema = (\{\}|\{[\s\S]*?\n\});\n/.exec(text)?.[1]
      const id = /register\)\("([^"]+)", schema\)/.exec(text)?.[1]
      if (literal === undefined || id === undefined) throw new Error(`${file}: no schema literal / registration found`)
      definitions.set(id, JSON.parse(literal) as Json)
    }
  }
  return definitions
}

/** The definitions `schema` refers to (`"$ref": "io.k8s.api.core.v1.PodSpec#"`). */
const refsOf = (schema: Json, into: Set<string>): Set<string> => {
  if (Array.isArray(schema)) for (const item of schema) refsOf(item, into)
  else if (schema !== null && typeof schema === "object") {
    for (const [key, value] of Object.entries(schema)) {
      if (key === "$ref" && typeof value === "string") into.add(value.replace(/#.*$/, ""))
      else refsOf(value, into)
    }
  }
  return into
}

/** A copy of `schema` where every object with declared properties forbids others. */
const strict = (schema: Json): Json => {
  if (Array.isArray(schema)) return schema.map(strict)
  if (schema === null || typeof schema !== "object") return schema
  const out: { [key: string]: Json } = {}
  for (const [key, value] of Object.entries(schema)) {
    // under "properties" the keys are field names, not keywords
    out[key] =
      key === "properties" && value !== null && typeof value === "object" && !Array.isArray(value)
        ? Object.fromEntries(Object.entries(value).map(([name, field]) => [name, strict(field)]))
        : strict(value)
  }
  if ("properties" in out && !("additionalProperties" in out)) out.additionalProperties = false
  return out
}

/** Kubernetes quantities: `1`, `500m`, `512Mi`, `1.5Gi`, `1e3`. */
const QUANTITY = /^[+-]?(\d+\.?\d*|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$/

export interface Validator {
  /** The OpenAPI name of the object `apiVersion`/`kind` (`apps/v1` `Deployment` → `io.k8s.api.apps.v1.Deployment`). */
  readonly definitionOf: (apiVersion: string, kind: string) => string
  /** Errors of `object` against its kind's schema; empty when valid. */
  readonly validate: (object: { readonly apiVersion: string; readonly kind: string }) => Array<string>
}

/** A validator for the objects of `kinds` (`"apps/v1 Deployment"`, ...). */
export const make = (kinds: ReadonlyArray<string>): Validator => {
  const definitions = readDefinitions()
  const definitionOf = (apiVersion: string, kind: string): string => {
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["core", apiVersion]
    // "policy" → io.k8s.api.policy; "rbac.authorization.k8s.io" → io.k8s.api.rbac
    return `io.k8s.api.${group!.replace(/\..*$/, "")}.${version}.${kind}`
  }
  const ajv = new Ajv({
    strict: false,
    allErrors: true,
    formats: { int32: true, int64: true, double: true, byte: true, "date-time": true, quantity: QUANTITY },
  })
  const added = new Set<string>()
  const add = (id: string): void => {
    if (added.has(id)) return
    const schema = definitions.get(id)
    if (schema === undefined) throw new Error(`no Kubernetes definition ${id}`)
    added.add(id)
    ajv.addSchema(strict(schema) as object, id)
    for (const ref of refsOf(schema, new Set())) add(ref)
  }
  const compiled = new Map<string, ValidateFunction>()
  for (const entry of kinds) {
    const [apiVersion, kind] = entry.split(" ")
    const id = definitionOf(apiVersion!, kind!)
    add(id)
    compiled.set(`${apiVersion} ${kind}`, ajv.getSchema(id)!)
  }
  return {
    definitionOf,
    validate: (object) => {
      const check = compiled.get(`${object.apiVersion} ${object.kind}`)
      if (check === undefined) return [`no schema loaded for ${object.apiVersion} ${object.kind}`]
      if (check(object)) return []
      return (check.errors ?? []).map(
        (e) =>
          `${e.instancePath || "/"} ${e.message ?? e.keyword}${e.params && "additionalProperty" in e.params ? `: ${String(e.params.additionalProperty)}` : ""}`,
      )
    },
  }
}
