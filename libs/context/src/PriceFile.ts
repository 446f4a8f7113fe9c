/**
 * A price file: configured `CostModel` rows, validated. The format is one
 * JSON object, `{ "models": [rows] }`, each row `{ "match": "<model-name
 * prefix>", ...any ModelPrices fields }`, e.g.
 *
 *     { "models": [
 *         { "match": "claude-sonnet-4-5", "inputPerMtok": 2.4, "outputPerMtok": 12 },
 *         { "match": "my-llama*", "provider": "openai", "mechanism": "automatic",
 *           "cacheReadMultiplier": 0.25, "minCacheableTokens": 1024,
 *           "tiers": [{ "name": "in_memory", "ttlSeconds": 600, "writeMultiplier": 1 }] } ] }
 *
 * Rules: prices (`inputPerMtok`, `outputPerMtok`) finite and ≥ 0;
 * multipliers (`cacheReadMultiplier`, a tier's `writeMultiplier`) finite and
 * > 0; `ttlSeconds` and `maxLifetimeSeconds` integers ≥ 1; `tiers` not empty,
 * names unique; `minCacheableTokens`, `maxBreakpoints`, `lookbackBlocks`
 * integers ≥ 0 and `incrementTokens` ≥ 1; `contextWindow` and
 * `maxOutputTokens` integers ≥ 1; `capabilities` an object of booleans
 * (`bindsReasoningToPrefix`, `toolSearch`, `midConversationSystem`, `providerCompaction`,
 * `explicitCacheBreakpoints`, each optional); `provider` one of `anthropic`,
 * `openai`, `gemini`, `unknown`; `mechanism` `explicit` or `automatic`; only
 * a trailing `*` in `match`; no other keys (a misspelt field is an error, not
 * a silent default); no row that an earlier row's prefix hides. Every
 * problem is reported with its row index, `match` and field. Pure, no I/O:
 * the caller reads the file.
 */
import { Issues } from "@ctxd/contracts"
import { Data, Either, ParseResult, Schema } from "effect"
import * as CostModel from "./CostModel.ts"

const int = (min: number) => Schema.Number.pipe(Schema.int(), Schema.greaterThanOrEqualTo(min))
const price = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())
const multiplier = Schema.Number.pipe(Schema.finite(), Schema.positive())
const oneOf = <const L extends ReadonlyArray<string>>(...literals: L) =>
  Schema.Literal(...literals).annotations({
    message: (issue) => ({
      message: `Expected one of ${literals.map((l) => JSON.stringify(l)).join(", ")}, actual ${Issues.preview(issue.actual)}`,
      override: true,
    }),
  })
const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })
/** Says what was expected in words (the default names the whole schema type). */
const expected = (what: string) => ({
  message: (issue: ParseResult.ParseIssue) => `Expected ${what}, actual ${Issues.preview(issue.actual)}`,
})

/** A `CostModel.CacheTier` as a price file spells it. */
export const Tier = Schema.Struct({
  name: Schema.NonEmptyTrimmedString,
  ttlSeconds: int(1),
  writeMultiplier: multiplier,
  maxLifetimeSeconds: optional(int(1)),
}).annotations(expected('a tier object {"name", "ttlSeconds", "writeMultiplier", "maxLifetimeSeconds"?}'))

/** A row's capability flags, each optional (the others come from the built-in row). */
export const Capabilities = Schema.Struct({
  bindsReasoningToPrefix: optional(Schema.Boolean),
  toolSearch: optional(Schema.Boolean),
  midConversationSystem: optional(Schema.Boolean),
  explicitCacheBreakpoints: optional(Schema.Boolean),
  providerCompaction: optional(Schema.Boolean),
}).annotations(
  expected(
    'a capabilities object {"bindsReasoningToPrefix"?, "toolSearch"?, "midConversationSystem"?, "explicitCacheBreakpoints"?, "providerCompaction"?}',
  ),
)

/** A model-name prefix with an optional trailing `*`. */
const Match = Schema.NonEmptyTrimmedString.pipe(
  Schema.filter((m) => !m.slice(0, -1).includes("*") || "only a trailing * is allowed (the match is a name prefix)"),
)

