/**
 * The pipeline's stages one by one (see `Pipeline`): each a pure function
 * of the pipeline's input and what the stages before it produced.
 */
import type { Conversation } from "@ctxd/contracts"
import type * as Budget from "../Budget.ts"
import type * as BoundReasoning from "../BoundReasoning.ts"
import * as Masking from "../Masking.ts"
import * as MidSystem from "../MidSystem.ts"
import type { Turn } from "@ctxd/contracts"
import type * as CacheLayout from "../CacheLayout.ts"
import type * as CachePlanner from "../CachePlanner.ts"
import type * as Models from "../Models.ts"
import type * as Proactive from "../Proactive.ts"
import * as Providers from "../providers/Providers.ts"
import * as SchemaCompression from "../SchemaCompression.ts"
import * as Units from "../Units.ts"
import * as Window from "../Window.ts"

/** One stored history message, with its token count under the request's encoding. */
export interface StoredMessage {
  readonly seq: number
  readonly message: Conversation.Message
  readonly tokens: number
}

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
  /** Tokens of results per step of the mask boundary without the cache planner (default 2,000). */
  readonly maskBatchTokens?: number | undefined
  /** Results smaller than this are never masked (default 50). */
  readonly maskMinTokens?: number | undefined
  /** Proactive compression above this utilization; absent: off. */
  readonly proactiveThreshold?: number | undefined
  /** Thinking turns whose reasoning is sent (default `Reasoning.defaults.keepTurns`, 1). */
  readonly keepThinkingTurns?: number | undefined
  /** Bound reasoning failing the prefix check: dropped by the provider only when forced (`auto`, default) or always. */
  readonly thinkingPrefixMismatch?: "auto" | "drop_block" | undefined
}

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
  /**
   * Retrieved memory for this turn (`MemoryRetrieval`), with its token count: `tail` renders it after
   * the last cache breakpoint (a note after the newest message, before the trailer), `system` as the
   * last system section (inside the cached prefix). Its tokens are the budget's memory reserve.
   */
  readonly memory?: Memory | undefined
  /** Sum of `history[].tokens`, when the caller keeps it; otherwise summed here (O(n)). */
  readonly storedTokens?: number | undefined
  /** Tool order (default `"name"`), see {@link CacheLayout.ToolOrder}. */
  readonly toolOrder?: CacheLayout.ToolOrder | undefined
  /** The model takes mid-conversation system messages (`MidSystem`); otherwise they go as user text at their place. */
  readonly midConversationSystem?: boolean | undefined
  /** Counts tool definitions (compressed ones); default: `toolsTokens` scaled by the JSON size. */
  readonly countTools?: ((tools: ReadonlyArray<Conversation.Tool>) => number) | undefined
  /** Counts a plain text (masking references); default: `ceil(length / 3)`. */
  readonly countText?: ((text: string) => number) | undefined
  /** The mask grid of a prefix of this history (from a previous call); absent: computed from the start. */
  readonly maskGrid?: Masking.Grid | undefined
  /** Proactive rungs already in effect for the session (from the previous call); default 0. */
  readonly proactiveRung?: number | undefined
  /** The cache planner's inputs; absent: every edit is made as soon as its grid says (no planner). */
  readonly cachePlan?: CachePlanner.Plan | undefined
  /** The previous call's `shape.bound` (any view); absent: the reference is the client's history (`BoundReasoning`). */
  readonly bound?: BoundReasoning.Record | undefined
  /** The model binds reasoning to its prefix; absent: its built-in row's `bindsReasoningToPrefix`. */
  readonly bindsReasoning?: boolean | undefined
  /** The previous response's id, for the provider's cache diagnostics (`Turn` `previousResponseId`). */
  readonly previousResponseId?: string | null | undefined
}

/** Retrieved memory to send (see {@link Input.memory}). */
export interface Memory {
  readonly text: string
  readonly tokens: number
  readonly placement: "tail" | "system"
}

/** A stage's effect on the prompt: its estimated tokens before and after. */
export type StageReport = Turn.StageReport

/** The outcome of the `window` stage; every later attempt shares it. */
export interface Windowed {
  readonly marks: Window.Landmarks
  readonly window: Window.Window
  readonly totalTokens: number
  readonly grid: Masking.Grid | undefined
  readonly report: StageReport
  /** The positions the planner holds (the previous turn's), if any. */
  readonly hold: Hold | undefined
}

/** Positions of the previous turn's prompt the cache planner may keep rather than advance. */
export interface Hold {
  readonly windowStart: number
  /** The mask boundary; undefined: masking was off. */
  readonly maskBoundary: number | undefined
}

