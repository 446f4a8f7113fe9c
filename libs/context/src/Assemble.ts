/**
 * The whole pipeline, pure: stored history + system + tools + knobs in,
 * provider-ready request body + report out. Window → masking → budget →
 * orphan pruning → rendering. Cost is O(window) given the
 * {@link Window.Landmarks} (and the {@link Masking.Grid} when masking is on);
 * pass those returned by the previous call to keep it so as the history grows.
 *
 * The cache-aware optimizations are off unless their options are set (see
 * {@link optimizationDefaults}): tool schema compression
 * (`toolCompression`), observation masking (`maskKeep`, `maskBatchTokens`)
 * and proactive compression (`proactiveThreshold`), which may re-assemble at
 * stronger levels (see `Proactive`).
 */
import type { Conversation, Turn } from "@ctxd/contracts"
import * as Budget from "./Budget.ts"
import * as Masking from "./Masking.ts"
import type * as Models from "./Models.ts"
import * as Proactive from "./Proactive.ts"
import * as RenderAnthropic from "./RenderAnthropic.ts"
import * as RenderOpenAI from "./RenderOpenAI.ts"
import * as SchemaCompression from "./SchemaCompression.ts"
import * as Units from "./Units.ts"
import * as Window from "./Window.ts"

/** One stored history message, with its token count under the request's encoding. */
export interface StoredMessage {
  readonly seq: number
  readonly message: Conversation.Message
  readonly tokens: number
}

/** The assembly knobs with defaults applied (see {@link resolveOptions}). */
export interface ResolvedOptions {
  readonly windowMessages: number
  readonly windowStep: number
  readonly freshTailMessages: number
  /** Undefined: the model's effective window. */
  readonly budgetTokens: number | undefined
  readonly memoryFraction: number
  /** Tool schema compression; absent: none, and the report has no `tools`. */
  readonly toolCompression?: SchemaCompression.Level | undefined
  /** Observation masking: results kept whole (K); absent: masking off. */
  readonly maskKeep?: number | undefined
  /** Tokens of results per step of the mask boundary (default 2,000). */
  readonly maskBatchTokens?: number | undefined
  /** Results smaller than this are never masked (default 50). */
  readonly maskMinTokens?: number | undefined
  /** Proactive compression above this utilization; absent: off. */
  readonly proactiveThreshold?: number | undefined
}

/** Which token counter produced the counts (copied into the report). */
export type CounterInfo = Turn.Report["counter"]

export interface AssembleInput {
  readonly tenant: string
  readonly session: string
  readonly format: Turn.Format
  readonly model: Models.ResolvedModel
  readonly system: ReadonlyArray<Conversation.SystemSection>
  readonly systemTokens: number
  /** The tools to send (uncompressed); `toolsTokens` is their count. */
  readonly tools: ReadonlyArray<Conversation.Tool>
  readonly toolsTokens: number
  /** The full stored history, oldest first, including this turn's new messages. */
  readonly history: ReadonlyArray<StoredMessage>
  readonly options: ResolvedOptions
  readonly counter: CounterInfo
  /**
   * Landmarks of a prefix of this same history (from a previous call);
   * only the messages after it are scanned. Absent: the whole history is scanned.
   */
  readonly landmarks?: Window.Landmarks | undefined
  /** A transient note appended after the view (a loop nudge), with its token count; never stored. */
  readonly trailer?: { readonly text: string; readonly tokens: number } | undefined
  /** Sum of `history[].tokens`, when the caller keeps it; otherwise summed here (O(n)). */
  readonly storedTokens?: number | undefined
  /** `"name"` (default): tools sorted by name; `"given"`: in the order of `tools` (see `Toolsets.selectTools`). */
  readonly toolOrder?: "name" | "given" | undefined
  /** Counts tool definitions (compressed ones); default: `toolsTokens` scaled by the JSON size. */
  readonly countTools?: ((tools: ReadonlyArray<Conversation.Tool>) => number) | undefined
  /** Counts a plain text (masking references); default: `ceil(length / 3)`. */
  readonly countText?: ((text: string) => number) | undefined
  /** The mask grid of a prefix of this history (from a previous call); absent: computed from the start. */
  readonly maskGrid?: Masking.Grid | undefined
  /** Copied into `report.virtualCalls` (from `Toolsets.answerVirtualCalls`). */
  readonly virtualCalls?: ReadonlyArray<Turn.VirtualCall> | undefined
  /** Copied into `report.waste` (from `Waste.report`). */
  readonly waste?: Turn.WasteReport | undefined
  /** Proactive rungs already in effect for the session (from the previous call); default 0. */
  readonly proactiveRung?: number | undefined
}

export interface Assembled {
  /** The provider request body, with `model`. */
  readonly request: Record<string, unknown>
  readonly report: Turn.Report
  /** Landmarks of the whole history: pass them to the next call. */
  readonly landmarks: Window.Landmarks
  /** The mask grid of the whole history when masking ran: pass it to the next call. */
  readonly maskGrid?: Masking.Grid | undefined
  /** Proactive rungs in effect when proactive compression ran: pass it to the next call. */
  readonly proactiveRung?: number | undefined
}

