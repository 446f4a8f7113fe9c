/**
 * The `thinking` stage on a model that binds reasoning to its prefix (see
 * `BoundReasoning`): where the frontier may move, and which reasoning the
 * prompt may still send against the previous prompt's record.
 */
import type { Conversation, Turn } from "@ctxd/contracts"
import * as BoundReasoning from "../BoundReasoning.ts"
import * as CostModel from "../CostModel.ts"
import * as Opaque from "../providers/Opaque.ts"
import * as Reasoning from "../Reasoning.ts"

/** What the stage reads of the pipeline's input (`stages.Input`). */
export interface Input {
  readonly format: Turn.Format
  readonly model: { readonly name: string }
  readonly system: ReadonlyArray<Conversation.SystemSection>
  readonly tools: ReadonlyArray<Conversation.Tool>
  readonly history: ReadonlyArray<{ readonly message: Conversation.Message }>
  readonly options: { readonly thinkingPrefixMismatch?: "auto" | "drop_block" | undefined; readonly keepThinkingTurns?: number | undefined }
  readonly memory?: { readonly text: string; readonly placement: "tail" | "system" } | undefined
  readonly trailer?: { readonly text: string } | undefined
  readonly bound?: BoundReasoning.Record | undefined
  readonly bindsReasoning?: boolean | undefined
}

/** True when the request's model binds reasoning to its prefix. */
export const binds = (input: Input): boolean =>
  input.bindsReasoning ?? CostModel.lookup(input.model.name).capabilities.bindsReasoningToPrefix

const isToolResults = (m: Conversation.Message): boolean => m.role !== "assistant" && m.parts.some((p) => p.type === "tool_result")

/** Where the newest assistant message is in the view (-1: none). */
const lastAssistant = (view: ReadonlyArray<BoundReasoning.Sent>): number => {
  let k = view.length - 1
  while (k >= 0 && view[k]!.message.role !== "assistant") k--
  return k
}

/**
 * The messages after the newest assistant message answer its calls: a
 * tool-use continuation, whose final assistant message must start with its
 * thinking (a user text after the results renders into the same message).
 */
const continues = (view: ReadonlyArray<BoundReasoning.Sent>): boolean =>
  view.slice(lastAssistant(view) + 1).some((v) => isToolResults(v.message))

/** The view ends in a new user message that continues no tool use: the first request of a user turn, before any block of it exists. */
const turnStart = (view: ReadonlyArray<BoundReasoning.Sent>): boolean => {
  const last = view.at(-1)?.message
  return last !== undefined && last.role === "user" && !continues(view)
}

/**
 * The frontier on a binding model: leaving older reasoning out changes the
 * prefix of every later block, so it moves only at the first request of a
 * user turn, and then past all the reasoning there is (to the new user
 * message); otherwise it stays where the previous prompt had it. `due`: where
 * keep-N-thinking-turns would put it. Without a record: `due`.
 */
export const frontier = (input: Input, view: ReadonlyArray<BoundReasoning.Sent>, due: number): number => {
  const held = input.bound?.frontier
  // a record of another view (its indices past this one's end) says nothing here
  if (held === undefined || held > (view.at(-1)?.index ?? 0)) return due
  if (due <= held || !turnStart(view)) return held
  return Math.max(due, view.at(-1)!.index)
}

/** What the stage hands on: the record, what it invalidates, whether the body drops failing blocks. */
export interface Thought {
  readonly record: BoundReasoning.Record
  readonly invalidated: number
  readonly forcedTokens: number
  readonly dropBlock: boolean
}

