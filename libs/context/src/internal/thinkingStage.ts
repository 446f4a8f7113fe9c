/**
 * Stage 6 of the pipeline (see `Pipeline`): the reasoning sent and left out,
 * on its own since reasoning bound to its prefix (`Bound`) joined it.
 */
import type { Conversation, Turn } from "@ctxd/contracts"
import * as CachePlanner from "../CachePlanner.ts"
import * as Reasoning from "../Reasoning.ts"
import type * as Units from "../Units.ts"
import * as Bound from "./bound.ts"
import type { Input } from "./stages.ts"

const reasoningTokens = new WeakMap<object, number>()
const tokensOfPart = (input: Input, part: Conversation.Part): number => {
  let n = reasoningTokens.get(part)
  if (n === undefined) {
    const json = JSON.stringify(part.type === "opaque" ? part.block : part)
    n = input.countText !== undefined ? input.countText(json) : Math.ceil(json.length / 3)
    reasoningTokens.set(part, n)
  }
  return n
}

/** The outcome of {@link thinkingStage}. */
export interface Thought {
  /** The messages to render (those before the frontier without their reasoning). */
  readonly messages: ReadonlyArray<Conversation.Message>
  /** Tokens left out per history index. */
  readonly saved: ReadonlyMap<number, number>
  readonly tokensSaved: number
  /** The frontier and the rent carried to the next turn (absent: no reasoning in the view). */
  readonly state: { readonly from: number; readonly rent: number } | undefined
  readonly report: Turn.ReasoningReport | undefined
  /** On a model that binds reasoning: the record of this prompt, the tokens it invalidates, whether the body must drop failing blocks. */
  readonly bound?: Bound.Thought | undefined
}

/**
 * Stage 6: reasoning of thinking turns older than the last
 * `keepThinkingTurns` left out (`Reasoning.frontier`), in the messages the
 * prune stage kept (`pruned`, their rendered form `messages`), and reasoning
 * whose output the prune stage removed (`Reasoning.withoutOrphanedReasoning`).
 *
 * Leaving a turn's reasoning out rewrites the cached prompt from its first
 * block on, once: the frontier only moves forward. Under the cache planner
 * a due drop is an optional edit like the others: while the cache is warm it
 * is held (the reasoning is sent, read from the cache) until the rent paid
 * for holding it — the cache reads of its tokens, turn after turn — reaches
 * the premium of making it (the cache writes of what follows it, read so
 * far), the rule of `CachePlanner.pays`; it is made at once when the prompt
 * is rewritten from its start anyway (cold cache, a new view, the window's
 * start moving, a previous prompt too short to be cached). The default keeps the last turn only, so the premium is
 * the rest of the previous turn: a drop usually pays in a few turns.
 */
export const thinkingStage = (
  input: Input,
  windowStart: number,
  pruned: ReadonlyArray<Units.ViewMessage>,
  messages: ReadonlyArray<Conversation.Message>,
  tokenOf: (i: number) => number,
  tools: ReadonlyArray<Conversation.Tool>,
): Thought => {
  const binding = Bound.binds(input)
  if (!pruned.some((v) => Reasoning.hasReasoning(v.message))) {
    const bound = binding ? Bound.unbound(input, pruned, messages, tools) : undefined
    return { messages, saved: new Map(), tokensSaved: 0, state: undefined, report: bound?.report, bound }
  }
  // reasoning whose output the prune stage removed (an orphaned call) goes with it
  const out = [...messages]
  const view = pruned.map((v, k) => {
    const message = Reasoning.withoutOrphanedReasoning(input.history[v.index]!.message, v.message)
    if (message === v.message) return v
    out[k] = Reasoning.withoutOrphanedReasoning(input.history[v.index]!.message, out[k]!)
    return { index: v.index, message }
  })
  const keep = Math.max(1, input.options.keepThinkingTurns ?? Reasoning.defaults.keepTurns)
  // turns count as the prune stage left them (a turn whose only thought led to an orphaned call still counts: monotone)
  const due = Reasoning.frontier(pruned, keep)
  const plan = input.cachePlan
  const previous = plan?.previous
  const held = previous?.thinking
  // on a binding model the frontier follows the prefix rule, not the planner's rent
  let from = binding ? Bound.frontier(input, view, due) : due
  let rent = 0
  if (!binding && plan !== undefined && previous !== undefined && held !== undefined && held.from < due) {
    // nothing of the previous prompt to keep: the drop costs nothing extra
    const rewritten = plan.cold || plan.viewChanged === true || windowStart !== previous.windowStart || previous.total < plan.minCacheable
    const first = view.findIndex((v) => v.index >= held.from && v.index < due && Reasoning.hasReasoning(v.message))
    if (!rewritten && first !== -1) {
      let dropped = 0
      for (let k = first; k < view.length && view[k]!.index < due; k++) {
        const parts = Reasoning.reasoningParts(view[k]!.message)
        dropped += Math.min(
          tokenOf(view[k]!.index),
          parts.reduce((n, p) => n + tokensOfPart(input, p), 0),
        )
      }
      // what the previous prompt had cached after the first block that would go: written again with the drop
      const lastCached = previous.sent.at(-1)?.index ?? -1
      let after = -dropped
      for (let k = first; k < view.length && view[k]!.index <= lastCached; k++) after += tokenOf(view[k]!.index)
      const premium = (plan.write - plan.read) * Math.max(0, after)
      const paid = held.rent + plan.read * dropped
      if (!CachePlanner.pays(plan, premium, plan.read * dropped, paid)) {
        from = held.from
        rent = paid
      }
    }
  }
  const saved = new Map<number, number>()
  let tokensSaved = 0
  let dropped = 0
  let sent = 0
  let holding = 0
  view.forEach((v, k) => {
    const parts = Reasoning.reasoningParts(v.message)
    if (parts.length === 0 && !Reasoning.hasReasoning(v.message)) return
    if (v.index >= from) {
      sent += parts.length
      if (v.index < due) holding += parts.length
      return
    }
    const tokens = Math.min(
      tokenOf(v.index),
      parts.reduce((n, p) => n + tokensOfPart(input, p), 0),
    )
    out[k] = Reasoning.withoutReasoning(out[k]!)
    saved.set(v.index, tokens)
    tokensSaved += tokens
    dropped += parts.length
  })
  const report = { keepTurns: keep, sent, dropped, tokensSaved, held: holding }
  if (!binding) return { messages: out, saved, tokensSaved, state: { from, rent }, report }
  const reasoningOf = (m: Conversation.Message, i: number) =>
    Math.min(
      tokenOf(i),
      Reasoning.reasoningParts(m).reduce((n, p) => n + tokensOfPart(input, p), 0),
    )
  return { ...Bound.settle(input, view, out, tools, from, reasoningOf, saved, report), state: { from, rent } }
}
