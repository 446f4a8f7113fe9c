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
import { Config, Option, Redacted } from "effect"

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
  /** The values the validation admits ({@link within}), if it says. */
  readonly range?: Range | undefined
  /** The type as the page shows it, when the parser's says too little ({@link shownAs}). */
  readonly shown?: string | undefined
}

/** Bounds of a number: `min`/`max` inclusive, `above`/`below` exclusive. */
export interface Range {
  readonly min?: number
  readonly max?: number
  readonly above?: number
  readonly below?: number
}

const ranges = new WeakMap<object, Range>()
const shown = new WeakMap<object, string>()

/** The range in words: `≥ 1`, `1–100`, `> 0 and ≤ 1`. */
export const formatRange = (range: Range): string => {
  if (range.min !== undefined && range.max !== undefined) return `${range.min}–${range.max}`
  const lower = range.min !== undefined ? `≥ ${range.min}` : range.above !== undefined ? `> ${range.above}` : undefined
  const upper = range.max !== undefined ? `≤ ${range.max}` : range.below !== undefined ? `< ${range.below}` : undefined
  return [lower, upper].filter((part) => part !== undefined).join(" and ")
}

const admits = (range: Range, n: number): boolean =>
  (range.min === undefined || n >= range.min) &&
  (range.max === undefined || n <= range.max) &&
  (range.above === undefined || n > range.above) &&
  (range.below === undefined || n < range.below)

/**
 * `Config.validate` of a numeric key against `range`, which the reference
 * shows as the key's type (`integer ≥ 1`): the bound and its documentation
 * are one value. `message` defaults to the range in words.
 */
export const within =
  (range: Range, message?: string) =>
  <A extends number>(self: Config.Config<A>): Config.Config<A> => {
    const validated = Config.validate(self, { message: message ?? `must be ${formatRange(range)}`, validation: (n: A) => admits(range, n) })
    ranges.set(validated, range)
    return validated
  }

/** `self`, shown on the page with the type `type` (a format the parser does not know: `24h, 90m or off`, `host:port`). */
export const shownAs =
  (type: string) =>
  <A>(self: Config.Config<A>): Config.Config<A> => {
    shown.set(self, type)
    return self
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
  range?: Range | undefined
  shown?: string | undefined
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

/** The keys `config` reads, with what {@link within} and {@link shownAs} registered on it. */
const walk = (config: unknown, name: string | undefined, out: Array<Draft>): void => {
  const range = ranges.get(config as object)
  const type = shown.get(config as object)
  if (range === undefined && type === undefined) return visit(config, name, out)
  const inner: Array<Draft> = []
  visit(config, name, inner)
  if (inner.length === 1) inner[0] = { ...inner[0]!, range: range ?? inner[0]!.range, shown: type ?? inner[0]!.shown }
  out.push(...inner)
}

const visit = (config: unknown, name: string | undefined, out: Array<Draft>): void => {
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
        range: seen.range ?? knob.range,
        shown: seen.shown ?? knob.shown,
      })
    }
  }
  return [...byName.values()]
}

/** The unit a numeric key's name gives (`_MS`, `_SECONDS`, `_BYTES`, `_PERCENT`, `_PCT`). */
const unitOf = (name: string): "ms" | "s" | "bytes" | "percent" | "fraction" | undefined => {
  if (/_MS$/.test(name)) return "ms"
  if (/_SECONDS$/.test(name)) return "s"
  if (/_BYTES$/.test(name)) return "bytes"
  if (/_PERCENT$/.test(name)) return "percent"
  if (/_(PCT|FRACTION|ALPHA|MARGIN)$/.test(name)) return "fraction"
  return undefined
}

const numeric = (type: string): "integer" | "number" | undefined =>
  /^an integer/.test(type) ? "integer" : /^a number/.test(type) ? "number" : undefined

/**
 * What the value must be, as a user reads it: `integer ≥ 1`, `duration (ms) ≥ 100`,
 * `size (bytes)`, `fraction > 0 and ≤ 1`, `one of: a | b`, `boolean`, `text`, a
 * comma-separated list, a secret.
 */
export const formatType = (knob: Knob): string => {
  const literal = /^one of \((.*)\)$/.exec(knob.type)
  const kind = numeric(knob.type)
  const unit = unitOf(knob.name)
  const range = knob.range === undefined ? "" : ` ${formatRange(knob.range)}`
  const base =
    knob.shown ??
    (literal
      ? `one of: ${literal[1]!
          .split(", ")
          .map((v) => (v === "" ? "empty" : `\`${v}\``))
          .join(" | ")}`
      : kind === undefined
        ? knob.type.replace(/^an? /, "").replace(/ property$/, "")
        : unit === "ms" || unit === "s"
          ? `duration (${unit})${range}`
          : unit === "bytes"
            ? `size (bytes)${range}`
            : unit === "percent"
              ? `percent${range}`
              : unit === "fraction" && kind === "number"
                ? `fraction${range}`
                : `${kind}${range}`)
  const typed = knob.list ? `comma-separated list of ${base}s` : base
  return knob.secret ? `${typed} (secret: redacted in logs)` : typed
}

const binary = (bytes: number): string | undefined => {
  for (const [unit, size] of [
    ["GiB", 2 ** 30],
    ["MiB", 2 ** 20],
    ["KiB", 2 ** 10],
  ] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size} ${unit}`
  }
  return undefined
}

const duration = (ms: number): string | undefined => {
  for (const [unit, size] of [
    ["h", 3_600_000],
    ["min", 60_000],
    ["s", 1_000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${unit}`
  }
  return undefined
}

/** The knob's default with its size or duration in words when its unit gives one: `` `67108864` (64 MiB) ``. */
export const formatKnobDefault = (knob: Knob): string => {
  const value = /^`(\d+)`$/.exec(knob.default)
  if (value === null) return knob.default
  const n = Number(value[1])
  const type = formatType(knob)
  const words = type.startsWith("size (bytes)")
    ? binary(n)
    : type.startsWith("duration (ms)")
      ? duration(n)
      : type.startsWith("duration (s)")
        ? duration(n * 1_000)
        : undefined
  return words === undefined ? knob.default : `${knob.default} (${words})`
}
