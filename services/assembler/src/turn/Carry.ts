/**
 * The turn's carry: what the shell gathered ({@link Inputs}), what it
 * answered to the stages' {@link Need}s, and one section per stage, filled
 * in order (see `Turn`).
 */
import type { Conversation, Loop, Turn } from "@ctxd/contracts"
import type {
  CostModel,
  Knowledge,
  MemoryRetrieval,
  MemoryTools,
  Models,
  Normalize,
  Pipeline,
  SessionLengths,
  Toolsets,
  Waste,
} from "@ctxd/context"
import type { Plan, View, WorkQueue } from "@ctxd/compactor"
import type { Judge, LoopState } from "@ctxd/loop-detector"
import type { TokenCounter } from "@ctxd/token-counter"
import type { Learnings, Row, SessionState } from "../SessionState.ts"
import type * as Options from "./Options.ts"

/** The local counter (`@ctxd/tokens` `LocalCounter`) bound to the request's encoding (pure, cached by content). */
export interface LocalCounter {
  readonly encoding: string
  readonly countText: (text: string) => number
  readonly countTools: (tools: ReadonlyArray<Conversation.Tool>) => number
  readonly countMessage: (message: Conversation.Message) => number
}

/** What the shell gathered before the stages run; read-only for them. */
export interface Inputs {
  readonly tenant: string
  readonly session: string
  readonly request: Turn.TurnRequest
  readonly normalized: Normalize.NormalizedRequest
  readonly model: Models.ResolvedModel
  /** The model's prices, from the configured table (`AssemblerConfig.prices`). */
  readonly prices: CostModel.ModelPrices
  readonly options: Options.Resolved
  /** The session's state before this turn (stored history, loaded and summary read). */
  readonly state: SessionState
  readonly knowledge: ReadonlyArray<Knowledge.Doc>
  readonly local: LocalCounter
  /** When to compact; undefined: compaction is off. */
  readonly thresholds: Plan.Thresholds | undefined
  /** When the turn runs (ms, the shell's clock): the cache planner tells a cold cache from a warm one. */
  readonly now: number
  /** How long the tenant's agent's sessions went on (undefined: not known; the cache planner's rule of thumb). */
  readonly lengths?: SessionLengths.Histogram | undefined
  /** The workspace bundle's sections the shell read for a `system: {workspace}` request (undefined: none read). */
  readonly workspace?: ReadonlyArray<Conversation.SystemSection> | undefined
  /** Whether the turn's agent/user has any memory (undefined: not known, e.g. no memory store): offers the memory tools, retrieves memory. */
  readonly memoryAny?: boolean | undefined
}

/** A retrieval the `memory` stage asks for: hits for `text` (none: no retrieval), and the agent's learnings for `learnings`. */
export interface MemoryQuery {
  readonly agent: string
  readonly user: string | undefined
  /** What to search memories for (undefined: no memory retrieval this turn). */
  readonly text: string | undefined
  /** Hits wanted (over-fetched: `MemoryRetrieval.fetchLimit`). */
  readonly limit: number
  /** What to search learnings for (`""`: the newest); undefined: the session keeps the ones it has. */
  readonly learnings: string | undefined
}

/** What the shell retrieved for a {@link MemoryQuery}. */
export interface MemoryAnswer {
  readonly hits: ReadonlyArray<MemoryRetrieval.Candidate>
  readonly learnings: ReadonlyArray<MemoryRetrieval.Candidate>
}

/** I/O a stage asked for. */
export type Need =
  | { readonly _tag: "Count"; readonly input: TokenCounter.CountTurnInput }
  | { readonly _tag: "Judge"; readonly input: Judge.Question }
  | { readonly _tag: "CompactNow"; readonly job: WorkQueue.Job; readonly decision: Plan.Decision }
  | { readonly _tag: "Memory"; readonly calls: ReadonlyArray<MemoryTools.Call> }
  | { readonly _tag: "Retrieve"; readonly query: MemoryQuery }

/** What the shell answered so far. */
export interface Answers {
  readonly count?: TokenCounter.TurnCount | undefined
  readonly judge?: Judge.Answer | undefined
  /** A blocking compaction ran (the state holds the summary it made, if any), decided on this. */
  readonly compacted?: Plan.Decision | undefined
  /** The memory calls' results, by call id. */
  readonly memory?: ReadonlyMap<string, MemoryTools.Result> | undefined
  /** The `memory` stage's retrieval. */
  readonly retrieved?: MemoryAnswer | undefined
}

