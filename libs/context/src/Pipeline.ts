/**
 * The context pipeline, pure: stored history + system + tools + knobs in,
 * provider-ready request body + report out. The stages, in order
 * ({@link STAGES}):
 *
 * 1. `window`    — the message-count window (anchor and pinned messages kept), `Window`;
 * 2. `compress`  — tool schema compression, `SchemaCompression`;
 * 3. `mask`      — observation masking of consumed tool results, `Masking`;
 * 4. `budget`    — the budget cut (protected fresh tail, newest-first fill), `Budget`;
 * 5. `prune`     — orphaned tool calls/results removed, `Units`;
 * 6. `thinking`  — reasoning of thinking turns older than the last `keepThinkingTurns` left out, `Reasoning`
 *    (under the cache planner held while the cache is warm until the drop pays);
 * 7. `render`    — the body in the request's format, laid out by `CacheLayout`;
 * 8. `proactive` — above a threshold, stages 2–7 re-run one rung stronger at a time, `Proactive`
 *    (under the cache planner a rung climbed is an optional edit like the others, see `run`).
 *
 * Each stage returns its own part of the report, and the report lists per
 * stage the prompt's tokens before and after it (`report.stages`).
 *
 * Cost is O(window) given the {@link Window.Landmarks} (and the
 * {@link Masking.Grid} when masking is on): pass those returned by the
 * previous call to keep it so as the history grows.
 */
import type { Turn } from "@ctxd/contracts"
import * as Budget from "./Budget.ts"
import * as CachePlanner from "./CachePlanner.ts"
import { lostOf, withDropBlock } from "./internal/bound.ts"
import { systemKeyOf, toolsKeyOf } from "./internal/digests.ts"
import {
  compressStage,
  maskStage,
  pruneStage,
  renderStage,
  sumOf,
  tokenOfUnder,
  type Hold,
  type Input,
  type Options,
  type StageReport,
  type Windowed,
  windowStage,
} from "./internal/stages.ts"
import { thinkingStage } from "./internal/thinkingStage.ts"
import * as Masking from "./Masking.ts"
import * as NoHarm from "./NoHarm.ts"
import * as Proactive from "./Proactive.ts"
import * as Reasoning from "./Reasoning.ts"
import type * as Window from "./Window.ts"
import { withMemorySection } from "./internal/memorySection.ts"

export type { CounterInfo, Input, Memory, Options, StageReport, StoredMessage } from "./internal/stages.ts"

export { MEMORY_SECTION_ID } from "./internal/memorySection.ts"

/** The stage names, in the order they run. */
export const STAGES = ["window", "compress", "mask", "budget", "prune", "thinking", "render", "proactive"] as const

/**
 * The turn options the pipeline applies by default — the one place their
 * defaults live (the worker's environment defaults and the benches read
 * them from here): `windowMessages` 40, `windowStep` 20, `freshTailMessages`
 * 16, `toolCompression` `truncate` (descriptions below the tool level go;
 * types, enums and `required` stay: the GitHub catalog's default context then
 * costs 17 % of all its tools, against 30 % with `minify`), `maskKeep` 3,
 * `maskBatchTokens` 2,000, `proactiveThreshold` 0.85, `keepThinkingTurns` 1.
 * `budgetTokens` has no default: the model's effective window.
 */
export const defaults = {
  windowMessages: 40,
  windowStep: 20,
  freshTailMessages: 16,
  toolCompression: "truncate",
  maskKeep: Masking.defaults.keep,
  maskBatchTokens: Masking.defaults.batchTokens,
  proactiveThreshold: Proactive.DEFAULT_THRESHOLD,
  keepThinkingTurns: Reasoning.defaults.keepTurns,
} as const satisfies Turn.Options

/**
 * The pipeline's slice of turn options. The window knobs default as in
 * {@link defaults}; the optimizations are copied only when given (absent =
 * off): spread {@link defaults} under the options to turn them on.
 */
