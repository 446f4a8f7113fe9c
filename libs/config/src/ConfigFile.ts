/**
 * The configuration file (`ctxd.yaml`, named by `CTXD_CONFIG_FILE`; YAML, and
 * so JSON too): decoded with the same Schemas as a request's `options`, every
 * problem named by its key path and line.
 *
 * ```yaml
 * CTXD_MAX_CONCURRENT: 8          # any environment knob, by its environment name (read at start)
 * defaults:                       # turn options under every request's `options`
 *   toolCompression: minify
 * tenants:
 *   acme:                         # a tenant's section (`Tenants.Tenant`): options, providers, share
 *     maskKeep: 5
 *     providers: { anthropic: { apiKeyEnv: ACME_ANTHROPIC_KEY } }
 * agents:
 *   coder:                        # options for turns whose `options.agent` is `coder`
 *     loop: { policy: "off" }
 * ```
 *
 * A file of only environment-style keys (the first form of `CTXD_CONFIG_FILE`,
 * a JSON object of them) reads as before.
 */
import { Subjects, Tenants, Turn } from "@ctxd/contracts"
import { Data, Either, ParseResult, Schema } from "effect"
import { createHash } from "node:crypto"
import { isAlias, isMap, isPair, isScalar, isSeq, LineCounter, type Node, parseDocument } from "yaml"
import * as GatewaySection from "./GatewaySection.ts"

/** An agent's section: turn options for the turns of that agent (it cannot name another agent). */
export const AgentOptions = Turn.Options.pipe(Schema.omit("agent")).annotations({ identifier: "AgentOptions" })
export type AgentOptions = typeof AgentOptions.Type

/** The tenants' sections by tenant id (also the whole of a `CTXD_TENANTS_FILE`). */
export const TenantSections = Schema.Record({ key: Schema.String, value: Tenants.Tenant })
export type TenantSections = typeof TenantSections.Type

/** The sections of the file that turns read (everything but the environment-style knobs). */
export const Sections = Schema.Struct({
  /** Turn options under every request's own (over the environment's defaults). */
  defaults: Schema.optional(Turn.Options),
  /** Per tenant: its options over `defaults`, its provider key references, its share. */
  tenants: Schema.optional(TenantSections),
  /** Per agent (a turn's `options.agent`): its options over its tenant's. */
  agents: Schema.optional(Schema.Record({ key: Schema.String, value: AgentOptions })),
  /** What `ctxd gateway` does with each request: modes and failure policy per tenant and agent, gateway keys, upstreams. */
  gateway: Schema.optional(GatewaySection.Section),
}).annotations({ identifier: "ConfigFileSections" })

/** The decoded file. */
export interface Contents {
  /** The environment-style keys (`CTXD_*`, `NATS_URL`, ...), as the strings the environment would hold. */
  readonly knobs: Readonly<Record<string, string>>
  readonly defaults: Turn.Options
  readonly tenants: TenantSections
  readonly agents: Readonly<Record<string, AgentOptions>>
  /** The gateway's section; absent when the file has none (so a file without it hashes as before). */
  readonly gateway?: GatewaySection.Section | undefined
}

export const empty: Contents = { knobs: {}, defaults: {}, tenants: {}, agents: {} }

/** One problem of a file: where (key path, 1-based line and column) and what. */
export interface Issue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly line: number | undefined
  readonly column: number | undefined
  readonly message: string
}

/** A file that cannot be read or is not valid; `message` lists every issue as `file:line: path: message`. */
export class InvalidConfigFile extends Data.TaggedError("InvalidConfigFile")<{
  readonly file: string
  readonly issues: ReadonlyArray<Issue>
  readonly message: string
}> {}

/** `file:line:column: a.b.c: message` (no value of the file: the message may be logged). */
export const formatIssue = (file: string, issue: Issue): string =>
  `${file}${issue.line === undefined ? "" : `:${issue.line}:${issue.column ?? 1}`}: ${issue.path.length === 0 ? "(file)" : issue.path.map(String).join(".")}: ${issue.message}`

