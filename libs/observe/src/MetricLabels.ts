/**
 * Bounded label values for metrics whose labels come from callers (tenant
 * ids, model names). A metric series exists per distinct label set, and the
 * Prometheus scrape, the `<root>.v1.metrics` reply and the process's memory
 * all grow with them: so each such label admits the first
 * {@link defaults.maxTenants} (tenants) or {@link defaults.maxModels}
 * (models) distinct values seen by the process, and every later one shares
 * the value {@link defaults.other}. Values are normalized first
 * ({@link normalize}). The sets are process-wide, like Effect's metric
 * registry they label.
 */

/** The label caps (per process). */
export const defaults = {
  /** Distinct `tenant` label values; later tenants are counted under `other`. Default 100. */
  maxTenants: 100,
  /** Distinct `model` label values (`provider/name`); later models are counted under `other`. Default 100. */
  maxModels: 100,
  /** Longest label value in characters (tenant ids are at most 128). Default 128. */
  maxLength: 128,
  /** The value shared by everything beyond a cap. */
  other: "other",
} as const

/** One bounded label. */
export interface LabelSet {
  /** The label value for `value`: itself (normalized) while it is admitted or there is room, else `other`. */
  readonly label: (value: string) => string
  /** Distinct values admitted so far. */
  readonly size: () => number
  /** The cap. */
  readonly max: number
}

/** A label value from a caller's string: characters outside `[A-Za-z0-9._:/-]` become `_`; at most `maxLength` characters; never empty. */
export const normalize = (text: string, maxLength: number = defaults.maxLength): string => {
  const value = text.slice(0, maxLength).replace(/[^A-Za-z0-9._:/-]/g, "_")
  return value === "" ? "_" : value
}

/** A label admitting the first `max` distinct values (at least 0). */
export const make = (max: number): LabelSet => {
  const admitted = new Set<string>()
  const cap = Math.max(0, Math.floor(max))
  return {
    max: cap,
    size: () => admitted.size,
    label: (value) => {
      const normalized = normalize(value)
      if (admitted.has(normalized)) return normalized
      if (admitted.size >= cap) return defaults.other
      admitted.add(normalized)
      return normalized
    },
  }
}

const tenants = make(defaults.maxTenants)
const models = make(defaults.maxModels)

/** The `tenant` label of `tenant` in this process (see the module doc). */
export const tenant = (id: string): string => tenants.label(id)

/** The `model` label of a model in this process: `provider/name`, lowercase (see the module doc). */
export const model = (ref: { readonly provider: string; readonly name: string }): string =>
  models.label(`${ref.provider}/${ref.name}`.toLowerCase())

/** How many tenant and model labels the process has admitted (tests, diagnostics). */
export const usage = (): { readonly tenants: number; readonly models: number } => ({ tenants: tenants.size(), models: models.size() })
