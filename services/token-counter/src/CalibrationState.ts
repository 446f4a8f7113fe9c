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
 *   with a prior of {@link Limits.priorTenants} (default 10) tenants at the
 *   model's family factor F: (priorTenants × F + Σ tenant factors) /
 *   (priorTenants + tenants). Each tenant counts once however many reports
 *   it sends, so one tenant moves it by at most (factor − F) /
 *   (priorTenants + 1) and never moves another tenant's own factor at all.
 * - **Families** ({@link familyOf}: `claude`, `gpt`, `gemini`, by model
 *   name, else by provider): a model's family factor F is the mean of the
 *   learned factors of the family's OTHER models (each the mean of its
 *   tenants' factors with the prior at the family's starting ratio,
 *   {@link FAMILY_START}), or that starting ratio while there are none. So a
 *   model never seen before starts from what its family has learned rather
 *   than from 1, and then learns its own. A model's own tenants never move
 *   its own F, and one tenant moves any F by at most what it moves one
 *   model's factor (a mean of bounded values), so the bound above holds
 *   twice at most. Models of no known family start from 1.
 * - **Drift** histograms per model label (not per tenant: they are metrics).
 *
 * The state is mutable (updated in place under the service's `Ref`).
 */
import { type ModelProvider, Providers } from "@ctxd/context"
import * as Calibration from "./Calibration.ts"

/** A model family: models whose tokenizers are alike, so one model's factor is a good start for another's. */
export type Family = ModelProvider.TokenizerFamily

/**
 * The ratio billed / local estimate a family starts from, before any report
 * (the local estimate is cl100k, or o200k for current OpenAI models):
 * - `gpt` 1: o200k / cl100k is the model's own vocabulary (only the framing
 *   differs, which `LocalCounter.overhead` follows);
 * - `claude` 1: cl100k is the usual stand-in for Anthropic's unpublished
 *   tokenizer (what ctxd has always started from);
 * - `gemini` 1.05: Gemini's SentencePiece vocabulary spends about 5–10 %
 *   more tokens than o200k on English prose (cl100k is within a few percent
 *   of o200k there) and fewer on other scripts; a low, documented start that
 *   usage reports then correct.
 */
export const FAMILY_START: Readonly<Record<Family, number>> = { claude: 1, gpt: 1, gemini: 1.05 }

/** The family of a model: by name (after a gateway prefix), else by provider; `undefined` for none known. */
export const familyOf = (model: { readonly provider: string; readonly name: string }): Family | undefined => {
  const name = model.name.toLowerCase().slice(model.name.lastIndexOf("/") + 1)
  if (name.includes("claude")) return "claude"
  if (name.includes("gemini") || name.includes("gemma")) return "gemini"
  if (/^(?:ft:)?(?:gpt|chatgpt|o\d|text-embedding|davinci|babbage)/.test(name)) return "gpt"
  return Providers.isProvider(model.provider) ? Providers.ofProvider(model.provider).tokenizer.family : undefined
}

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
  /** The family of each `label#backend` in `global` (when known). */
  readonly families: Map<string, Family>
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
  families: new Map(),
  tenants: new Map(),
  drift: new Map(),
  rawDrift: new Map(),
})

/** A metric label from a caller's string: lowercase, `[a-z0-9._:/-]` (others become `_`), at most {@link MAX_LABEL} characters. */
export const normalize = (text: string): string => {
  const label = text
    .slice(0, MAX_LABEL)
    .toLowerCase()
    .replace(/[^a-z0-9._:/-]/g, "_")
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

/** The mean of `g`'s tenant factors with a prior of `priorTenants` tenants at `start`. */
const withPrior = (state: State, g: GlobalFactor | undefined, start: number): number =>
  g === undefined ? start : (state.limits.priorTenants * start + g.sum) / (state.limits.priorTenants + g.tenants)

const backendOfKey = (fk: string): string => fk.slice(fk.lastIndexOf("#") + 1)

/**
 * The family factor of a local backend: the mean of the learned factors of
 * the family's models but `except` (a `label#backend`), each with its prior
 * at the family's start; the start while there are none; 1 for no family.
 */
export const familyFactorOf = (state: State, family: Family | undefined, backend: string, except?: string): number => {
  if (family === undefined) return 1
  const start = FAMILY_START[family]
  let sum = 0
  let models = 0
  for (const [fk, g] of state.global) {
    if (fk === except || g.tenants <= 0 || state.families.get(fk) !== family || backendOfKey(fk) !== backend) continue
    sum += withPrior(state, g, start)
    models++
  }
  return models === 0 ? start : sum / models
}

const globalValue = (state: State, fk: string, family: Family | undefined): number =>
  withPrior(state, state.global.get(fk), familyFactorOf(state, family, backendOfKey(fk), fk))

const tenantKey = (tenant: string, fk: string): string => `${tenant} ${fk}`

/** The global factor of a model and local backend (its family's factor when nothing was learned for it; 1 for no family). */
export const globalFactorOf = (state: State, model: ModelRef, backend: string): number => {
  const label = labelOf(state, model, false)
  return label === OTHER ? 1 : globalValue(state, `${label}#${backend}`, familyOf(model))
}

/** The factor for a tenant's model and local backend: the tenant's own, else the global one. */
export const factorOf = (state: State, model: ModelRef, backend: string, tenant = ""): number => {
  const label = labelOf(state, model, false)
  if (label === OTHER) return 1
  const fk = `${label}#${backend}`
  return state.tenants.get(tenantKey(tenant, fk))?.factor ?? globalValue(state, fk, familyOf(model))
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
  const family = familyOf(o.model)
  if (family !== undefined) state.families.set(fk, family)
  const previous = state.tenants.get(tenantKey(tenant, fk))
  const updated = Calibration.updateFactor(previous ?? { factor: current, reports: 0 }, o.billed / raw, options)
  setTenant(state, fk, tenant, updated, previous)
  return { drift: d, factor: updated.factor }
}

/** A bounded snapshot for metrics: global factors, drift per label, and how many labels and tenant factors there are. */
export const snapshot = (state: State) => ({
  factors: Object.fromEntries(
    [...state.global].map(
      ([k, g]) => [k, { factor: globalValue(state, k, state.families.get(k)), reports: g.reports, tenants: g.tenants }] as const,
    ),
  ),
  /** Per `family#backend` with a learned model: where a new model of the family starts, and how many models it averages. */
  families: Object.fromEntries(
    [
      ...new Set(
        [...state.global.keys()].flatMap((k) => {
          const family = state.families.get(k)
          return family === undefined ? [] : [`${family}#${backendOfKey(k)}`]
        }),
      ),
    ].map((key) => {
      const [family, backend] = key.split("#") as [Family, string]
      const models = [...state.global].filter(
        ([k, g]) => g.tenants > 0 && state.families.get(k) === family && backendOfKey(k) === backend,
      ).length
      return [key, { factor: familyFactorOf(state, family, backend), models }] as const
    }),
  ),
  drift: Object.fromEntries([...state.drift].map(([k, h]) => [k, Calibration.summarize(h)] as const)),
  rawDrift: Object.fromEntries([...state.rawDrift].map(([k, h]) => [k, Calibration.summarize(h)] as const)),
  labels: { used: state.labels.size, max: state.limits.maxModels, overflow: state.overflow },
  tenantFactors: state.tenants.size,
})