/**
 * Applies the defaults: `windowMessages` 40, `windowStep` 20,
 * `freshTailMessages` 16, `budgetTokens` undefined (the model's effective
 * window), `memoryFraction` 0.1. The optimization knobs are copied only
 * when given (absent = off); see {@link optimizationDefaults}.
 */
export const resolveOptions = (o: Turn.Options | undefined): ResolvedOptions => ({
  windowMessages: o?.windowMessages ?? 40,
  windowStep: o?.windowStep ?? 20,
  freshTailMessages: o?.freshTailMessages ?? 16,
  budgetTokens: o?.budgetTokens,
  memoryFraction: o?.memoryFraction ?? 0.1,
  ...(o?.toolCompression === undefined ? {} : { toolCompression: o.toolCompression }),
  ...(o?.maskKeep === undefined ? {} : { maskKeep: o.maskKeep }),
  ...(o?.maskBatchTokens === undefined ? {} : { maskBatchTokens: o.maskBatchTokens }),
  ...(o?.proactiveThreshold === undefined ? {} : { proactiveThreshold: o.proactiveThreshold }),
})

/**
 * The issue-6 defaults, to spread under a tenant's and a request's options
 * (`resolveOptions({...optimizationDefaults, ...tenant, ...request})`):
 * `toolCompression` `truncate` (descriptions below the tool level go; types,
 * enums and `required` stay: the GitHub catalog's default context then costs
 * 17 % of all its tools, against 30 % with `minify`), `maskKeep` 3,
 * `maskBatchTokens` 2,000, `proactiveThreshold` 0.85.
 */
export const optimizationDefaults = {
  toolCompression: "truncate",
  maskKeep: Masking.defaults.keep,
  maskBatchTokens: Masking.defaults.batchTokens,
  proactiveThreshold: Proactive.DEFAULT_THRESHOLD,
} as const satisfies Turn.Options

/** JSON size of tool definitions as the counter sees them. */
const toolsSize = (tools: ReadonlyArray<Conversation.Tool>): number =>
  tools.reduce((n, t) => n + JSON.stringify({ name: t.name, description: t.description, input_schema: t.inputSchema }).length, 0)

/** What every attempt shares. */
interface Prepared {
  readonly marks: Window.Landmarks
  readonly window: Window.Window
  readonly totalTokens: number
  readonly grid: Masking.Grid | undefined
}

interface Attempt {
  readonly assembled: Assembled
  /** Tokens the window would use before budget eviction. */
  readonly demand: number
}