export const resolveOptions = (o: Turn.Options | undefined): Options => ({
  windowMessages: o?.windowMessages ?? defaults.windowMessages,
  windowStep: o?.windowStep ?? defaults.windowStep,
  freshTailMessages: o?.freshTailMessages ?? defaults.freshTailMessages,
  budgetTokens: o?.budgetTokens,
  ...(o?.toolCompression === undefined ? {} : { toolCompression: o.toolCompression }),
  ...(o?.maskKeep === undefined ? {} : { maskKeep: o.maskKeep }),
  ...(o?.maskBatchTokens === undefined ? {} : { maskBatchTokens: o.maskBatchTokens }),
  ...(o?.proactiveThreshold === undefined ? {} : { proactiveThreshold: o.proactiveThreshold }),
  ...(o?.keepThinkingTurns === undefined ? {} : { keepThinkingTurns: o.keepThinkingTurns }),
  ...(o?.thinkingPrefixMismatch === undefined ? {} : { thinkingPrefixMismatch: o.thinkingPrefixMismatch }),
})

export interface Output {
  /** The provider request body, with `model`. */
  readonly request: Record<string, unknown>
  readonly report: Turn.Report
  /** Landmarks of the whole history: pass them to the next call. */
  readonly landmarks: Window.Landmarks
  /** The mask grid of the whole history when masking ran: pass it to the next call. */
  readonly maskGrid?: Masking.Grid | undefined
  /** Proactive rungs in effect when proactive compression ran: pass it to the next call. */
  readonly proactiveRung?: number | undefined
  /** The prompt as the cache planner compares it: pass it as `cachePlan.previous` next turn. */
  readonly shape?: CachePlanner.Candidate | undefined
}

interface Attempt {
  readonly output: Output
  /** Tokens the window would use before budget eviction (for proactive compression). */
  readonly demand: number
}

