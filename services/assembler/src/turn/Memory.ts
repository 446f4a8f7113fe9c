/**
 * Stage `memory`: the agent's memories for this turn and its learnings for
 * the session (`MemoryRetrieval`).
 *
 * - **Retrieved memory**: the store is searched (a `Memory` need) for the
 *   latest user message and the session's task (its first request),
 *   over-fetching 3× the memories wanted; the hits are re-ranked (text rank,
 *   recency, near-duplicates out) and cut to the memory budget — `memoryTokens`
 *   or `memoryFraction` of the available budget (the budget less system and
 *   tools; by default the smaller of 2,200 and 15 %). The `prompt` stage
 *   sends it after the last cache breakpoint (`memoryPlacement: "tail"`) or as
 *   the last system section (`"system"`); its tokens are the budget's memory
 *   reserve.
 * - **Learnings**: at most 5 lessons of the agent (kind `learning`) within
 *   `learningsFraction` (0.05) of the available budget, picked at the
 *   session's first turn on this worker and kept in the session state — the
 *   system section stays the same bytes for the whole session, so its cached
 *   prefix does — until a new summary changes the view (the prompt after the
 *   system is rewritten then anyway).
 *
 * Nothing is retrieved when `memory` is `false`, nor — by default — while the
 * agent (and user) has no memory document at all: the shell's presence check
 * (`Gather`, cached 5 s per worker, as the knowledge documents) spares such sessions a search per
 * turn; `memory: true` searches every turn without the check.
 */
import { MemoryRetrieval } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import type { Learnings } from "../SessionState.ts"
import * as Carry from "./Carry.ts"

/** The text parts of a message, joined (undefined: none). */
const textOf = (message: Conversation.Message): string | undefined => {
  const text = message.parts
    .flatMap((p) => (p.type === "text" ? [p.text] : []))
    .join("\n")
    .trim()
  return text === "" ? undefined : text
}

const userText = (message: Conversation.Message | undefined): string | undefined =>
  message !== undefined && message.role === "user" ? textOf(message) : undefined

/** The latest user message with text: in the new messages, else in the stored history. */
const latestRequest = (
  fresh: ReadonlyArray<Conversation.Message>,
  stored: ReadonlyArray<{ readonly message: Conversation.Message }>,
): string | undefined => {
  for (let i = fresh.length - 1; i >= 0; i--) {
    const text = userText(fresh[i])
    if (text !== undefined) return text
  }
  for (let i = stored.length - 1; i >= 0; i--) {
    const text = userText(stored[i]!.message)
    if (text !== undefined) return text
  }
  return undefined
}

/** The session's task: its first user message with text. */
const task = (
  fresh: ReadonlyArray<Conversation.Message>,
  stored: ReadonlyArray<{ readonly message: Conversation.Message }>,
): string | undefined => {
  for (const row of stored) {
    const text = userText(row.message)
    if (text !== undefined) return text
  }
  for (const message of fresh) {
    const text = userText(message)
    if (text !== undefined) return text
  }
  return undefined
}

/** No learnings picked (the store had none fitting). */
const none = (budget: number): Learnings => ({ text: "", injected: [], tokens: 0, budget })

export const stage: Carry.Stage = {
  name: "memory",
  run: (carry) => {
    const { options, state, normalized, model, local, now, memoryAny } = carry.inputs
    const knobs = options.memory
    const compaction = Carry.section(carry, "compaction")
    const kept = state.learnings
    const present = knobs.enabled === true || (knobs.enabled === undefined && memoryAny === true)
    if (!present) return Carry.next({ ...carry, memory: { memory: undefined, learnings: knobs.enabled === false ? undefined : kept } })

    const { count } = Carry.section(carry, "count")
    const total = options.pipeline.budgetTokens ?? model.effectiveWindow
    const available = Math.max(0, total - count.systemTokens - count.toolsTokens)
    const budget = MemoryRetrieval.budget(available, { tokens: knobs.tokens, fraction: knobs.fraction })
    const learningsBudget = Math.floor(knobs.learningsFraction * available)
    const fresh = normalized.messages.map((n) => n.message)
    const latest = latestRequest(fresh, state.messages)
    const query = MemoryRetrieval.query(latest, task(fresh, state.messages))
    // learnings: picked once per session, again only when a new summary rewrites the prompt anyway
    const viewChanged = !compaction.sameView && state.shape !== undefined
    const pickLearnings = learningsBudget > 0 && (kept === undefined || viewChanged)
    const retrieve = budget > 0 && query !== ""
    if (!retrieve && !pickLearnings)
      return Carry.next({ ...carry, memory: { memory: undefined, learnings: learningsBudget > 0 ? kept : undefined } })

    const answer = carry.answers.retrieved
    if (answer === undefined) {
      return Carry.need({
        _tag: "Retrieve",
        query: {
          agent: options.agent,
          user: options.user,
          text: retrieve ? query : undefined,
          limit: MemoryRetrieval.fetchLimit(),
          learnings: pickLearnings ? query : undefined,
        },
      })
    }
    const learnings = pickLearnings
      ? (() => {
          const s = MemoryRetrieval.learnings(answer.learnings, { now, budget: learningsBudget, countText: local.countText })
          return s.text === ""
            ? none(learningsBudget)
            : { text: s.text, injected: s.entries.map((e) => ({ id: e.id, tokens: e.tokens })), tokens: s.tokens, budget: learningsBudget }
        })()
      : kept
    if (!retrieve) return Carry.next({ ...carry, memory: { memory: undefined, learnings } })
    const selection = MemoryRetrieval.select(MemoryRetrieval.rank(answer.hits, now), {
      budget,
      count: MemoryRetrieval.defaults.count,
      countText: local.countText,
    })
    return Carry.next({
      ...carry,
      memory: {
        memory: {
          text: selection.text,
          tokens: selection.tokens,
          placement: knobs.placement,
          report: {
            injected: selection.entries.map((e) => ({ id: e.id, tokens: e.tokens })),
            tokens: selection.tokens,
            budget,
            placement: knobs.placement,
            candidates: answer.hits.length,
          },
        },
        learnings,
      },
    })
  },
}
