/**
 * The `ctxd.yaml` section keys of the configuration reference, read off the
 * Schemas the file is decoded with (`ConfigFile.Sections`: `Turn.Options`,
 * `Tenants.Tenant`, `Loop.Settings`): every key down to the leaves, its type
 * from the Schema's refinements, its meaning from the field's JSDoc, its
 * default from the code ({@link defaults}).
 */
import { ConfigReference } from "@ctxd/config"
import { Pipeline } from "@ctxd/context"
import { LoopConfig } from "@ctxd/loop-detector"
import { Option, SchemaAST } from "effect"
import { readFileSync } from "node:fs"
import ts from "typescript"

/** One key of a section: `loop.repeatedCall.threshold`; `<provider>` stands for each of several keys of one shape. */
export interface KeyRow {
  readonly key: string
  readonly type: string
  readonly default: string
  readonly meaning: string
}

/** A default that is the environment variable's (rendered with that variable's default). */
export interface FromEnv {
  readonly env: string
}

const env = (name: string): FromEnv => ({ env: name })
const code = (value: unknown): string => `\`${String(value)}\``
const loop = LoopConfig.defaults

/**
 * What each section key is when no layer sets it, by key path (`*` for a
 * `<placeholder>` segment): the environment variable that sets it, or the
 * code's value.
 */
export const defaults: Readonly<Record<string, string | FromEnv>> = {
  windowMessages: env("CTXD_WINDOW_MESSAGES"),
  windowStep: env("CTXD_WINDOW_STEP"),
  freshTailMessages: env("CTXD_FRESH_TAIL_MESSAGES"),
  budgetTokens: "the effective window",
  agent: "`default`",
  user: "none",
  memoryTools: env("CTXD_MEMORY_TOOLS"),
  tokenBackend: env("CTXD_TOKEN_BACKEND"),
  "loop.policy": env("CTXD_LOOP_POLICY"),
  "loop.repeatedCall.threshold": code(loop.repeatedCall.threshold),
  "loop.repeatedError.threshold": code(loop.repeatedError.threshold),
  "loop.alternation.cycles": code(loop.alternation.cycles),
  "loop.alternation.maxPeriod": code(loop.alternation.maxPeriod),
  "loop.monologue.threshold": code(loop.monologue.threshold),
  "loop.contextOverflow.threshold": code(loop.contextOverflow.threshold),
  "loop.contextOverflow.withinMessages": code(loop.contextOverflow.withinMessages),
  "loop.judge.enabled": "`false` (no `judge`)",
  "loop.judge.model": "the session's model",
  toolCompression: code(Pipeline.defaults.toolCompression),
  maskKeep: code(Pipeline.defaults.maskKeep),
  maskBatchTokens: code(Pipeline.defaults.maskBatchTokens),
  cacheTtlSeconds: "per session, from its gaps",
  expectedTurns: "learned per agent",
  cacheEdits: "`guarded`",
  proactiveThreshold: code(Pipeline.defaults.proactiveThreshold),
  keepThinkingTurns: code(Pipeline.defaults.keepThinkingTurns),
  thinkingPrefixMismatch: "`auto`",
  memory: env("CTXD_MEMORY"),
  memoryTokens: env("CTXD_MEMORY_TOKENS"),
  memoryFraction: env("CTXD_MEMORY_FRACTION"),
  memoryPlacement: env("CTXD_MEMORY_PLACEMENT"),
  learningsFraction: env("CTXD_LEARNINGS_FRACTION"),
  promptCache: "`true`",
  compaction: "`true`",
  "summarizer.backend": "`provider` where the model has it, else `ctxd`",
  workspaceCache: "`true`",
  "toolsets.defaults": env("CTXD_DEFAULT_TOOLSETS"),
  "toolsets.includeWrite": "`false`",
  "providers.*.apiKeyEnv": "none: the worker's key, where `CTXD_WORKER_KEY_TENANTS` allows",
  "providers.*.apiKeyFile": "none: the worker's key, where `CTXD_WORKER_KEY_TENANTS` allows",
  "share.turnsPercent": env("CTXD_TENANT_TURNS_PERCENT"),
  "share.bytesPercent": env("CTXD_TENANT_BYTES_PERCENT"),
  retentionDays: "none: kept until deleted",
}