export const invalid = (file: string, issues: ReadonlyArray<Issue>): InvalidConfigFile =>
  new InvalidConfigFile({ file, issues, message: issues.map((issue) => formatIssue(file, issue)).join("\n") })

/**
 * What a file may hold: it is read on a worker that serves turns, so a file
 * that is huge, nested without end or a "billion laughs" of aliases is
 * refused with an issue before it costs more than a bounded parse.
 */
export const limits = {
  /** The largest file read, in bytes (1 MiB; a real `ctxd.yaml` is a few KiB). Checked before parsing. */
  maxBytes: 1_048_576,
  /** The deepest nesting of maps and lists (64; the sections need 6). */
  maxDepth: 64,
  /** The most nodes the file may have once its aliases are expanded (100,000). */
  maxNodes: 100_000,
} as const

/** An environment-style key: upper case, digits and `_`. Any other top-level key is a section. */
const KNOB = /^[A-Z][A-Z0-9_]*$/

/**
 * The line and column of `path` in the document: the key's own line for a
 * map entry, the item's for a list entry; the deepest part of the path that
 * exists when the rest does not (a missing key: its parent).
 */
const locate = (contents: Node | null, lines: LineCounter, path: ReadonlyArray<PropertyKey>): { line: number; col: number } | undefined => {
  let node: unknown = contents
  let offset = (contents as Node | null)?.range?.[0]
  for (const key of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => (isScalar(p.key) ? String(p.key.value) : String(p.key)) === String(key))
      if (pair === undefined) break
      offset = (pair.key as Node | null)?.range?.[0] ?? offset
      node = pair.value
    } else if (isSeq(node)) {
      const item = node.items[Number(key)] as Node | undefined
      if (item === undefined) break
      offset = item.range?.[0] ?? offset
      node = item
    } else break
  }
  return offset === undefined ? undefined : lines.linePos(offset)
}

/** The schema's messages without the value found (`, actual ...`): a file may hold secrets, and the line says where. */
const withoutValue = (message: string): string => message.replace(/,?\s*actual [\s\S]*$/, "").trim()

/**
 * One issue per key path: the union's alternatives of an optional field
 * (`Expected undefined`) and the parents of a deeper issue dropped, a
 * literal's alternatives joined (`Expected "none" | "minify"`).
 */
const tidy = (issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>): ReadonlyArray<Omit<Issue, "line" | "column">> => {
  const kept = issues.filter((i) => withoutValue(i.message) !== "Expected undefined")
  const key = (path: ReadonlyArray<PropertyKey>) => path.map(String).join("\u0000")
  const deeper = (path: ReadonlyArray<PropertyKey>) =>
    kept.some((other) => other.path.length > path.length && path.every((k, n) => String(other.path[n]) === String(k)))
  const byPath = new Map<string, { path: ReadonlyArray<PropertyKey>; messages: Array<string> }>()
  for (const issue of kept) {
    if (deeper(issue.path)) continue
    const entry = byPath.get(key(issue.path)) ?? { path: issue.path, messages: [] }
    const message = withoutValue(issue.message)
    if (!entry.messages.includes(message)) entry.messages.push(message)
    byPath.set(key(issue.path), entry)
  }
  return [...byPath.values()].map(({ path, messages }) => ({
    path,
    message: messages.every((m) => m.startsWith("Expected "))
      ? `Expected ${messages.map((m) => m.slice("Expected ".length)).join(" | ")}`
      : messages.join("; "),
  }))
}

/** A knob's value as the environment would hold it (lists comma separated), or undefined when it has none. */
const knobValue = (value: unknown): string | undefined => {
  if (typeof value === "string") return value
  if (typeof value === "number" || typeof value === "boolean") return String(value)
  if (Array.isArray(value) && value.every((v) => typeof v === "string" || typeof v === "number")) return value.join(",")
  return undefined
}