const attempt = (input: AssembleInput, prep: Prepared, level: Proactive.Level, target: number | undefined): Attempt => {
  const { history, options, model } = input
  const { marks, window, totalTokens } = prep
  const memoryTokens = 0

  const tools = SchemaCompression.compressAll(input.tools, level.toolCompression)
  const toolsTokens =
    tools === input.tools
      ? input.toolsTokens
      : input.countTools !== undefined
        ? input.countTools(tools)
        : Math.round((input.toolsTokens * toolsSize(tools)) / Math.max(1, toolsSize(input.tools)))

  const countText = input.countText ?? ((text: string) => Math.ceil(text.length / 3))
  let plan: Masking.Plan | undefined
  const tokenOf = (i: number): number => plan?.replaced.get(i)?.tokens ?? history[i]!.tokens
  const demandOf = (): number => {
    let sum = input.systemTokens + toolsTokens + memoryTokens
    for (let i = window.start; i < history.length; i++) sum += tokenOf(i)
    for (const p of window.pinnedBefore) sum += tokenOf(p)
    if (window.anchor !== undefined && window.anchor < window.start) sum += tokenOf(window.anchor)
    return sum
  }
  if (level.maskKeep !== undefined && prep.grid !== undefined) {
    const planInput: Masking.PlanInput = {
      from: window.start,
      options: { keep: level.maskKeep, batchTokens: prep.grid.batchTokens, minTokens: options.maskMinTokens ?? Masking.defaults.minTokens },
      grid: prep.grid,
      countText,
      dedupe: level.dedupe,
    }
    plan = Masking.plan(history, planInput)
    if (level.pressure && target !== undefined) {
      const excess = demandOf() - target
      if (excess > 0) plan = Masking.plan(history, { ...planInput, needTokens: excess })
    }
  }
  const demand = target === undefined ? 0 : demandOf()

  const allocation = Budget.allocate(history, window, {
    totalTokens,
    systemTokens: input.systemTokens,
    toolsTokens,
    memoryTokens,
    memoryFraction: options.memoryFraction,
    freshTailMessages: options.freshTailMessages,
    windowStep: options.windowStep,
    pinned: marks.pinned,
    tokenOf: plan === undefined ? undefined : tokenOf,
  })
  const view = Units.prune(history, allocation.kept)
  let historyTokens = allocation.keptTokens + (input.trailer?.tokens ?? 0)
  for (const i of view.dropped) historyTokens -= tokenOf(i)
  const masking = { masked: 0, deduplicated: 0, tokensSaved: 0 }
  const messages = view.messages.map((v) => {
    const replacement = plan?.replaced.get(v.index)
    if (replacement === undefined) return v.message
    masking.masked += replacement.masked
    masking.deduplicated += replacement.deduplicated
    masking.tokensSaved += replacement.saved
    return Masking.apply(v.message, replacement)
  })

  const body = { model, system: input.system, tools, messages, trailer: input.trailer?.text, toolOrder: input.toolOrder }
  let request: Record<string, unknown>
  let breakpoints = 0
  let promptCacheKey: string | null = null
  if (input.format === "anthropic") {
    const rendered = RenderAnthropic.render(body)
    request = rendered.body
    breakpoints = rendered.breakpoints
  } else {
    const rendered = RenderOpenAI.render({ ...body, tenant: input.tenant, session: input.session })
    request = rendered.body
    promptCacheKey = rendered.promptCacheKey
  }

  const total = input.systemTokens + toolsTokens + memoryTokens + historyTokens
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
    },
    tokens: {
      system: input.systemTokens,
      tools: toolsTokens,
      memory: memoryTokens,
      history: historyTokens,
      fullHistory: input.storedTokens ?? history.reduce((sum, m) => sum + m.tokens, 0),
      total,
      budget: totalTokens,
    },
    utilization: model.effectiveWindow > 0 ? total / model.effectiveWindow : 0,
    messages: {
      stored: history.length,
      window: history.length - window.start,
      sent: view.messages.length,
      droppedByWindow: allocation.droppedByWindow,
      droppedByBudget: allocation.droppedByBudget,
      anchorSeq: seqAt(marks.anchor),
      firstSentSeq: seqAt(view.messages[0]?.index),
      lastSentSeq: seqAt(view.messages.at(-1)?.index),
    },
    orphans: view.orphans,
    overBudget: allocation.overBudget,
    counter: input.counter,
    cache: { breakpoints, promptCacheKey },
    ...(options.toolCompression === undefined && options.proactiveThreshold === undefined
      ? {}
      : {
          tools: {
            sent: tools.length,
            compression: level.toolCompression,
            tokens: toolsTokens,
            saved: input.toolsTokens - toolsTokens,
          },
        }),
    ...(plan === undefined
      ? {}
      : {
          masking: {
            ...masking,
            boundarySeq: boundary === 0 ? null : (history[boundary]?.seq ?? history.at(-1)!.seq + 1),
          },
        }),
    ...(input.virtualCalls === undefined ? {} : { virtualCalls: input.virtualCalls }),
    ...(input.waste === undefined ? {} : { waste: input.waste }),
  }
  return { assembled: { request, report, landmarks: marks, maskGrid: prep.grid }, demand }
}

/**
 * Assembles one turn: windows the history, masks old tool results (when
 * `maskKeep` is set), fits it to the budget, removes orphaned tool
 * calls/results, and renders the body in `format` with the tools compressed
 * at `toolCompression`. With `proactiveThreshold` set, escalates through
 * `Proactive.ladder` while the window would use more than that fraction of
 * the budget, starting from `proactiveRung` (sticky per session). History
 * token totals use the given per-message counts (masked
 * messages as rewritten; a message that lost an orphaned call still counts
 * in full: an upper bound).
 */
export const assemble = (input: AssembleInput): Assembled => {
  const { history, options, model } = input
  const marks = Window.landmarks(history, input.landmarks)
  const window = Window.compute(history, options, marks)
  const totalTokens = options.budgetTokens ?? model.effectiveWindow
  const threshold = options.proactiveThreshold
  const masking = options.maskKeep !== undefined || threshold !== undefined
  const grid = masking
    ? Masking.grid(history, options.maskBatchTokens ?? Masking.defaults.batchTokens, input.maskGrid)
    : undefined
  const prep: Prepared = { marks, window, totalTokens, grid }
  const base: Proactive.Level = {
    toolCompression: options.toolCompression ?? "none",
    maskKeep: options.maskKeep,
    pressure: false,
    dedupe: false,
  }
  if (threshold === undefined) return attempt(input, prep, base, undefined).assembled
  const target = threshold * totalTokens
  const from = input.proactiveRung ?? 0
  const outcome = Proactive.escalate(
    base,
    threshold,
    (level) => {
      const a = attempt(input, prep, level, target)
      return { result: a.assembled, utilization: totalTokens > 0 ? a.demand / totalTokens : 0 }
    },
    from,
  )
  const { request, report, landmarks, maskGrid } = outcome.result
  return {
    request,
    report: {
      ...report,
      proactive: {
        threshold,
        utilizationBefore: outcome.utilizationBefore,
        utilizationAfter: outcome.utilizationAfter,
        steps: outcome.steps,
        carried: Math.min(from, outcome.rung),
        rung: outcome.rung,
      },
    },
    landmarks,
    maskGrid,
    proactiveRung: outcome.rung,
  }
}