/**
 * The JSDoc of the fields of the `Schema.Struct` object literals in
 * `const <variable> = ...` of `file`, by key path under `prefix`
 * (`repeatedCall.threshold`); the structs of a union share their prefix.
 */
export const jsdocs = (file: string, variable: string, prefix = ""): Map<string, string> => {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true)
  const out = new Map<string, string>()
  // the object literals under `n` that no other object literal under `n` contains
  const outermost = (n: ts.Node): Array<ts.ObjectLiteralExpression> =>
    ts.isObjectLiteralExpression(n) ? [n] : n.getChildren().flatMap(outermost)
  const fields = (literal: ts.ObjectLiteralExpression, at: string): void => {
    for (const p of literal.properties) {
      if (!ts.isPropertyAssignment(p) || !ts.isIdentifier(p.name)) continue
      const text = ts
        .getJSDocCommentsAndTags(p)
        .filter(ts.isJSDoc)
        .map((d) => ts.getTextOfJSDocComment(d.comment) ?? "")
        .join(" ")
      if (text !== "") out.set(`${at}${p.name.text}`, text)
      for (const inner of outermost(p.initializer)) fields(inner, `${at}${p.name.text}.`)
    }
  }
  const visit = (n: ts.Node): void => {
    if (ts.isVariableDeclaration(n) && ts.isIdentifier(n.name) && n.name.text === variable && n.initializer !== undefined) {
      for (const literal of outermost(n.initializer)) fields(literal, prefix)
    }
    ts.forEachChild(n, visit)
  }
  visit(source)
  return out
}

const withoutUndefined = (ast: SchemaAST.AST): SchemaAST.AST => {
  if (!SchemaAST.isUnion(ast)) return ast
  const members = ast.types.filter((m) => !SchemaAST.isUndefinedKeyword(m))
  return members.length === 1 ? members[0]! : SchemaAST.Union.make(members)
}

/** The members of a value's type but `undefined` (an optional key's type is a union with it). */
const members = (ast: SchemaAST.AST): ReadonlyArray<SchemaAST.AST> =>
  SchemaAST.isUnion(ast) ? ast.types.filter((m) => !SchemaAST.isUndefinedKeyword(m)) : [ast]

const sameShape = (a: SchemaAST.AST, b: SchemaAST.AST): boolean => {
  const x = members(a)
  const y = members(b)
  return x.length === y.length && x.every((m, i) => m === y[i])
}

/** The structs a key's value is (a struct, or a union of structs), none for a leaf. */
const structs = (ast: SchemaAST.AST): ReadonlyArray<SchemaAST.TypeLiteral> => {
  const t = withoutUndefined(ast)
  if (SchemaAST.isTypeLiteral(t)) return [t]
  if (SchemaAST.isUnion(t) && t.types.every(SchemaAST.isTypeLiteral)) return t.types as ReadonlyArray<SchemaAST.TypeLiteral>
  return []
}