/** `tools`: what the model may call and what ctxd answered itself. */
export interface ToolsOut {
  /** The system sections to send (the request's, then the knowledge index). */
  readonly system: ReadonlyArray<Conversation.SystemSection>
  /** The tools to send (uncompressed), in cache-stable order. */
  readonly sent: ReadonlyArray<Conversation.Tool>
  /** The new messages, with virtual calls answered by ctxd. */
  readonly messages: ReadonlyArray<Conversation.Message>
  readonly virtualCalls: ReadonlyArray<Turn.VirtualCall>
  readonly toolsets: Toolsets.State
  readonly waste: Waste.State
  /** The virtual `recall` tool (see `Tools`). */
  readonly recall: RecallOffer
  /** The knowledge index sent (see `Tools`). */
  readonly knowledge: KnowledgeIndex
}

/**
 * The knowledge index in {@link ToolsOut.system} (`""`: none). When it
 * changed since the previous turn's, `ifHeld` is that turn's index and the
 * system sections with it: the `prompt` stage keeps it until the prefix is
 * re-written anyway (`since`: when the change was first held back).
 */
export interface KnowledgeIndex {
  readonly sent: string
  readonly since?: number | undefined
  readonly ifHeld?:
    { readonly text: string; readonly system: ReadonlyArray<Conversation.SystemSection>; readonly since: number } | undefined
}

/**
 * Whether `recall` is in {@link ToolsOut.sent}; when it is not yet but could
 * be, the tools and waste to switch to if the prompt masks a result (the
 * `prompt` stage does, once a session).
 */
export interface RecallOffer {
  readonly offered: boolean
  readonly ifMasked?: { readonly sent: ReadonlyArray<Conversation.Tool>; readonly waste: Waste.State } | undefined
}

/** `count`: the turn's counts and its new rows. */
export interface CountOut {
  readonly count: TokenCounter.TurnCount
  /** The new messages as rows to store, with their tokens. */
  readonly fresh: ReadonlyArray<Row>
}

/** `loop`: the verdict, the folded state to keep, and the nudge to append. */
export interface LoopOut {
  readonly report: Loop.Report
  readonly state: LoopState.State
  readonly trailer: { readonly text: string; readonly tokens: number } | undefined
}

/** `compaction`: the history view, what was decided, and a background job to schedule. */
export interface CompactionOut {
  readonly view: View.View
  readonly decision: Plan.Decision | undefined
  readonly schedule: WorkQueue.Job | undefined
  /** The view is the previous turn's, extended: landmarks and mask grid carry over. */
  readonly sameView: boolean
  /**
   * A newer summary than the previous turn's view is ready: that view,
   * extended. Swapping is an edit the prompt stage may defer (it then names
   * this view as the one sent); absent: nothing to decide.
   */
  readonly held?: View.View | undefined
}

/** `memory`: the retrieved memory to send this turn, and the session's learnings section. */
export interface MemoryOut {
  /** Retrieved memory (undefined: none this turn). */
  readonly memory: (Pipeline.Memory & { readonly report: Turn.MemoryReport }) | undefined
  /** The learnings the session keeps (picked at its first turn; `text` `""`: none). */
  readonly learnings: Learnings | undefined
}

/** The turn's value as it passes the stages: each fills its own section. */
export interface Carry {
  readonly inputs: Inputs
  readonly answers: Answers
  readonly tools?: ToolsOut
  readonly count?: CountOut
  readonly loop?: LoopOut
  readonly compaction?: CompactionOut
  readonly memory?: MemoryOut
  readonly prompt?: Pipeline.Output
  readonly reply?: Turn.TurnReply
}

/** A rejection of the request (nothing stored). `pairing`: maybe a retry of a stored turn. */
export interface Rejected {
  readonly _tag: "Rejected"
  readonly message: string
  readonly path?: string | undefined
  readonly pairing: boolean
}

/** What one stage returns. */
export type Step = { readonly _tag: "Next"; readonly carry: Carry } | { readonly _tag: "Need"; readonly need: Need } | Rejected

export const next = (carry: Carry): Step => ({ _tag: "Next", carry })
export const need = (n: Need): Step => ({ _tag: "Need", need: n })

export interface Stage {
  readonly name: string
  readonly run: (carry: Carry) => Step
}

/** Reads a section an earlier stage filled (a missing one is a bug in the stage order). */
export const section = <K extends "tools" | "count" | "loop" | "compaction" | "memory" | "prompt">(
  carry: Carry,
  key: K,
): NonNullable<Carry[K]> => {
  const value = carry[key]
  if (value === undefined) throw new Error(`turn stage order: "${key}" has not run`)
  return value as NonNullable<Carry[K]>
}
