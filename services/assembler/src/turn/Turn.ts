/**
 * One turn as an ordered list of pure, named stages over one value, the
 * turn's carry (`Carry`). The shell (`Assembler`) gathers the reads a turn
 * needs (`Gather`), runs the stages, and commits (`Commit`).
 *
 * {@link STAGES}, in order — each in the file named after it:
 *
 * 1. `validate`   — pairing against the stored history; a new session's first turn not empty (`Validate`);
 * 2. `tools`      — knowledge index, on-demand toolsets, virtual calls answered, waste (`Tools`);
 * 3. `count`      — tokens of system, tools and the new messages (`Count`);
 * 4. `loop`       — loop detection, the nudge, the optional judge (`Loop`);
 * 5. `compaction` — the view under the live summary; compact in the background or now (`Compaction`);
 * 6. `memory`     — the agent's memories retrieved for this turn, its learnings for the session (`Memory`);
 * 7. `prompt`     — the context pipeline: window → compress → mask → budget → prune → render → proactive (`Prompt`);
 * 8. `reply`      — the reply and its report (`Reply`).
 *
 * A stage that needs I/O it does not have (a provider count, the loop
 * judge, a blocking compaction, the memory store for a memory tool call or a memory search) returns a `Need`; the shell performs it,
 * records the answer, and runs the stages again from that one.
 */
import { CacheMiss, Models, Normalize } from "@ctxd/context"
import type { Turn } from "@ctxd/contracts"
import type * as AssemblerConfig from "../AssemblerConfig.ts"
import * as SessionState from "../SessionState.ts"
import type * as Carry from "./Carry.ts"
import * as Compaction from "./Compaction.ts"
import * as Count from "./Count.ts"
import * as Loop from "./Loop.ts"
import * as Memory from "./Memory.ts"
import * as Options from "./Options.ts"
import * as Prompt from "./Prompt.ts"
import * as Reply from "./Reply.ts"
import * as Tools from "./Tools.ts"
import * as Validate from "./Validate.ts"

/** The stages, in the order they run. */
export const STAGES: ReadonlyArray<Carry.Stage> = [
  Validate.stage,
  Tools.stage,
  Count.stage,
  Loop.stage,
  Compaction.stage,
  Memory.stage,
  Prompt.stage,
  Reply.stage,
]

/** The outcome of {@link run}. */
export type Outcome =
  | { readonly _tag: "Done"; readonly carry: Carry.Carry; readonly reply: Turn.TurnReply }
  | { readonly _tag: "Need"; readonly need: Carry.Need; readonly carry: Carry.Carry; readonly at: number }
  | Carry.Rejected

/** What {@link run} returns when it stopped at `until` before the last stage: the carry so far. */
export interface Ran {
  readonly _tag: "Ran"
  readonly carry: Carry.Carry
}

/**
 * Runs the stages from index `from` (0: all) up to, not including, `until`
 * (default: all of them) until one needs I/O, rejects the request, or the
 * reply is built. Pure: the engine (`Engine`) answers the needs.
 */
export const run = (carry: Carry.Carry, from = 0, until = STAGES.length): Outcome | Ran => {
  let current = carry
  for (let at = from; at < until; at++) {
    const step = STAGES[at]!.run(current)
    if (step._tag === "Rejected") return step
    if (step._tag === "Need") return { _tag: "Need", need: step.need, carry: current, at }
    current = step.carry
  }
  return until < STAGES.length ? { _tag: "Ran", carry: current } : { _tag: "Done", carry: current, reply: current.reply! }
}

/** The names of {@link STAGES}, in order. */
export const names = (): ReadonlyArray<string> => STAGES.map((s) => s.name)

/** The carry a turn starts with: the request normalized, its model resolved and priced, with the options the shell merged. */
export const begin = (input: {
  readonly config: AssemblerConfig.Config
  /** The turn's options as the shell merged them (default: `Options.resolve` of the request's). */
  readonly options?: Options.Resolved | undefined
  readonly tenant: string
  readonly session: string
  readonly request: Turn.TurnRequest
  /** The request's content in neutral form; default `Normalize.request(request)`. */
  readonly normalized?: Carry.Inputs["normalized"] | undefined
  readonly state: SessionState.SessionState
  readonly knowledge: Carry.Inputs["knowledge"]
  readonly local: Carry.LocalCounter
  readonly thresholds: Carry.Inputs["thresholds"]
  readonly now: number
  /** The tenant's agent's history of session lengths (absent: unknown). */
  readonly lengths?: Carry.Inputs["lengths"]
  /** The sections of the workspace bundle the request's `system` names, as the shell read them (absent: none read). */
  readonly workspace?: Carry.Inputs["workspace"]
  /** Whether the turn's agent/user has any memory (absent: unknown). */
  readonly memoryAny?: boolean | undefined
}): Carry.Carry => ({
  inputs: {
    tenant: input.tenant,
    session: input.session,
    request: input.request,
    normalized: input.normalized ?? Normalize.request(input.request, () => SessionState.openCalls(input.state), input.workspace),
    model: Models.resolve(input.request.model, input.config.prices.lookup(input.request.model.name)),
    prices: input.config.prices.lookup(input.request.model.name),
    options: input.options ?? Options.resolve(input.config, input.tenant, input.request.options),
    state: input.state,
    knowledge: input.knowledge,
    local: input.local,
    thresholds: input.thresholds,
    now: input.now,
    lengths: input.lengths,
    workspace: input.workspace,
    memoryAny: input.memoryAny,
  },
  answers: {},
})

/** What a committed turn changes in its session's state (see `SessionState.advance`); `recorded`: the agent whose length the commit recorded (none: it recorded none). */
export const committed = (carry: Carry.Carry, recorded?: string): SessionState.Outcome => {
  const { count, loop, tools, prompt, compaction, memory } = carry
  if (
    count === undefined ||
    loop === undefined ||
    tools === undefined ||
    prompt === undefined ||
    compaction === undefined ||
    memory === undefined
  ) {
    throw new Error("turn stage order: a turn commits only after every stage ran")
  }
  return {
    _tag: "Committed",
    rows: count.fresh,
    loop: loop.state,
    waste: tools.waste,
    toolsets: tools.toolsets,
    recall: tools.recall.offered,
    landmarks: prompt.landmarks,
    maskGrid: prompt.maskGrid,
    rung: prompt.proactiveRung,
    view: compaction.view,
    scheduled: compaction.schedule !== undefined,
    // the client's own system and tools, to tell its changes from ctxd's next turn (`report.cache.miss`)
    shape:
      prompt.shape === undefined
        ? undefined
        : { ...prompt.shape, clientKey: CacheMiss.clientKey(carry.inputs.normalized.system, carry.inputs.normalized.tools) },
    knowledgeIndex: { sent: tools.knowledge.sent, since: tools.knowledge.since },
    learnings: memory.learnings,
    at: carry.inputs.now,
    recorded,
  }
}