/** A leaf's type as a user reads it: `integer 1–1000000`, `fraction 0–1`, `one of: a | b`, `text matching ...`. */
export const typeOf = (ast: SchemaAST.AST): string => {
  let t = withoutUndefined(ast)
  if (SchemaAST.isUnion(t) && t.types.every(SchemaAST.isLiteral)) {
    return `one of: ${t.types.map((m) => (SchemaAST.isLiteral(m) ? `\`${String(m.literal)}\`` : "")).join(" | ")}`
  }
  if (SchemaAST.isLiteral(t)) return `\`${String(t.literal)}\``
  if (SchemaAST.isTupleType(t) && t.rest.length === 1) return `list of ${typeOf(t.rest[0]!.type)}s`
  let integer = false
  const range: { min?: number; max?: number } = {}
  const text: Array<string> = []
  const length: { min?: number; max?: number } = {}
  while (SchemaAST.isRefinement(t)) {
    const facts = Option.getOrElse(SchemaAST.getJSONSchemaAnnotation(t), () => ({})) as Record<string, unknown>
    if (facts.type === "integer") integer = true
    if (typeof facts.minimum === "number") range.min = Math.max(range.min ?? -Infinity, facts.minimum)
    if (typeof facts.maximum === "number") range.max = Math.min(range.max ?? Infinity, facts.maximum)
    if (typeof facts.pattern === "string") text.push(`matching \`${facts.pattern}\``)
    if (typeof facts.minLength === "number") length.min = facts.minLength
    if (typeof facts.maxLength === "number") length.max = facts.maxLength
    t = t.from
  }
  if (length.min !== undefined && length.max !== undefined) text.push(`of ${length.min}–${length.max} characters`)
  else if (length.min === 1) text.unshift("non-empty")
  else if (length.min !== undefined) text.push(`of at least ${length.min} characters`)
  const bounds = range.min === undefined && range.max === undefined ? "" : ` ${ConfigReference.formatRange(range)}`
  if (SchemaAST.isNumberKeyword(t)) return `${integer ? "integer" : "number"}${bounds}`
  if (SchemaAST.isStringKeyword(t)) return text[0] === "non-empty" ? "non-empty text" : ["text", ...text].join(" ")
  if (SchemaAST.isBooleanKeyword(t)) return "boolean"
  return String(t)
}

/** A key's meaning: its JSDoc, else its own description annotation (not its type's: `a boolean` says nothing). */
const describe = (p: SchemaAST.PropertySignature, docs: ReadonlyMap<string, string>, path: string): string =>
  docs.get(path) ?? Option.getOrElse(SchemaAST.getDescriptionAnnotation(p), () => "")

/**
 * The rows of a struct's keys, parents before their keys. Sibling keys of
 * one struct shape (a tenant's `providers`) make one `<singular>` row set.
 */
export const rows = (
  ast: SchemaAST.AST,
  docs: ReadonlyMap<string, string>,
  resolve: (value: string | FromEnv) => string,
  prefix = "",
  shown = "",
): ReadonlyArray<KeyRow> => {
  if (!SchemaAST.isTypeLiteral(ast)) return []
  const out: Array<KeyRow> = []
  const done = new Set<SchemaAST.PropertySignature>()
  for (const p of ast.propertySignatures) {
    if (done.has(p)) continue
    const name = String(p.name)
    const inner = structs(p.type)
    const same = inner.length === 0 ? [p] : ast.propertySignatures.filter((q) => sameShape(q.type, p.type))
    same.forEach((q) => done.add(q))
    if (same.length > 1) {
      const placeholder = `<${prefix.replace(/\.$/, "").split(".").at(-1)!.replace(/s$/, "")}>`
      const names = same.map((q) => `\`${String(q.name)}\``).join(", ")
      out.push({
        key: `${shown}${placeholder}`,
        type: "map",
        default: "",
        meaning: `${placeholder} is each of ${names}: ${inner.length > 1 ? "exactly one of the keys below" : "the keys below"}`,
      })
      for (const struct of inner) out.push(...rows(struct, docs, resolve, `${prefix}*.`, `${shown}${placeholder}.`))
      continue
    }
    const meaning = describe(p, docs, `${prefix}${name}`)
    if (inner.length > 0) {
      // a map says what its keys are about when its JSDoc does; else its keys' rows say it all
      if (meaning !== "") out.push({ key: `${shown}${name}`, type: "map", default: "", meaning })
      for (const struct of inner) out.push(...rows(struct, docs, resolve, `${prefix}${name}.`, `${shown}${name}.`))
      continue
    }
    const fallback = defaults[`${prefix}${name}`]
    out.push({ key: `${shown}${name}`, type: typeOf(p.type), default: fallback === undefined ? "" : resolve(fallback), meaning })
  }
  return out
}
