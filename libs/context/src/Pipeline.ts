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
 * 6. `render`    — the body in the request's format, laid out by `CacheLayout`;
 * 7. `proactive` — above a threshold, stages 2–6 re-run one rung stronger at a time, `Proactive`.
 *
 * Each stage returns its own part of the report, and the report lists per
 * stage the prompt's tokens before and after it (`report.stages`).
 *
 * Cost is O(window) given the {@link Window.Landmarks} (and the
 * {@link Masking.Grid} when masking is on): pass those returned by the
 * previous call to keep it so as the history grows.
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
import type * as CacheLayout from "./CacheLayout.ts"

/** The stage names, in the order they run. */
export const STAGES = ["window", "compress", "mask", "budget", "prune", "render", "proactive"] as const
export type StageName = (typeof STAGES)[number]

/** One stored history message, with its token count under the request's encoding. */
export interface StoredMessage {
  readonly seq: number
  readonly message: Conversation.Message
  readonly tokens: number
}

/**
 * The turn options the pipeline applies by default — the one place their
 * defaults live (the worker's environment defaults and the benches read
 * them from here): `windowMessages` 40, `windowStep` 20, `freshTailMessages`
 * 16, `toolCompression` `truncate` (descriptions below the tool level go;
 * types, enums and `required` stay: the GitHub catalog's default context then
 * costs 17 % of all its tools, against 30 % with `minify`), `maskKeep` 3,
 * `maskBatchTokens` 2,000, `proactiveThreshold` 0.85. `budgetTokens` has no
 * default: the model's effective window.
 */
export const defaults = {
  windowMessages: 40,
  windowStep: 20,
  freshTailMessages: 16,
  toolCompression: "truncate",
  maskKeep: Masking.defaults.keep,
  maskBatchTokens: Masking.defaults.batchTokens,
  proactiveThreshold: Proactive.DEFAULT_THRESHOLD,
} as const satisfies Turn.Options

/** The pipeline's knobs with defaults applied (see {@link resolveOptions}). */
export interface Options {
  readonly windowMessages: number
  readonly windowStep: number
  readonly freshTailMessages: number
  /** Undefined: the model's effective window. */
  readonly budgetTokens: number | undefined
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
})

/** Which token counter produced the counts (copied into the report). */
export type CounterInfo = Turn.Report["counter"]

export interface Input {
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
  readonly options: Options
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
  /** Tool order (default `"name"`), see {@link CacheLayout.ToolOrder}. */
  readonly toolOrder?: CacheLayout.ToolOrder | undefined
  /** Counts tool definitions (compressed ones); default: `toolsTokens` scaled by the JSON size. */
  readonly countTools?: ((tools: ReadonlyArray<Conversation.Tool>) => number) | undefined
  /** Counts a plain text (masking references); default: `ceil(length / 3)`. */
  readonly countText?: ((text: string) => number) | undefined
  /** The mask grid of a prefix of this history (from a previous call); absent: computed from the start. */
  readonly maskGrid?: Masking.Grid | undefined
  /** Proactive rungs already in effect for the session (from the previous call); default 0. */
  readonly proactiveRung?: number | undefined
}

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
}

/** A stage's effect on the prompt: its estimated tokens before and after. */
export type StageReport = Turn.StageReport

/** The outcome of the `window` stage; every later attempt shares it. */
interface Windowed {
  readonly marks: Window.Landmarks
  readonly window: Window.Window
  readonly totalTokens: number
  readonly grid: Masking.Grid | undefined
  readonly report: StageReport
}

/** Stage 1: the message-count window (and the mask grid, which only grows with the history). */
const windowStage = (input: Input): Windowed => {
  const { history, options } = input
  const marks = Window.landmarks(history, input.landmarks)
  const window = Window.compute(history, options, marks)
  const masking = options.maskKeep !== undefined || options.proactiveThreshold !== undefined
  const grid = masking
    ? Masking.grid(history, options.maskBatchTokens ?? Masking.defaults.batchTokens, input.maskGrid)
    : undefined
  const fixed = input.systemTokens + input.toolsTokens
  const stored = input.storedTokens ?? history.reduce((sum, m) => sum + m.tokens, 0)
  const windowTokens = sumOf(window, (i) => history[i]!.tokens, history.length)
  return {
    marks,
    window,
    totalTokens: options.budgetTokens ?? input.model.effectiveWindow,
    grid,
    report: { stage: "window", tokensIn: fixed + stored, tokensOut: fixed + windowTokens },
  }
}

/** Tokens of the window's messages (pinned, anchor and latest or held request before its start included) under `tokenOf`. */
const sumOf = (window: Window.Window, tokenOf: (i: number) => number, n: number): number => {
  let sum = 0
  for (let i = window.start; i < n; i++) sum += tokenOf(i)
  for (const p of window.pinnedBefore) sum += tokenOf(p)
  const before = new Set([window.anchor, window.request, window.held].filter((i) => i !== undefined && i < window.start))
  for (const i of before) sum += tokenOf(i!)
  return sum
}

/** JSON size of tool definitions as the counter sees them. */
const toolsSize = (tools: ReadonlyArray<Conversation.Tool>): number =>
  tools.reduce((n, t) => n + JSON.stringify({ name: t.name, description: t.description, input_schema: t.inputSchema }).length, 0)

