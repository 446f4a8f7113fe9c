/**
 * The configuration reference, read off the Effect `Config` values the code
 * itself reads: every `Config.string("NAME")` (and the other primitives) is a
 * key, `Config.withDescription` its meaning, `Config.withDefault` its default,
 * `Config.option` an optional key. The page `docs/configuration.md` is made
 * from this, so it cannot say what the code does not read.
 *
 * The walk follows the structure Effect keeps in every `Config` value (its
 * `_tag`: `Nested` names a key, `Described` carries a description, `Fallback`
 * a default, `Primitive` the parser with a type description such as `one of
 * (a, b)`, `Sequence` a comma-separated list, `Redacted` a secret).
 */
import type { Config } from "effect"
import { Option, Redacted } from "effect"

/** One environment variable (or `ctxd.yaml` key of the same name) as the code reads it. */
export interface Knob {
  readonly name: string
  /** What the value must be, from the parser: `an integer property`, `one of (a, b)`, ... */
  readonly type: string
  /** The meaning (`Config.withDescription`); empty when the code gives none. */
  readonly description: string
  /** The default as text (`Config.withDefault`), `unset` for an optional key, `required` without either. */
  readonly default: string
  readonly list: boolean
  readonly secret: boolean
}

interface Node {
  readonly _tag: string
  readonly [key: string]: unknown
}

interface Draft {
  name: string
  type: string
  description: string
  default: string | undefined
  list: boolean
  secret: boolean
}

const node = (config: unknown): Node => config as Node

/** A default as the page shows it: strings in code quotes, an empty string or list as `empty`. */
export const formatDefault = (value: unknown): string => {
  if (Option.isOption(value)) return Option.isNone(value) ? "unset" : formatDefault(value.value)
  // A default written in the code is no secret: show it.
  if (Redacted.isRedacted(value)) return formatDefault(Redacted.value(value))
  if (Array.isArray(value)) return value.length === 0 ? "empty" : `\`${value.map(String).join(",")}\``
  if (value === "") return "empty"
  if (value === undefined) return "unset"
  return `\`${String(value)}\``
}

/** The value of a config that reads no key (`Config.succeed`, possibly behind `suspend`), if it is one. */
const constant = (config: unknown): { readonly value: unknown } | undefined => {
  const n = node(config)
  if (n._tag === "Constant") return { value: n.value }
  if (n._tag === "Lazy") return constant((n.config as () => unknown)())
  return undefined
}

const walk = (config: unknown, name: string | undefined, out: Array<Draft>): void => {
  const n = node(config)
  switch (n._tag) {
    case "Nested":
      return walk(n.config, n.name as string, out)
    case "Primitive":
      if (name !== undefined) {
        out.push({ name, type: n.description as string, description: "", default: undefined, list: false, secret: false })
      }
      return
    case "Sequence": {
      const inner: Array<Draft> = []
      walk(n.config, name, inner)
      for (const d of inner) out.push({ ...d, list: true })
      return
    }
    case "Redacted": {
      const inner: Array<Draft> = []
      walk(n.original, name, inner)
      for (const d of inner) out.push({ ...d, secret: true })
      return
    }
    case "Described": {
      const inner: Array<Draft> = []
      walk(n.config, name, inner)
      // A description on a group of keys says nothing precise about any one of them.
      if (inner.length === 1 && inner[0]!.description === "") inner[0]!.description = n.description as string
      out.push(...inner)
      return
    }
    case "Fallback": {
      const inner: Array<Draft> = []
      walk(n.first, name, inner)
      const fallback = constant(n.second)
      if (fallback !== undefined && inner.length === 1 && inner[0]!.default === undefined) {
        inner[0]!.default = formatDefault(fallback.value)
      } else {
        walk(n.second, name, inner)
      }
      out.push(...inner)
      return
    }
    case "MapOrFail":
      return walk(n.original, name, out)
    case "ZipWith":
      walk(n.left, name, out)
      return walk(n.right, name, out)
    case "HashMap":
      return walk(n.valueConfig, name, out)
    case "Lazy":
      return walk((n.config as () => unknown)(), name, out)
    default:
      // Constant, Fail: no key read.
      return
  }
}

/** The keys `config` reads, in the order it reads them (a key read twice appears once, first description and default winning). */
export const knobs = (config: Config.Config<unknown>): ReadonlyArray<Knob> => {
  const drafts: Array<Draft> = []
  walk(config, undefined, drafts)
  return merge([drafts.map(finish)])
}

const finish = (d: Draft): Knob => ({ ...d, default: d.default ?? "required" })

/**
 * The keys of several lists in one: the first list naming a key places it; a
 * later one fills in a description or default the earlier one lacked.
 */
export const merge = (lists: ReadonlyArray<ReadonlyArray<Knob>>): ReadonlyArray<Knob> => {
  const byName = new Map<string, Knob>()
  for (const list of lists) {
    for (const knob of list) {
      const seen = byName.get(knob.name)
      if (seen === undefined) {
        byName.set(knob.name, knob)
        continue
      }
      byName.set(knob.name, {
        ...seen,
        description: seen.description === "" ? knob.description : seen.description,
        default:
          seen.default === "required" || seen.default === "unset"
            ? knob.default === "required"
              ? seen.default
              : knob.default
            : seen.default,
        secret: seen.secret || knob.secret,
      })
    }
  }
  return [...byName.values()]
}

/** What the value must be, in the page's words: `integer`, `one of: a, b`, `comma-separated list`, ... */
export const formatType = (knob: Knob): string => {
  const literal = /^one of \((.*)\)$/.exec(knob.type)
  const base = literal
    ? `one of: ${literal[1]!
        .split(", ")
        .map((v) => (v === "" ? "empty" : `\`${v}\``))
        .join(", ")}`
    : knob.type.replace(/^an? /, "").replace(/ property$/, "")
  const typed = knob.list ? `comma-separated list of ${base}s` : base
  return knob.secret ? `${typed} (secret: redacted in logs)` : typed
}
