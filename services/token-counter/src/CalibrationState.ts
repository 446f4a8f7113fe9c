/**
 * What a process has learned from usage reports, bounded and per tenant.
 *
 * - **Labels**: model names are chosen by callers, so every key made of one
 *   is normalized ({@link normalize}: lowercase, `[a-z0-9._:/-]`, at most
 *   {@link MAX_LABEL} characters) and the first {@link Limits.maxModels}
 *   distinct ones (default 100) are kept; later ones share the label
 *   `other`, which records drift but teaches no factor (it mixes models).
 * - **Factors per tenant and model** (and local backend): an EWMA of
 *   billed / raw estimate (`Calibration.updateFactor`) that starts from the
 *   global factor. At most {@link Limits.maxTenantFactors} (default 10,000)
 *   are kept, least recently updated dropped first (that tenant falls back
 *   to the global factor).
 * - **The global factor** of a model is the mean of the tenants' factors
 *   with a prior of {@link Limits.priorTenants} (default 10) tenants at 1:
 *   (priorTenants + Σ tenant factors) / (priorTenants + tenants). Each
 *   tenant counts once however many reports it sends, so one tenant moves
 *   it by at most (factor − 1) / (priorTenants + 1) and never moves another
 *   tenant's own factor at all.
 * - **Drift** histograms per model label (not per tenant: they are metrics).
 *
 * The state is mutable (updated in place under the service's `Ref`).
 */
import * as Calibration from "./Calibration.ts"

/** Longest model label, in characters. */
export const MAX_LABEL = 64

/** The label of every model beyond the cardinality cap. */
export const OTHER = "other"

/** Bounds of the state (defaults in the module doc). */
export interface Limits {
  readonly maxModels: number
  readonly maxTenantFactors: number
  readonly priorTenants: number
}

export const defaultLimits: Limits = { maxModels: 100, maxTenantFactors: 10_000, priorTenants: 10 }

/** A model's global factor: the sum and number of the tenants' factors it averages. */
export interface GlobalFactor {
  readonly sum: number
  readonly tenants: number
  /** Usage reports folded in, over all tenants. */
  readonly reports: number
}

export interface State {
  readonly limits: Limits
  /** Admitted model labels, in order of arrival. */
  readonly labels: Set<string>
  /** Reports whose model was beyond the label cap (recorded under `other`). */
  overflow: number
  /** Per `label#backend`. */
  readonly global: Map<string, GlobalFactor>
  /** Per `tenant label#backend`, least recently updated first. */
  readonly tenants: Map<string, Calibration.Factor>
  /** Drift of the estimates as reported (calibrated when a factor was applied), per label. */
  readonly drift: Map<string, Calibration.Histogram>
  /** Drift of the raw local estimates (before the factor), local backends only, per label. */
  readonly rawDrift: Map<string, Calibration.Histogram>
}

/** Nothing learned yet. */
export const make = (limits: Partial<Limits> = {}): State => ({
  limits: { ...defaultLimits, ...limits },
  labels: new Set(),
  overflow: 0,
  global: new Map(),
  tenants: new Map(),
  drift: new Map(),
  rawDrift: new Map(),
})

/** A metric label from a caller's string: lowercase, `[a-z0-9._:/-]` (others become `_`), at most {@link MAX_LABEL} characters. */
export const normalize = (text: string): string => {
  const label = text.slice(0, MAX_LABEL).toLowerCase().replace(/[^a-z0-9._:/-]/g, "_")
  return label === "" ? "_" : label
}

type ModelRef = { readonly provider: string; readonly name: string }

/** `provider/name`, normalized: the key of a model. */
export const modelKey = (model: ModelRef): string => `${normalize(model.provider)}/${normalize(model.name)}`

/** The model's label in `state`: its key if admitted (admitting it while there is room), else {@link OTHER}. */
export const labelOf = (state: State, model: ModelRef, admit: boolean): string => {
  const key = modelKey(model)
  if (state.labels.has(key)) return key
  if (state.labels.size < state.limits.maxModels) {
    if (admit) state.labels.add(key)
    return key
  }
  if (admit) state.overflow++
  return OTHER
}

const globalValue = (state: State, g: GlobalFactor | undefined): number =>
  g === undefined ? 1 : (state.limits.priorTenants + g.sum) / (state.limits.priorTenants + g.tenants)

const tenantKey = (tenant: string, fk: string): string => `${tenant} ${fk}`

