/**
 * Model limits: the context window and the output reserve of a model, from
 * the request when given, else from the model table (`CostModel.table`, the
 * rows each provider adapter keeps in `providers/<format>/Models.ts`), or a
 * configured price row (`CTXD_PRICES_FILE`) when one matches.
 */
import type { Turn } from "@ctxd/contracts"
import * as CostModel from "./CostModel.ts"

/** A model with its limits settled. */
export interface ResolvedModel {
  readonly provider: Turn.Provider
  readonly name: string
  readonly contextWindow: number
  /** Tokens reserved for the answer; always < `contextWindow`. */
  readonly maxOutputTokens: number
  /** `contextWindow − maxOutputTokens`: what the prompt may use. */
  readonly effectiveWindow: number
  /** Set (false) when no row of the table names the model (see `CostModel.ModelPrices.known`); absent: known. */
  readonly known?: false | undefined
  /** The row an unknown model was sized with (its `family`; with `known`). */
  readonly row?: string | undefined
}

/** The limits of one row (with whether it names the model, and its family). */
export interface Limits {
  readonly contextWindow: number
  readonly maxOutputTokens: number
  readonly known?: boolean | undefined
  readonly family?: string | undefined
}

/**
 * Limits of a model the table does not know ({@link CostModel.conservative}):
 * 128,000 / 4,096 — no model family of the table has a smaller window, so
 * an unknown model is never filled past what it can take. A provider's
 * catch-all row (any other `claude-*`, `gpt-*`, `gemini-*`) has its own.
 */
export const fallback: Limits = {
  contextWindow: CostModel.conservative.contextWindow,
  maxOutputTokens: CostModel.conservative.maxOutputTokens,
}

/** The table row's limits for a model name (case-insensitive; a `provider/` prefix is ignored), or {@link fallback}. */
export const lookup = (name: string): Limits => {
  const row = CostModel.lookup(name)
  return { contextWindow: row.contextWindow, maxOutputTokens: row.maxOutputTokens, known: row.known, family: row.family }
}

/**
 * Settles a model's limits: explicit `contextWindow` / `maxOutputTokens` win
 * over `prices` (the model's row in the configured price table; default:
 * the built-in table's). When the output reserve is not smaller than the
 * window it is clamped to half the window (rounded down). A model no row
 * names is marked `known: false` with the `row` that sized it.
 */
export const resolve = (model: Turn.Model, prices: Limits = lookup(model.name)): ResolvedModel => {
  const contextWindow = model.contextWindow ?? prices.contextWindow
  const wanted = model.maxOutputTokens ?? prices.maxOutputTokens
  const maxOutputTokens = wanted < contextWindow ? wanted : Math.floor(contextWindow / 2)
  return {
    provider: model.provider,
    name: model.name,
    contextWindow,
    maxOutputTokens,
    effectiveWindow: contextWindow - maxOutputTokens,
    ...(prices.known === false ? { known: false as const, row: prices.family ?? "unknown" } : {}),
  }
}