/** What {@link bind} left out and the record of the prompt. */
export interface Bound {
  readonly messages: Array<Conversation.Message>
  /** Tokens left out per history index (added to the stage's). */
  readonly saved: Map<number, number>
  readonly prefixChanged: number
  readonly unreadableModel: number
  /** Tokens of reasoning the previous prompt sent that this one invalidates (the planner prices them). */
  readonly invalidated: number
  /**
   * Tokens of the continuation's block kept although invalid (forced): lost,
   * and every later block of the tool-use loop with it (see `Record.invalidFrom`).
   */
  readonly forcedTokens: number
  /** The body must ask the provider to drop failing blocks (forced, or the tenant asked for it always). */
  readonly dropBlock: boolean
  /** The header the runtime sends with such a body. */
  readonly betaHeader: string
  readonly record: BoundReasoning.Record
}

/**
 * Leaves out the reasoning `messages` (the stage's output, history indices
 * in `view`, reasoning before `from` already out) may not send against the
 * previous prompt: reasoning the record shows was not sent, reasoning of a
 * model this one cannot read, and every part from the first divergence on.
 * A tool-use continuation's final assistant message must start with its
 * thinking: when only a divergence would take it, it stays and the body asks
 * the provider to drop it (`dropBlock`), as the API's docs prescribe for a
 * change that cannot be avoided.
 */
export const bind = (
  input: Input,
  view: ReadonlyArray<BoundReasoning.Sent>,
  messages: ReadonlyArray<Conversation.Message>,
  tools: ReadonlyArray<Conversation.Tool>,
  from: number,
  tokensOf: (message: Conversation.Message, index: number) => number,
): Bound => {
  const out = [...messages]
  const saved = new Map<number, number>()
  const fixed = BoundReasoning.fixedOf(input.system, tools)
  const previous = input.bound
  const reference =
    previous ??
    BoundReasoning.unedited(
      input.model.name,
      BoundReasoning.fixedOf(input.system, input.tools),
      input.history.map((h) => h.message),
    )
  const final = continues(view) ? lastAssistant(view) : -1
  const sentBefore = new Set(previous?.sent.filter(([, , r]) => r).map(([i]) => i) ?? [])
  const lastRecorded = previous?.sent.at(-1)?.[0] ?? -1
  let invalidated = 0
  const leaveOut = (k: number): number => {
    const parts = Reasoning.reasoningParts(out[k]!).length
    if (parts === 0 && !Reasoning.hasReasoning(out[k]!)) return 0
    const index = view[k]!.index
    const tokens = tokensOf(out[k]!, index)
    saved.set(index, (saved.get(index) ?? 0) + tokens)
    if (sentBefore.has(index) || index > lastRecorded) invalidated += tokens
    out[k] = Reasoning.withoutReasoning(out[k]!)
    return parts
  }
  // reasoning not sent before never comes back
  const withheld = previous === undefined ? new Set<number>() : BoundReasoning.withheld(previous)
  let prefixChanged = 0
  view.forEach((v, k) => {
    if (withheld.has(v.index)) prefixChanged += leaveOut(k)
  })
  let unreadableModel = 0
  const reads = Opaque.of(input.format).reads ?? ((r: string, p: string) => r === p)
  if (previous !== undefined && !reads(input.model.name, previous.model)) {
    // the API drops what the model cannot read without an error: the continuation's block may stay
    view.forEach((_v, k) => {
      if (k !== final) unreadableModel += leaveOut(k)
    })
  }
  const sent = (): Array<BoundReasoning.Sent> => view.map((v, k) => ({ index: v.index, message: out[k]! }))
  // a block kept although invalid (forced) poisons every later one until it is left out
  const at = Math.min(BoundReasoning.divergence(reference, fixed, sent()), previous?.invalidFrom ?? Infinity)
  let forced = false
  let forcedTokens = 0
  view.forEach((v, k) => {
    if (v.index < at || !Reasoning.hasReasoning(out[k]!)) return
    if (k === final && v.index >= from) {
      // kept for the API to drop: lost all the same, and it poisons the blocks of the requests after it
      forced = true
      forcedTokens += tokensOf(out[k]!, v.index)
    } else prefixChanged += leaveOut(k)
  })
  const tail = BoundReasoning.tailOf([input.memory?.placement === "tail" ? input.memory.text : undefined, input.trailer?.text])
  const rules = Opaque.of(input.format)
  return {
    messages: out,
    saved,
    prefixChanged,
    unreadableModel,
    invalidated,
    forcedTokens,
    dropBlock: rules.dropFailing !== undefined && (forced || input.options.thinkingPrefixMismatch === "drop_block"),
    betaHeader: rules.dropFailing?.betaHeader ?? "",
    record: { ...BoundReasoning.record(input.model.name, fixed, from, sent(), tail), ...(forced ? { invalidFrom: at } : {}) },
  }
}