/** Stages 2–6 at one rung of compression. */
const attempt = (input: Input, w: Windowed, level: Proactive.Level, target: number | undefined): Attempt => {
  const { history, options, model } = input
  const n = history.length
  const fixedIn = input.systemTokens + input.toolsTokens

  const memoryTokens = input.memory?.text === "" ? 0 : (input.memory?.tokens ?? 0)
  const compressed = compressStage(input, level)
  const fixed = input.systemTokens + compressed.tokens
  const plan = maskStage(input, w, level, fixed, target)
  const tokenOf = tokenOfUnder(input, plan)
  const demand = fixed + sumOf(w.window, tokenOf, n)

  const allocation = Budget.allocate(history, w.window, {
    totalTokens: w.totalTokens,
    systemTokens: input.systemTokens,
    toolsTokens: compressed.tokens,
    memoryTokens,
    freshTailMessages: options.freshTailMessages,
    windowStep: options.windowStep,
    pinned: w.marks.pinned,
    tokenOf: plan === undefined ? undefined : tokenOf,
  })
  const pruned = pruneStage(input, allocation, plan, tokenOf)
  const thought = thinkingStage(input, w.window.start, pruned.view.messages, pruned.messages, tokenOf, compressed.tools)
  const prunedTokens = pruned.historyTokens - thought.tokensSaved
  // the cache frontier: messages before the mask boundary (the previous turn's, if it advanced now) stay as they are
  const frontier = plan === undefined ? undefined : Math.min(plan.boundary, input.cachePlan?.previous?.maskBoundary ?? plan.boundary)
  const stable = frontier === undefined ? undefined : pruned.view.messages.filter((v) => v.index < frontier).length
  const drawn = renderStage(input, compressed.tools, thought.messages, input.cachePlan === undefined ? undefined : stable)
  const rendered = thought.bound?.dropBlock === true ? { ...drawn, request: withDropBlock(input.format, drawn.request) } : drawn
  const historyTokens = prunedTokens + (input.trailer?.tokens ?? 0)
  const total = fixed + historyTokens + memoryTokens

  const windowOut = w.report.tokensOut
  const stages: Array<StageReport> = [
    w.report,
    { stage: "compress", tokensIn: windowOut, tokensOut: windowOut - fixedIn + fixed },
    { stage: "mask", tokensIn: windowOut - fixedIn + fixed, tokensOut: demand },
    { stage: "budget", tokensIn: demand, tokensOut: fixed + allocation.keptTokens },
    { stage: "prune", tokensIn: fixed + allocation.keptTokens, tokensOut: fixed + pruned.historyTokens },
    { stage: "thinking", tokensIn: fixed + pruned.historyTokens, tokensOut: fixed + prunedTokens },
    { stage: "render", tokensIn: fixed + prunedTokens, tokensOut: total },
  ]
  const seqAt = (i: number | undefined): number | null => (i === undefined ? null : history[i]!.seq)
  const boundary = plan?.boundary ?? 0
  const report: Turn.Report = {
    format: input.format,
    model: {
      provider: model.provider,
      name: model.name,
      contextWindow: model.contextWindow,
      maxOutputTokens: model.maxOutputTokens,
      effectiveWindow: model.effectiveWindow,
      ...(model.known === false ? { known: false, row: model.row } : {}),
    },
    tokens: {
      system: input.systemTokens,
      tools: compressed.tokens,
      memory: memoryTokens,
      history: historyTokens,
      fullHistory: w.report.tokensIn - fixedIn,
      total,
      budget: w.totalTokens,
    },
    utilization: model.effectiveWindow > 0 ? total / model.effectiveWindow : 0,
    messages: {
      stored: n,
      window: n - w.window.start,
      sent: pruned.view.messages.length,
      droppedByWindow: allocation.droppedByWindow,
      droppedByBudget: allocation.droppedByBudget,
      anchorSeq: seqAt(w.marks.anchor),
      firstSentSeq: seqAt(pruned.view.messages[0]?.index),
      lastSentSeq: seqAt(pruned.view.messages.at(-1)?.index),
    },
    orphans: pruned.view.orphans,
    overBudget: allocation.overBudget,
    counter: input.counter,
    cache: rendered.cache,
    stages,
    ...(options.toolCompression === undefined && options.proactiveThreshold === undefined
      ? {}
      : {
          tools: {
            sent: compressed.tools.length,
            compression: level.toolCompression,
            tokens: compressed.tokens,
            saved: input.toolsTokens - compressed.tokens,
          },
        }),
    ...(thought.report === undefined ? {} : { reasoning: thought.report }),
    ...(plan === undefined
      ? {}
      : {
          masking: {
            ...pruned.masking,
            boundarySeq: boundary === 0 ? null : (history[boundary]?.seq ?? history.at(-1)!.seq + 1),
          },
        }),
  }
  const shape: CachePlanner.Candidate = {
    windowStart: w.window.start,
    maskBoundary: plan?.boundary,
    sent: pruned.view.messages.map((v) => {
      const saved = thought.saved.get(v.index)
      const ref = { index: v.index, masked: plan?.replaced.has(v.index) === true, tokens: tokenOf(v.index) - (saved ?? 0) }
      return saved === undefined ? ref : { ...ref, thinned: true }
    }),
    systemKey: systemKeyOf(input.system),
    toolsKey: toolsKeyOf(compressed.tools, level.toolCompression, compressed.tokens),
    systemTokens: input.systemTokens,
    toolsTokens: compressed.tokens,
    total,
    overBudget: allocation.overBudget,
    fullTotal: w.report.tokensIn + memoryTokens,
    ...(thought.state === undefined ? {} : { thinking: thought.state }),
    ...(thought.bound === undefined
      ? {}
      : { bound: thought.bound.record, reasoningLost: lostOf(thought.bound, input.cachePlan?.expectedTurns) }),
  }
  return { output: { request: rendered.request, report, landmarks: w.marks, maskGrid: w.grid, shape }, demand }
}

