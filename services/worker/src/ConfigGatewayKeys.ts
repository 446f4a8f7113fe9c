/**
 * The `gateway` section's rows of the configuration reference, read off its
 * Schema (`GatewaySection.Section`): every key down to the leaves, a
 * record's keys as `<tenant>`, `<agent>` or `<name>`, the keys of a union of
 * structs (a gateway key's `sha256` / `keyEnv` / `keyFile`) each once; the
 * meaning from the field's JSDoc, the default from {@link defaults}.
 */
import { GatewaySection } from "@ctxd/config"
import { SchemaAST } from "effect"
import * as ConfigFileKeys from "./ConfigFileKeys.ts"

const code = (value: unknown) => `\`${String(value)}\``
const { defaults: d } = GatewaySection

/** Each leaf's default, by its path with `*` for a record key. */
export const defaults: Readonly<Record<string, string>> = {
  "gateway.mode": `${code(d.mode)} (\`ctxd gateway --mode\` sets another)`,
  "gateway.failure": code(d.failure),
  "gateway.promptTimeoutMs": code(d.promptTimeoutMs),
  "gateway.requireKey": code(d.requireKey),
  "gateway.upstreams.anthropic": "`CTXD_GATEWAY_UPSTREAM_ANTHROPIC`",
  "gateway.upstreams.openai": "`CTXD_GATEWAY_UPSTREAM_OPENAI`",
  "gateway.upstreams.google": "`CTXD_GATEWAY_UPSTREAM_GOOGLE`",
  "gateway.tenants.*.mode": "the section's",
  "gateway.tenants.*.failure": "the section's",
  "gateway.tenants.*.agents.*.mode": "`agents.<agent>`'s, else the tenant's",
  "gateway.tenants.*.agents.*.failure": "`agents.<agent>`'s, else the tenant's",
  "gateway.agents.*.mode": "the tenant's",
  "gateway.agents.*.failure": "the tenant's",
  "gateway.keys.*.tenant": "required",
  "gateway.keys.*.sha256": "one of `sha256`, `keyEnv`, `keyFile` is required",
  "gateway.keys.*.keyEnv": "one of `sha256`, `keyEnv`, `keyFile` is required",
  "gateway.keys.*.keyFile": "one of `sha256`, `keyEnv`, `keyFile` is required",
}

const placeholders: Readonly<Record<string, string>> = { tenants: "<tenant>", agents: "<agent>", keys: "<name>" }

const members = (ast: SchemaAST.AST): ReadonlyArray<SchemaAST.AST> =>
  SchemaAST.isUnion(ast) ? ast.types.filter((m) => !SchemaAST.isUndefinedKeyword(m)) : [ast]

/** The rows under `ast` at `path` (shown) / `docPath` (for JSDoc and defaults, `*` for record keys). */
const walk = (ast: SchemaAST.AST, docs: ReadonlyMap<string, string>, path: string, docPath: string, out: Array<ConfigFileKeys.KeyRow>) => {
  const structs = members(ast).filter(SchemaAST.isTypeLiteral)
  const seen = new Set(out.map((r) => r.key))
  for (const struct of structs) {
    for (const p of struct.propertySignatures) {
      const name = String(p.name)
      const key = `${path}.${name}`
      const doc = `${docPath}.${name}`
      const inner = members(p.type)
      const record = inner.find((m) => SchemaAST.isTypeLiteral(m) && m.indexSignatures.length > 0) as SchemaAST.TypeLiteral | undefined
      if (record !== undefined) {
        const holder = placeholders[name] ?? "<id>"
        out.push({ key, type: "map", default: "", meaning: meaningOf(docs, doc) })
        walk(record.indexSignatures[0]!.type, docs, `${key}.${holder}`, `${doc}.*`, out)
        continue
      }
      if (inner.every(SchemaAST.isTypeLiteral)) {
        walk(p.type, docs, key, doc, out)
        continue
      }
      if (seen.has(key)) continue
      seen.add(key)
      out.push({ key, type: ConfigFileKeys.typeOf(p.type), default: defaults[doc] ?? "", meaning: meaningOf(docs, doc) })
    }
  }
}

/** A leaf's JSDoc: the section's own fields by path, the nested structs' by their last key. */
const meaningOf = (docs: ReadonlyMap<string, string>, doc: string): string => {
  const inSection = doc.replace(/^gateway\./, "")
  if (docs.has(inSection)) return docs.get(inSection)!
  const parts = inSection.split(".")
  const last = parts.at(-1)!
  // the struct holding the key: named by the record it is a value of, or by its own key
  const holder = parts.at(-2) === "*" ? parts.at(-3) : parts.at(-2)
  const owner = ({ keys: "key", upstreams: "upstreams", agents: "agent", tenants: "tenant" } as Record<string, string>)[holder ?? ""] ?? ""
  return docs.get(`${owner}:${last}`) ?? ""
}

/** The rows of the section, JSDoc read from `file` (libs/config/src/GatewaySection.ts). */
export const rows = (file: string): ReadonlyArray<ConfigFileKeys.KeyRow> => {
  const docs = new Map<string, string>([
    ...ConfigFileKeys.jsdocs(file, "Section"),
    ...[...ConfigFileKeys.jsdocs(file, "TenantPolicy")].map(([k, v]) => [`tenant:${k}`, v] as const),
    ...[...ConfigFileKeys.jsdocs(file, "AgentPolicy")].map(([k, v]) => [`agent:${k}`, v] as const),
    ...[...ConfigFileKeys.jsdocs(file, "GatewayKey")].map(([k, v]) => [`key:${k}`, v] as const),
    ...[...ConfigFileKeys.jsdocs(file, "Upstreams")].map(([k, v]) => [`upstreams:${k}`, v] as const),
  ])
  const out: Array<ConfigFileKeys.KeyRow> = []
  walk(GatewaySection.Section.ast, docs, "gateway", "gateway", out)
  return out
}