/** `request` asking the provider to drop bound reasoning that fails its prefix check (the adapter's `dropFailing`). */
export const withDropBlock = (format: Turn.Format, request: Record<string, unknown>): Record<string, unknown> => {
  const control = Opaque.of(format).dropFailing
  return control === undefined ? request : { ...request, ...control.body }
}

/** The record of a prompt on a binding model with no reasoning yet: it starts at the newest message, where the next reasoning follows. */
export const unbound = (
  input: Input,
  view: ReadonlyArray<BoundReasoning.Sent>,
  messages: ReadonlyArray<Conversation.Message>,
  tools: ReadonlyArray<Conversation.Tool>,
): Thought & { readonly report: Turn.ReasoningReport | undefined } => {
  const start = Math.max(input.bound?.frontier ?? 0, view.at(-1)?.index ?? 0)
  const b = bind(input, view, messages, tools, start, () => 0)
  // a body that asks to drop failing blocks says so in the report, reasoning or not (the runtime sends the header)
  const report = b.dropBlock
    ? {
        keepTurns: 0,
        sent: 0,
        dropped: 0,
        tokensSaved: 0,
        held: 0,
        blockBinding: { prefixMismatchBehavior: "drop_block" as const, betaHeader: b.betaHeader },
      }
    : undefined
  return { record: b.record, invalidated: 0, forcedTokens: 0, dropBlock: b.dropBlock, report }
}

/**
 * The `thinking` stage's outcome on a binding model: {@link bind} over its
 * output (`out`, reasoning before `from` already left out, `saved` and
 * `report` so far), with the causes counted (`olderTurn`: the frontier's).
 */
export const settle = (
  input: Input,
  view: ReadonlyArray<BoundReasoning.Sent>,
  out: ReadonlyArray<Conversation.Message>,
  tools: ReadonlyArray<Conversation.Tool>,
  from: number,
  reasoningOf: (message: Conversation.Message, index: number) => number,
  saved: Map<number, number>,
  report: Turn.ReasoningReport,
) => {
  const b = bind(input, view, out, tools, from, reasoningOf)
  for (const [i, n] of b.saved) saved.set(i, (saved.get(i) ?? 0) + n)
  const tokensSaved = report.tokensSaved + [...b.saved.values()].reduce((n, t) => n + t, 0)
  const gone = b.prefixChanged + b.unreadableModel
  return {
    messages: b.messages,
    saved,
    tokensSaved,
    report: {
      ...report,
      sent: report.sent - gone,
      dropped: report.dropped + gone,
      tokensSaved,
      leftOut: { prefixChanged: b.prefixChanged, unreadableModel: b.unreadableModel, olderTurn: report.dropped },
      ...(b.dropBlock ? { blockBinding: { prefixMismatchBehavior: "drop_block" as const, betaHeader: b.betaHeader } } : {}),
    },
    bound: { record: b.record, invalidated: b.invalidated, forcedTokens: b.forcedTokens, dropBlock: b.dropBlock },
  }
}

/**
 * Bound reasoning a prompt invalidates (its `reasoningLost`): what it leaves
 * out that was sent, and a forced block once for every turn to come (the
 * blocks after it in the tool-use loop are invalid with it).
 */
export const lostOf = (b: Thought, expectedTurns: number | undefined): number =>
  b.invalidated + b.forcedTokens * Math.max(1, expectedTurns ?? 1)