/** A limit the document breaks, at a source offset. */
class Refused extends Error {
  readonly offset: number | undefined
  constructor(offset: number | undefined, message: string) {
    super(message)
    this.offset = offset
  }
}

/**
 * One pass over the document before it becomes values: its depth, its size
 * with every alias expanded (an anchor's size is computed once, so a bomb is
 * measured, never expanded), aliases that name no earlier anchor (also one
 * inside the node it names: a cycle) and duplicate keys (the parser's own
 * check is quadratic in the keys of a map). Recursion is bounded by `maxDepth`.
 */
const measure = (root: unknown): void => {
  const anchors = new Map<string, number>()
  let total = 0
  const at = (node: unknown) => (node as Node | null)?.range?.[0]
  const walk = (node: unknown, depth: number): number => {
    if (node === null || node === undefined) return 0
    let size = 1
    if (isAlias(node)) {
      const target = anchors.get(node.source)
      if (target === undefined) throw new Refused(at(node), `the alias *${node.source} names no anchor defined before it`)
      size = target
    } else if (isMap(node) || isSeq(node)) {
      if (depth >= limits.maxDepth) throw new Refused(at(node), `nested more than ${limits.maxDepth} levels deep`)
      const keys = new Set<string>()
      for (const item of node.items as ReadonlyArray<unknown>) {
        if (isPair(item)) {
          if (isScalar(item.key)) {
            const key = String(item.key.value)
            if (keys.has(key)) throw new Refused(at(item.key), "Map keys must be unique")
            keys.add(key)
          }
          size += walk(item.key, depth + 1) + walk(item.value, depth + 1)
        } else size += walk(item, depth + 1)
      }
    }
    total += isAlias(node) ? size : 1
    if (total > limits.maxNodes)
      throw new Refused(at(node), `${isAlias(node) ? "aliases expand the file" : "the file has"} to more than ${limits.maxNodes} nodes`)
    const anchor = (node as { anchor?: string }).anchor
    if (anchor !== undefined && !isAlias(node)) anchors.set(anchor, size)
    return size
  }
  walk(root, 0)
}

/** The issue of a file of `bytes` bytes when over {@link limits.maxBytes}, else undefined. */
export const oversized = (bytes: number, file: string): InvalidConfigFile | undefined =>
  bytes > limits.maxBytes
    ? invalid(file, [
        {
          path: [],
          line: undefined,
          column: undefined,
          message: `${bytes} bytes, more than the ${limits.maxBytes} a configuration file may have`,
        },
      ])
    : undefined

/**
 * Parses `text` (YAML or JSON) and decodes it with `schema` (unknown keys are
 * errors: a misspelt option must not be ignored), every problem located.
 */