/**
 * Runs the pipeline over one turn: windows the history, compresses the
 * tools, masks old tool results (when `maskKeep` is set), fits it to the
 * budget, removes orphaned tool calls/results, and renders the body in
 * `format`. With `proactiveThreshold` set, escalates through
 * `Proactive.ladder` while the window would use more than that fraction of
 * the budget, starting from `proactiveRung` (sticky per session). History
 * token totals use the given per-message counts (masked messages as
 * rewritten; a message that lost an orphaned call still counts in full: an
 * upper bound).
 */
export const run = (raw: Input): Output => {
  const given = withMemorySection(raw)
  const plan = given.cachePlan
  if (plan === undefined) return runAt(given, undefined)
  const { input, advanced } = compressionFor(given, plan)
  const previous = plan.previous
  // holding differs from advancing only when an edit is due: only then are there more candidates
  const window = previous !== undefined && advanced.shape.windowStart !== previous.windowStart
  const mask = previous !== undefined && advanced.shape.maskBoundary !== previous.maskBoundary
  const free = previous === undefined || plan.cold || plan.viewChanged === true
  const candidates: Array<Run> = []
  const add = (out: Run, advances: ReadonlyArray<CachePlanner.Edit>) => {
    if (!candidates.some((c) => sameShape(c.shape, out.shape))) candidates.push({ ...out, shape: { ...out.shape, advances } })
  }
  if (!free && (window || mask)) {
    add(runAt(input, { windowStart: previous.windowStart, maskBoundary: previous.maskBoundary }), [])
    // the mask edit alone re-writes only what follows the boundary: a candidate of its own
    if (window && mask) add(runAt(input, { windowStart: previous.windowStart, maskBoundary: undefined }), ["mask"])
  }
  add(advanced, [...(window ? ["window" as const] : []), ...(mask ? ["mask" as const] : [])])
  const { chosen, rent, cache } = CachePlanner.choose(
    plan,
    candidates.map((o) => ({ ...o.shape, output: o })),
  )
  // a proactive rung climbed this turn: made like an optional edit, or held at the session's rung
  const held = chosen.output.unescalated
  const climb = held === undefined ? undefined : CachePlanner.climb(plan, held.shape, chosen.output.shape, rent.rung ?? 0)
  const out = held === undefined || climb!.climb ? chosen.output : held
  const settled = climb === undefined || climb.climb ? cache : CachePlanner.describe(plan, held!.shape, cache.deferred)
  // the baseline is the whole history as a client would send it: tools uncompressed too
  const baseline = NoHarm.baseline(plan, advanced, out, (hold) => runAt(wholeTools(given), hold))
  const sent = baseline ?? { out, rent: { ...rent, rung: climb?.rent ?? 0 }, cache: settled }
  return {
    ...sent.out,
    shape: {
      ...sent.out.shape,
      rent: sent.rent,
      ttlSeconds: plan.ttlSeconds,
      compression: baseline === undefined ? (input.options.toolCompression ?? "none") : "none",
      ledger: CachePlanner.booked(plan, sent.out.shape),
    },
    report: { ...sent.out.report, cache: { ...sent.out.report.cache, ...sent.cache } },
  }
}

/** `input` with its tools sent whole. */
const wholeTools = (input: Input): Input => ({ ...input, options: { ...input.options, toolCompression: "none" } })

/**
 * The input to plan with, and its prompt with every edit advanced: the
 * configured tool compression, unless it is what keeps the prompt under the
 * provider's minimum cacheable prefix — then, while nothing is cached, the
 * tools go whole when that makes the prompt cacheable and costs less over the
 * turns to come (a cached token costs a tenth of an uncached one, so a
 * slightly larger prompt read from the cache beats a smaller one sent
 * uncached every turn). Tools sent whole stay whole while the cache is warm;
 * the configured compression comes back at the next moment nothing is cached.
 */
