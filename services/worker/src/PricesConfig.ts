/**
 * `CTXD_PRICES_FILE` and the model price table the worker's cache planner
 * uses, part of `WorkerConfig`.
 */
import { AssemblerConfig } from "@ctxd/assembler"
import { ConfigReference } from "@ctxd/config"
import { type CostModel, PriceFile } from "@ctxd/context"
import { Config, type ConfigError, Data, Effect, Either, Option } from "effect"
import { readFileSync } from "node:fs"

/** The price file cannot be read or is not valid; the message names the file, and each problem's row and field. */
export class InvalidPricesFile extends Data.TaggedError("InvalidPricesFile")<{
  readonly message: string
  readonly file: string
}> {}

/** `CTXD_PRICES_FILE`: the JSON file of price rows {@link priceTable} reads; unset: the built-in table only. */
export const pricesFile: Config.Config<Option.Option<string>> = Config.option(
  Config.string("CTXD_PRICES_FILE").pipe(
    Config.withDescription(
      'JSON file {"models": [{"match": "<model-name prefix>", ...price fields}]}: model price rows the cache planner checks before the built-in table. Validated at start: a bad file stops the worker, naming the row and field',
    ),
    ConfigReference.shownAs("file path"),
  ),
)

/**
 * The model price table the cache planner uses: `CostModel`'s built-in table,
 * under the rows of the JSON file named by `CTXD_PRICES_FILE` when it is set,
 * `{"models": [{"match": "<model-name prefix>", ...ModelPrices fields}]}`
 * (format and rules: `PriceFile`), validated at start.
 */
export const priceTable: Effect.Effect<CostModel.PriceTable, ConfigError.ConfigError | InvalidPricesFile> = Effect.gen(function* () {
  const file = yield* pricesFile
  if (Option.isNone(file) || file.value === "") return AssemblerConfig.defaults.prices
  const path = file.value
  const read = yield* Effect.either(Effect.try({ try: () => readFileSync(path, "utf8"), catch: (e) => e }))
  if (Either.isLeft(read)) {
    const reason = read.left instanceof Error ? read.left.message : String(read.left)
    return yield* new InvalidPricesFile({ file: path, message: `CTXD_PRICES_FILE ${path}: ${reason}` })
  }
  const decoded = PriceFile.fromJson(read.right)
  if (Either.isLeft(decoded)) {
    return yield* new InvalidPricesFile({ file: path, message: `CTXD_PRICES_FILE ${path} is not valid: ${decoded.left.message}` })
  }
  yield* Effect.logInfo(`CTXD_PRICES_FILE ${path}: ${decoded.right.rows.length} price rows before the built-in table`)
  return decoded.right
})