/** One row: decodes to a `CostModel.PriceRow` (`decode` passes it to `CostModel.make`, so the compiler checks). */
export const Row = Schema.Struct({
  match: Match,
  provider: optional(oneOf("anthropic", "openai", "gemini", "unknown")),
  family: optional(Schema.NonEmptyTrimmedString),
  inputPerMtok: optional(price),
  outputPerMtok: optional(price),
  cacheReadMultiplier: optional(multiplier),
  tiers: optional(
    Schema.Array(Tier).pipe(
      Schema.minItems(1),
      Schema.filter((tiers) => new Set(tiers.map((t) => t.name)).size === tiers.length || "tier names must be unique"),
    ),
  ),
  minCacheableTokens: optional(int(0)),
  mechanism: optional(oneOf("explicit", "automatic")),
  incrementTokens: optional(int(1)),
  maxBreakpoints: optional(int(0)),
  lookbackBlocks: optional(int(0)),
  contextWindow: optional(int(1)),
  maxOutputTokens: optional(int(1)),
  capabilities: optional(Capabilities),
}).annotations(expected('a row object {"match", ...price fields}'))

/** The file: `{ "models": [rows] }`. */
export const File = Schema.Struct({ models: Schema.Array(Row).annotations(expected("an array of rows")) }).annotations(
  expected('an object {"models": [rows]}'),
)

/** One problem of a price file. */
export interface Problem {
  /** Index of the row in `models`; undefined: the file's shape. */
  readonly row?: number | undefined
  /** The field as a JSON path (`tiers[0].ttlSeconds`; outside a row from the file's root); undefined: the whole row or file. */
  readonly field?: string | undefined
  readonly message: string
}

/** A price file that cannot be used; `message` names each problem's row, `match` and field. */
export class InvalidPriceFile extends Data.TaggedError("InvalidPriceFile")<{
  readonly message: string
  readonly problems: ReadonlyArray<Problem>
}> {}

/** Problems listed in the message; the rest are counted. */
const SHOWN = 10

const invalid = (problems: ReadonlyArray<Problem>, input?: unknown): InvalidPriceFile => {
  const rows = (input as { readonly models?: unknown } | null | undefined)?.models
  const matchOf = (row: number) => {
    const match = Array.isArray(rows) ? (rows[row] as { readonly match?: unknown } | null | undefined)?.match : undefined
    return typeof match === "string" ? ` (match ${Issues.preview(match, 60)})` : ""
  }
  const line = (p: Problem) =>
    `${p.row === undefined ? "" : `models[${p.row}]${matchOf(p.row)}, `}${p.field === undefined ? "" : `field ${p.field}: `}${p.message}`
  const more = problems.length > SHOWN ? ` (+${problems.length - SHOWN} more)` : ""
  return new InvalidPriceFile({ message: `${problems.slice(0, SHOWN).map(line).join("; ")}${more}`, problems })
}

/** Rows never reached: an earlier row's prefix is a prefix of theirs. */
const shadowed = (rows: ReadonlyArray<CostModel.PriceRow>): Array<Problem> =>
  rows.flatMap((row, j) => {
    const i = rows.findIndex((earlier, k) => k < j && CostModel.matchPrefix(row.match).startsWith(CostModel.matchPrefix(earlier.match)))
    if (i < 0) return []
    const by = `models[${i}] (match ${JSON.stringify(rows[i]!.match)})`
    return [{ row: j, field: "match", message: `never used: ${by} comes first and matches every name this row matches` }]
  })

const decodeFile = Schema.decodeUnknownEither(File, { errors: "all", onExcessProperty: "error" })

/** Validates a parsed price file and builds its table (`CostModel.make`); every problem names its row and field. */
export const decode = (input: unknown): Either.Either<CostModel.PriceTable, InvalidPriceFile> => {
  const decoded = decodeFile(input)
  if (Either.isLeft(decoded)) {
    const problems = ParseResult.ArrayFormatter.formatErrorSync(decoded.left).map((issue): Problem => {
      const [head, row, ...rest] = issue.path
      if (head === "models" && typeof row === "number") {
        return { row, field: rest.length === 0 ? undefined : Issues.formatPath(rest), message: issue.message }
      }
      return { field: issue.path.length === 0 ? undefined : Issues.formatPath(issue.path), message: issue.message }
    })
    return Either.left(invalid(problems, input))
  }
  const unreachable = shadowed(decoded.right.models)
  return unreachable.length > 0 ? Either.left(invalid(unreachable, input)) : Either.right(CostModel.make(decoded.right.models))
}

/** {@link decode} of a price file's text (a JSON syntax error is a problem too). */
export const fromJson = (text: string): Either.Either<CostModel.PriceTable, InvalidPriceFile> => {
  let input: unknown
  try {
    input = JSON.parse(text)
  } catch (e) {
    return Either.left(invalid([{ message: `not JSON: ${e instanceof Error ? e.message : String(e)}` }]))
  }
  return decode(input)
}