/** Stage 2: tool schema compression at the level's strength. */
const compressStage = (input: Input, level: Proactive.Level) => {
  const tools = SchemaCompression.compressAll(input.tools, level.toolCompression)
  const tokens =
    tools === input.tools
      ? input.toolsTokens
      : input.countTools !== undefined
        ? input.countTools(tools)
        : Math.round((input.toolsTokens * toolsSize(tools)) / Math.max(1, toolsSize(input.tools)))
  return { tools, tokens }
}

/** Stage 3: which consumed tool results become one-line references (undefined: masking off). */
const maskStage = (
  input: Input,
  w: Windowed,
  level: Proactive.Level,
  fixedTokens: number,
  target: number | undefined,
): Masking.Plan | undefined => {
  if (level.maskKeep === undefined || w.grid === undefined) return undefined
  const planInput: Masking.PlanInput = {
    from: w.window.start,
    options: {
      keep: level.maskKeep,
      batchTokens: w.grid.batchTokens,
      minTokens: input.options.maskMinTokens ?? Masking.defaults.minTokens,
    },
    grid: w.grid,
    countText: input.countText ?? ((text: string) => Math.ceil(text.length / 3)),
    dedupe: level.dedupe,
  }
  const plan = Masking.plan(input.history, planInput)
  if (!level.pressure || target === undefined) return plan
  const excess = fixedTokens + sumOf(w.window, tokenOfUnder(input, plan), input.history.length) - target
  return excess > 0 ? Masking.plan(input.history, { ...planInput, needTokens: excess }) : plan
}

/** Tokens of history message `i` as sent under a mask plan. */
const tokenOfUnder =
  (input: Input, plan: Masking.Plan | undefined) =>
  (i: number): number =>
    plan?.replaced.get(i)?.tokens ?? input.history[i]!.tokens

/** Stage 5: orphans removed, masks applied; the messages to render and their tokens. */
const pruneStage = (input: Input, allocation: Budget.Allocation, plan: Masking.Plan | undefined, tokenOf: (i: number) => number) => {
  const view = Units.prune(input.history, allocation.kept)
  let historyTokens = allocation.keptTokens
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
  return { view, messages, historyTokens, masking }
}

/** Stage 6: the body in the request's format. */
const renderStage = (input: Input, tools: ReadonlyArray<Conversation.Tool>, messages: ReadonlyArray<Conversation.Message>) => {
  const body = { model: input.model, system: input.system, tools, messages, trailer: input.trailer?.text, toolOrder: input.toolOrder }
  if (input.format === "anthropic") {
    const rendered = RenderAnthropic.render(body)
    return { request: rendered.body, cache: { breakpoints: rendered.breakpoints, promptCacheKey: null } }
  }
  const rendered = RenderOpenAI.render({ ...body, tenant: input.tenant, session: input.session })
  return { request: rendered.body, cache: { breakpoints: 0, promptCacheKey: rendered.promptCacheKey } }
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

  const compressed = compressStage(input, level)
  const fixed = input.systemTokens + compressed.tokens
  const plan = maskStage(input, w, level, fixed, target)
  const tokenOf = tokenOfUnder(input, plan)
  const demand = fixed + sumOf(w.window, tokenOf, n)

  const allocation = Budget.allocate(history, w.window, {
    totalTokens: w.totalTokens,
    systemTokens: input.systemTokens,
    toolsTokens: compressed.tokens,
    memoryTokens: 0,
    freshTailMessages: options.freshTailMessages,
    windowStep: options.windowStep,
    pinned: w.marks.pinned,
    tokenOf: plan === undefined ? undefined : tokenOf,
  })
  const pruned = pruneStage(input, allocation, plan, tokenOf)
  const rendered = renderStage(input, compressed.tools, pruned.messages)
  const historyTokens = pruned.historyTokens + (input.trailer?.tokens ?? 0)
  const total = fixed + historyTokens

  const windowOut = w.report.tokensOut
  const stages: Array<StageReport> = [
    w.report,
    { stage: "compress", tokensIn: windowOut, tokensOut: windowOut - fixedIn + fixed },
    { stage: "mask", tokensIn: windowOut - fixedIn + fixed, tokensOut: demand },
    { stage: "budget", tokensIn: demand, tokensOut: fixed + allocation.keptTokens },
    { stage: "prune", tokensIn: fixed + allocation.keptTokens, tokensOut: fixed + pruned.historyTokens },
    { stage: "render", tokensIn: fixed + pruned.historyTokens, tokensOut: total },
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
    },
    tokens: {
      system: input.systemTokens,
      tools: compressed.tokens,
      memory: 0,
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
    ...(plan === undefined
      ? {}
      : {
          masking: {
            ...pruned.masking,
            boundarySeq: boundary === 0 ? null : (history[boundary]?.seq ?? history.at(-1)!.seq + 1),
          },
        }),
  }
  return { output: { request: rendered.request, report, landmarks: w.marks, maskGrid: w.grid }, demand }
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
export const run = (input: Input): Output => {
  const { options } = input
  const windowed = windowStage(input)
  const base: Proactive.Level = {
    toolCompression: options.toolCompression ?? "none",
    maskKeep: options.maskKeep,
    pressure: false,
    dedupe: false,
  }
  const threshold = options.proactiveThreshold
  if (threshold === undefined) return attempt(input, windowed, base, undefined).output
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
  const { request, report, landmarks, maskGrid } = outcome.result
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