/** Stage 1: the message-count window (and the mask grid, which only grows with the history). */
export const windowStage = (input: Input, hold?: Hold): Windowed => {
  const { history, options } = input
  const marks = Window.landmarks(history, input.landmarks)
  // with the cache planner deciding when the window and the mask boundary move, an edit goes
  // to the most compact position (every message, every result); the grids serve prompts built without it
  const planned = input.cachePlan !== undefined
  const window = Window.compute(history, { ...options, windowStep: planned ? 1 : options.windowStep, holdStart: hold?.windowStart }, marks)
  const masking = options.maskKeep !== undefined || options.proactiveThreshold !== undefined
  const grid = masking
    ? Masking.grid(history, planned ? 1 : (options.maskBatchTokens ?? Masking.defaults.batchTokens), input.maskGrid)
    : undefined
  const fixed = input.systemTokens + input.toolsTokens
  const stored = input.storedTokens ?? history.reduce((sum, m) => sum + m.tokens, 0)
  const windowTokens = sumOf(window, (i) => history[i]!.tokens, history.length)
  return {
    marks,
    window,
    totalTokens: options.budgetTokens ?? input.model.effectiveWindow,
    grid,
    hold,
    report: { stage: "window", tokensIn: fixed + stored, tokensOut: fixed + windowTokens },
  }
}

/** Tokens of the window's messages (pinned, anchor and latest or held request before its start included) under `tokenOf`. */
export const sumOf = (window: Window.Window, tokenOf: (i: number) => number, n: number): number => {
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

/**
 * Compressed tool lists per input list and level, with their tokens and the
 * counter that counted them: a turn runs the stages for several candidate
 * prompts over the same tools, and a session's turns send the same tool list
 * object while its selection holds (held by the input list, so they go with it).
 */
const compressed = new WeakMap<
  ReadonlyArray<Conversation.Tool>,
  Map<string, { readonly tools: ReadonlyArray<Conversation.Tool>; readonly tokens: number; readonly counter: Input["countTools"] }>
>()

/** Stage 2: tool schema compression at the level's strength. */
export const compressStage = (input: Input, level: Proactive.Level) => {
  let byLevel = compressed.get(input.tools)
  if (byLevel === undefined) {
    byLevel = new Map()
    compressed.set(input.tools, byLevel)
  }
  const key = `${level.toolCompression}\u0000${input.toolsTokens}`
  const known = byLevel.get(key)
  if (known !== undefined && known.counter === input.countTools) return { tools: known.tools, tokens: known.tokens }
  const tools = SchemaCompression.compressAll(input.tools, level.toolCompression)
  const tokens =
    tools === input.tools
      ? input.toolsTokens
      : input.countTools !== undefined
        ? input.countTools(tools)
        : Math.round((input.toolsTokens * toolsSize(tools)) / Math.max(1, toolsSize(input.tools)))
  byLevel.set(key, { tools, tokens, counter: input.countTools })
  return { tools, tokens }
}

/** Stage 3: which consumed tool results become one-line references (undefined: masking off). */
export const maskStage = (
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
    holdBoundary: w.hold?.maskBoundary,
  }
  const plan = Masking.plan(input.history, planInput)
  if (!level.pressure || target === undefined) return plan
  const excess = fixedTokens + sumOf(w.window, tokenOfUnder(input, plan), input.history.length) - target
  return excess > 0 ? Masking.plan(input.history, { ...planInput, needTokens: excess }) : plan
}

/** Tokens of history message `i` as sent under a mask plan. */
export const tokenOfUnder =
  (input: Input, plan: Masking.Plan | undefined) =>
  (i: number): number =>
    plan?.replaced.get(i)?.tokens ?? input.history[i]!.tokens

/** Stage 5: orphans removed, masks applied; the messages to render and their tokens. */
export const pruneStage = (input: Input, allocation: Budget.Allocation, plan: Masking.Plan | undefined, tokenOf: (i: number) => number) => {
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

/** Stage 6: the body in the request's format, by its provider adapter. */
export const renderStage = (
  input: Input,
  tools: ReadonlyArray<Conversation.Tool>,
  messages: ReadonlyArray<Conversation.Message>,
  stable: number | undefined,
) => {
  const memory = input.memory?.placement === "tail" && input.memory.text !== "" ? input.memory.text : undefined
  const body = {
    model: input.model,
    system: input.system,
    tools,
    messages: input.midConversationSystem === true ? messages : MidSystem.asUser(messages),
    memory,
    trailer: input.trailer?.text,
    toolOrder: input.toolOrder,
    stable,
  }
  return Providers.of(input.format).render({
    ...body,
    tenant: input.tenant,
    session: input.session,
    cachePlan: input.cachePlan,
    previousResponseId: input.previousResponseId,
  })
}

/** Estimated tokens of reasoning parts, once per part object (the stored history's parts live across turns). */