const compressionFor = (input: Input, plan: CachePlanner.Plan): { readonly input: Input; readonly advanced: Run } => {
  const configured = input.options.toolCompression
  if (configured === undefined || configured === "none" || plan.minCacheable <= 0) return { input, advanced: runAt(input, undefined) }
  const whole = wholeTools(input)
  const previous = plan.previous
  const nothingCached = previous === undefined || plan.cold || plan.viewChanged === true || previous.total < plan.minCacheable
  // while the cache is warm the previous turn's choice stands: one run (not the configured one first, then whole)
  if (!nothingCached)
    return previous.compression === "none"
      ? { input: whole, advanced: runAt(whole, undefined) }
      : { input, advanced: runAt(input, undefined) }
  // on the worst reading of the counts for the compression (an edit): the compressed prompt is
  // cached only from the provider's own minimum, the whole one from the planning margin under it
  const exact = CachePlanner.exactly(plan)
  const advanced = runAt(input, undefined)
  if (advanced.shape.total >= exact.minCacheable) return { input, advanced }
  const alt = runAt(whole, undefined)
  const better =
    alt.shape.total >= plan.minCacheable && CachePlanner.costOf(plan, alt.shape).cost < CachePlanner.costOf(exact, advanced.shape).cost
  return better ? { input: whole, advanced: alt } : { input, advanced }
}

const sameShape = (a: CachePlanner.Candidate, b: CachePlanner.Candidate): boolean =>
  a.windowStart === b.windowStart && a.maskBoundary === b.maskBoundary && a.total === b.total && a.sent.length === b.sent.length

/** The pipeline with the window's start and the mask boundary held at `hold` (the previous turn's), if given. */
/** One run of the stages; under the planner, a run that climbed a proactive rung carries the run at the session's rung beside it. */
type Run = Output & { readonly shape: CachePlanner.Candidate; readonly unescalated?: Run | undefined }

const runAt = (input: Input, hold: Hold | undefined): Run => {
  const { options } = input
  const windowed = windowStage(input, hold)
  const base: Proactive.Level = {
    toolCompression: options.toolCompression ?? "none",
    maskKeep: options.maskKeep,
    pressure: false,
    dedupe: false,
  }
  const threshold = options.proactiveThreshold
  if (threshold === undefined) {
    const only = attempt(input, windowed, base, undefined).output
    return { ...only, shape: only.shape! }
  }
  const budget = windowed.totalTokens
  const from = input.proactiveRung ?? 0
  let first: Attempt | undefined
  const outcome = Proactive.escalate(
    base,
    threshold,
    (level) => {
      const a = attempt(input, windowed, level, threshold * budget)
      first ??= a
      return { result: a.output, utilization: budget > 0 ? a.demand / budget : 0 }
    },
    from,
  )
  const finish = (result: Output, rung: number, steps: ReadonlyArray<Proactive.Step>, after: number): Run => {
    const { request, report, landmarks, maskGrid, shape } = result
    const proactive: StageReport = {
      stage: "proactive",
      tokensIn: first?.output.report.tokens.total ?? report.tokens.total,
      tokensOut: report.tokens.total,
    }
    return {
      request,
      report: {
        ...report,
        stages: [...(report.stages ?? []), proactive],
        proactive: {
          threshold,
          utilizationBefore: outcome.utilizationBefore,
          utilizationAfter: after,
          steps: [...steps],
          carried: Math.min(from, rung),
          rung,
        },
      },
      landmarks,
      maskGrid,
      proactiveRung: rung,
      shape: shape!,
    }
  }
  const climbed = finish(outcome.result, outcome.rung, outcome.steps, outcome.utilizationAfter)
  // under the planner, climbing a rung is an edit like the others: the prompt at the session's rung goes beside it
  if (input.cachePlan === undefined || outcome.steps.length === 0 || first === undefined) return climbed
  return { ...climbed, unescalated: finish(first.output, outcome.rung - outcome.steps.length, [], outcome.utilizationBefore) }
}
