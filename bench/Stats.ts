/** Small statistics helpers for the benchmarks. */

/** The q-quantile (0..1) of `values` (nearest rank). */
export const quantile = (values: ReadonlyArray<number>, q: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank]!
}

/** One row of the benchmark table. */
export interface Row {
  readonly bench: string
  readonly metric: string
  readonly value: number
  readonly unit: string
  /** The target as text (e.g. "≤ 1"), when the issue sets one. */
  readonly target?: string
  /** Whether the target is met, when there is one. */
  readonly met?: boolean
}

export const round = (value: number, digits = 3): number => Number(value.toFixed(digits))