const parseWith = <A, I>(
  schema: Schema.Schema<A, I>,
  text: string,
  file: string,
  split: (value: Record<string, unknown>) => { readonly rest: unknown; readonly issues: ReadonlyArray<Omit<Issue, "line" | "column">> },
): Either.Either<A, InvalidConfigFile> => {
  const tooBig = oversized(Buffer.byteLength(text, "utf8"), file)
  if (tooBig !== undefined) return Either.left(tooBig)
  const lines = new LineCounter()
  const yamlIssue = (offset: number | undefined, message: string): Either.Either<never, InvalidConfigFile> => {
    const pos = offset === undefined ? undefined : lines.linePos(offset)
    return Either.left(invalid(file, [{ path: [], line: pos?.line, column: pos?.col, message: `YAML: ${message}` }]))
  }
  // the parser reports its own stack overflow as an error of the document; anything it throws is an issue too
  let doc: ReturnType<typeof parseDocument>
  try {
    doc = parseDocument(text, { lineCounter: lines, prettyErrors: true, uniqueKeys: false })
  } catch (e) {
    return yamlIssue(undefined, e instanceof RangeError ? "nested too deep" : "cannot be parsed")
  }
  const overflow = doc.errors.find((e) => /Maximum call stack/.test(e.message))
  if (overflow !== undefined) return yamlIssue(overflow.pos[0], "nested too deep")
  if (doc.errors.length > 0) {
    return Either.left(
      invalid(
        file,
        doc.errors.map((e) => ({
          path: [],
          line: e.linePos?.[0].line,
          column: e.linePos?.[0].col,
          message: `YAML: ${e.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "")}`,
        })),
      ),
    )
  }
  let value: unknown
  try {
    measure(doc.contents)
    // `measure` has bounded the expansion: the parser's own alias count would refuse some valid files
    value = doc.toJS({ maxAliasCount: -1 }) ?? {}
  } catch (e) {
    if (e instanceof Refused) return yamlIssue(e.offset, e.message)
    // not reached for a measured document; never a value of the file in the message
    return yamlIssue(undefined, `cannot be read (${e instanceof Error ? e.name : "error"})`)
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return Either.left(invalid(file, [{ path: [], line: 1, column: 1, message: "the file must be a map of keys" }]))
  }
  const { rest, issues } = split(value as Record<string, unknown>)
  const decoded = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })(rest)
  const schemaIssues = Either.isLeft(decoded) ? tidy(ParseResult.ArrayFormatter.formatErrorSync(decoded.left)) : []
  const all = [...issues, ...schemaIssues].map((issue): Issue => {
    const at = locate(doc.contents, lines, issue.path)
    return { ...issue, line: at?.line, column: at?.col }
  })
  if (all.length > 0 || Either.isLeft(decoded))
    return Either.left(
      invalid(
        file,
        all.toSorted((a, b) => (a.line ?? 0) - (b.line ?? 0)),
      ),
    )
  return Either.right(decoded.right)
}

/** Tenant ids that cannot be a subject token. */
const badIds = (section: "tenants" | "agents" | undefined, value: unknown): ReadonlyArray<Omit<Issue, "line" | "column">> =>
  typeof value !== "object" || value === null
    ? []
    : Object.keys(value)
        .filter((id) => !Subjects.isValidToken(id))
        .map((id) => ({
          path: section === undefined ? [id] : [section, id],
          message: `not a ${section === "agents" ? "agent" : "tenant"} id ([A-Za-z0-9_-]{1,128})`,
        }))

/** Decodes a configuration file's text (YAML or JSON). */
export const decode = (text: string, file: string): Either.Either<Contents, InvalidConfigFile> => {
  let knobs: Record<string, string> = {}
  return Either.map(
    parseWith(Sections, text, file, (value) => {
      const issues: Array<Omit<Issue, "line" | "column">> = []
      const rest: Record<string, unknown> = {}
      const found: Record<string, string> = {}
      for (const [key, v] of Object.entries(value)) {
        if (!KNOB.test(key)) {
          rest[key] = v
          continue
        }
        const text = knobValue(v)
        if (text === undefined)
          issues.push({ path: [key], message: "an environment key's value is a string, a number, a boolean or a list of them" })
        else found[key] = text
      }
      knobs = found
      return { rest, issues: [...issues, ...badIds("tenants", rest.tenants), ...badIds("agents", rest.agents)] }
    }),
    (sections): Contents => ({
      knobs,
      defaults: sections.defaults ?? {},
      tenants: sections.tenants ?? {},
      agents: sections.agents ?? {},
      ...(sections.gateway === undefined ? {} : { gateway: sections.gateway }),
    }),
  )
}

/** Decodes a `CTXD_TENANTS_FILE` (`{"<tenant>": <section>}`, YAML or JSON). */
export const decodeTenants = (text: string, file: string): Either.Either<TenantSections, InvalidConfigFile> =>
  parseWith(TenantSections, text, file, (value) => ({ rest: value, issues: badIds(undefined, value) }))

/** A short stable hash of decoded contents (what `/readyz` and health show): the first 12 hex digits of a SHA-256. */
export const hash = (value: unknown): string => createHash("sha256").update(JSON.stringify(value)).digest("hex").slice(0, 12)