/** The global factor of a model and local backend (1 when nothing was learned). */
export const globalFactorOf = (state: State, model: ModelRef, backend: string): number => {
  const label = labelOf(state, model, false)
  return label === OTHER ? 1 : globalValue(state, state.global.get(`${label}#${backend}`))
}

/** The factor for a tenant's model and local backend: the tenant's own, else the global one. */
export const factorOf = (state: State, model: ModelRef, backend: string, tenant = ""): number => {
  const label = labelOf(state, model, false)
  if (label === OTHER) return 1
  const fk = `${label}#${backend}`
  return state.tenants.get(tenantKey(tenant, fk))?.factor ?? globalValue(state, state.global.get(fk))
}

/** One billed turn to fold in. */
export interface Observation extends Calibration.FactorObservation {
  /** Whose turn it was (`""` when unknown). */
  readonly tenant?: string | undefined
}

/** What folding an observation gave. */
export interface Recorded {
  readonly drift: number
  /** The tenant's factor for the model and backend after this observation (1 for exact backends). */
  readonly factor: number
}

const histogramAt = (map: Map<string, Calibration.Histogram>, key: string, value: number): void =>
  void map.set(key, Calibration.observe(map.get(key) ?? Calibration.emptyHistogram, value))

/** Sets a tenant's factor, keeping the global sum and the LRU bound. */
const setTenant = (state: State, fk: string, tenant: string, next: Calibration.Factor, previous: Calibration.Factor | undefined) => {
  const key = tenantKey(tenant, fk)
  const g = state.global.get(fk) ?? { sum: 0, tenants: 0, reports: 0 }
  state.global.set(fk, {
    sum: g.sum - (previous?.factor ?? 0) + next.factor,
    tenants: g.tenants + (previous === undefined ? 1 : 0),
    reports: g.reports + 1,
  })
  state.tenants.delete(key)
  state.tenants.set(key, next)
  while (state.tenants.size > state.limits.maxTenantFactors) {
    const [oldest, factor] = state.tenants.entries().next().value as [string, Calibration.Factor]
    state.tenants.delete(oldest)
    const ofk = oldest.slice(oldest.indexOf(" ") + 1)
    const og = state.global.get(ofk)
    if (og !== undefined) state.global.set(ofk, { ...og, sum: og.sum - factor.factor, tenants: og.tenants - 1 })
  }
}

/**
 * Folds one observation: drift always, the tenant's factor for local
 * backends (unless `learn` is false or the model is beyond the label cap).
 * With `dryRun`, nothing is changed: the answer says what the drift is and
 * what the factor stands at.
 */
export const record = (
  state: State,
  o: Observation,
  options: Calibration.FactorOptions = Calibration.defaultFactorOptions,
  dryRun = false,
): Recorded => {
  const label = labelOf(state, o.model, !dryRun)
  const d = Calibration.drift(o.estimate, o.billed)
  if (!dryRun) histogramAt(state.drift, label, d)
  if (!Calibration.isLocal(o.backend)) return { drift: d, factor: 1 }
  const calibration = Number.isFinite(o.calibration) && o.calibration > 0 ? o.calibration : 1
  const raw = o.estimate / calibration
  if (!dryRun) histogramAt(state.rawDrift, label, Calibration.drift(raw, o.billed))
  const tenant = o.tenant ?? ""
  const current = factorOf(state, o.model, o.backend, tenant)
  if (dryRun || label === OTHER || o.learn === false || raw <= 0) return { drift: d, factor: current }
  const fk = `${label}#${o.backend}`
  const previous = state.tenants.get(tenantKey(tenant, fk))
  const updated = Calibration.updateFactor(previous ?? { factor: current, reports: 0 }, o.billed / raw, options)
  setTenant(state, fk, tenant, updated, previous)
  return { drift: d, factor: updated.factor }
}

/** A bounded snapshot for metrics: global factors, drift per label, and how many labels and tenant factors there are. */
export const snapshot = (state: State) => ({
  factors: Object.fromEntries(
    [...state.global].map(([k, g]) => [k, { factor: globalValue(state, g), reports: g.reports, tenants: g.tenants }] as const),
  ),
  drift: Object.fromEntries([...state.drift].map(([k, h]) => [k, Calibration.summarize(h)] as const)),
  rawDrift: Object.fromEntries([...state.rawDrift].map(([k, h]) => [k, Calibration.summarize(h)] as const)),
  labels: { used: state.labels.size, max: state.limits.maxModels, overflow: state.overflow },
  tenantFactors: state.tenants.size,
})
