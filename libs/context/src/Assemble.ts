/**
 * The whole pipeline, pure: stored history + system + tools + knobs in,
 * provider-ready request body + report out. Window → budget → orphan pruning
 * → rendering. Cost is O(window) given the {@link Window.Landmarks}; pass the
 * landmarks returned by the previous call to keep it so as the history grows.
 */
import type { Conversation, Turn } from "@ctxd/contracts"
import * as Budget from "./Budget.ts"
import type * as Models from "./Models.ts"
import * as RenderAnthropic from "./RenderAnthropic.ts"
import * as RenderOpenAI from "./RenderOpenAI.ts"
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
}

export interface Assembled {
  /** The provider request body, with `model`. */
  readonly request: Record<string, unknown>
  readonly report: Turn.Report
  /** Landmarks of the whole history: pass them to the next call. */
  readonly landmarks: Window.Landmarks
}

/**
 * Applies the defaults: `windowMessages` 40, `windowStep` 20,
 * `freshTailMessages` 16, `budgetTokens` undefined (the model's effective
 * window), `memoryFraction` 0.1.
 */
export const resolveOptions = (o: Turn.Options | undefined): ResolvedOptions => ({
  windowMessages: o?.windowMessages ?? 40,
  windowStep: o?.windowStep ?? 20,
  freshTailMessages: o?.freshTailMessages ?? 16,
  budgetTokens: o?.budgetTokens,
  memoryFraction: o?.memoryFraction ?? 0.1,
})

/**
 * Assembles one turn: windows the history, fits it to the budget, removes
 * orphaned tool calls/results, and renders the body in `format`. History
 * token totals use the given per-message counts (a message that lost an
 * orphaned call still counts in full: an upper bound).
 */
export const assemble = (input: AssembleInput): Assembled => {
  const { history, options, model } = input
  const marks = Window.landmarks(history, input.landmarks)
  const window = Window.compute(history, options, marks)
  const totalTokens = options.budgetTokens ?? model.effectiveWindow
  const memoryTokens = 0
  const allocation = Budget.allocate(history, window, {
    totalTokens,
    systemTokens: input.systemTokens,
    toolsTokens: input.toolsTokens,
    memoryTokens,
    memoryFraction: options.memoryFraction,
    freshTailMessages: options.freshTailMessages,
    windowStep: options.windowStep,
    pinned: marks.pinned,
  })
  const view = Units.prune(history, allocation.kept)
  let historyTokens = allocation.keptTokens + (input.trailer?.tokens ?? 0)
  for (const i of view.dropped) historyTokens -= history[i]!.tokens
  const messages = view.messages.map((v) => v.message)

  let request: Record<string, unknown>
  let breakpoints = 0
  let promptCacheKey: string | null = null
  if (input.format === "anthropic") {
    const rendered = RenderAnthropic.render({
      model,
      system: input.system,
      tools: input.tools,
      messages,
      trailer: input.trailer?.text,
    })
    request = rendered.body
    breakpoints = rendered.breakpoints
  } else {
    const rendered = RenderOpenAI.render({
      tenant: input.tenant,
      session: input.session,
      model,
      system: input.system,
      tools: input.tools,
      messages,
      trailer: input.trailer?.text,
    })
    request = rendered.body
    promptCacheKey = rendered.promptCacheKey
  }

  const total = input.systemTokens + input.toolsTokens + memoryTokens + historyTokens
  const seqAt = (i: number | undefined): number | null => (i === undefined ? null : history[i]!.seq)
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
      tools: input.toolsTokens,
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
  }
  return { request, report, landmarks: marks }
}
