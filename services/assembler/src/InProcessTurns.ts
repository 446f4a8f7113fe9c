/**
 * The worker's turn engine (`turn/Engine`: the same stages and the same
 * interpreter of their I/O) in-process, with no NATS and no database: each
 * session's state in memory, the I/O the stages ask for answered by the
 * caller's {@link Ports}. The CLI replay and the benches replay real
 * sessions through it, so what they measure is what the worker does.
 *
 * A background compaction runs at once and lands on the session's next
 * turn (in the worker it lands when a compactor finishes the job).
 */
import type { Knowledge, Normalize, Pipeline, SessionLengths } from "@ctxd/context"
import { type Conversation, Turn } from "@ctxd/contracts"
import type { Plan, View, WorkQueue } from "@ctxd/compactor"
import type { TokenCounter } from "@ctxd/token-counter"
import { Effect } from "effect"
import * as AssemblerConfig from "./AssemblerConfig.ts"
import * as SessionState from "./SessionState.ts"
import type * as Carry from "./turn/Carry.ts"
import * as Engine from "./turn/Engine.ts"
import * as Options from "./turn/Options.ts"
import * as TurnStages from "./turn/Turn.ts"
import * as WorkerPorts from "./WorkerPorts.ts"

/** A `memory` stage's retrieval, and what answers it (see `turn/Carry`). */
export type MemoryQuery = Carry.MemoryQuery
export type MemoryAnswer = Carry.MemoryAnswer

/** What the stages' I/O is answered with. */
export interface Ports {
  /** The token family stored counts are kept in (as `Gather.familyOf`; default the counter's encoding). */
  readonly local: Carry.LocalCounter
  /** Counts a turn (the worker asks its token counter). */
  readonly count: (input: TokenCounter.CountTurnInput) => TokenCounter.TurnCount
  /** When to compact; absent: compaction off. */
  readonly thresholds?: Plan.Thresholds | undefined
  /** Folds the head of `history` (after the `live` summary) into a new summary; absent: compaction off. */
  readonly compact?:
    | ((
        job: WorkQueue.Job,
        history: ReadonlyArray<Pipeline.StoredMessage>,
        live: View.Summary | undefined,
      ) => Promise<View.Summary | undefined>)
    | undefined
  /** The agent's knowledge documents (default none). */
  readonly knowledge?: ReadonlyArray<Knowledge.Doc> | undefined
  /**
   * The tenant's agent's history of session lengths, for the cache planner's
   * expected turns (absent, or undefined for a pair: its rule of thumb).
   */
  readonly lengths?: ((tenant: string, agent: string) => SessionLengths.Histogram | undefined) | undefined
  /**
   * The agent's memories and learnings for a `memory` stage's query (as the
   * worker's store answers it: hits best first); absent: the agent has none.
   */
  readonly memory?: ((tenant: string, query: Carry.MemoryQuery) => Carry.MemoryAnswer) | undefined
  /** A workspace bundle's sections (as `WorkspaceCache` reads them); absent: a request naming a workspace is rejected. */
  readonly workspace?: ((ref: Turn.WorkspaceRef) => ReadonlyArray<Conversation.SystemSection>) | undefined
}

/** A request the stages rejected (nothing was kept). */
export class Rejected extends Error {
  readonly path: string | undefined
  constructor(path: string | undefined, message: string) {
    super(message)
    this.path = path
  }
}

export interface InProcessTurns {
  /**
   * Runs one turn of `tenant`/`session`; rejects with {@link Rejected} where
   * the worker answers `BadRequest`. `normalized`: the request's content
   * given in neutral form (replays of logs), instead of its `messages`,
   * `system` and `tools`. `at`: when the turn runs, in ms (default now):
   * replays pass the logged times so the cache planner sees the real gaps.
   */
  readonly turn: (
    tenant: string,
    session: string,
    request: Turn.TurnRequest,
    normalized?: Normalize.NormalizedRequest,
    at?: number,
  ) => Promise<Turn.TurnReply>
}

/** Turns in memory under `config` (over `AssemblerConfig.defaults`), I/O answered by `ports`. */
export const make = (ports: Ports, config: Partial<AssemblerConfig.Config> = {}): InProcessTurns => {
  const resolved = AssemblerConfig.make(config)
  const sessions = new Map<string, SessionState.SessionState>()
  /** Summaries made by background compactions, read by the session's next turn. */
  const landed = new Map<string, View.Summary>()
  const keyOf = (tenant: string, session: string) => `${tenant}\u0000${session}`

  /** Compacts the stored history (as the worker's compactor reads it from the store); the summary lands for the next turn. */
  const compact = async (job: WorkQueue.Job, state: SessionState.SessionState, key: string): Promise<View.Summary | undefined> => {
    const summary = ports.compact === undefined ? undefined : await ports.compact(job, state.messages, state.summary)
    if (summary !== undefined) landed.set(key, summary)
    return summary
  }

  const enginePorts: Engine.Ports = {
    count: (input) => Effect.sync(() => ports.count(input)),
    judge: () => Effect.succeed({ answered: false, progress: null, reason: "no judge in-process", model: "", tokensIn: 0, tokensOut: 0 }),
    compactNow: (job, _decision, { tenant, session, state }) =>
      Effect.promise(async () => {
        const summary = await compact(job, state, keyOf(tenant, session))
        SessionState.advance(state, { _tag: "SummaryRead", latest: summary })
      }),
    memory: (calls) => Effect.succeed(new Map(calls.map((c) => [c.callId, WorkerPorts.NO_MEMORY]))),
    retrieve: (query, { tenant }) => Effect.sync(() => ports.memory?.(tenant, query) ?? { hits: [], learnings: [] }),
  }

  const turn: InProcessTurns["turn"] = async (tenant, session, request, normalized, at) => {
    const key = keyOf(tenant, session)
    const state = sessions.get(key) ?? SessionState.empty(ports.local.encoding)
    if (SessionState.needsSummary(state)) SessionState.advance(state, { _tag: "SummaryRead", latest: landed.get(key) })
    const options = Options.resolve(resolved, tenant, request.options)
    const carry = TurnStages.begin({
      config: resolved,
      options,
      tenant,
      session,
      request,
      normalized,
      state,
      knowledge: ports.knowledge ?? [],
      local: ports.local,
      thresholds: ports.compact === undefined ? undefined : ports.thresholds,
      now: at ?? Date.now(),
      lengths: ports.lengths?.(tenant, options.agent),
      memoryAny: ports.memory === undefined ? undefined : true,
      workspace: ports.workspace !== undefined && Turn.isWorkspaceRef(request.system) ? ports.workspace(request.system) : undefined,
    })
    const outcome = await Effect.runPromise(Engine.run(carry, enginePorts))
    if (outcome._tag === "Rejected") throw new Rejected(outcome.path, outcome.message)
    SessionState.advance(state, TurnStages.committed(outcome.carry))
    sessions.set(key, state)
    const job = outcome.carry.compaction?.schedule
    if (job !== undefined) await compact(job, state, key)
    return outcome.reply
  }

  return { turn }
}

/**
 * Counting with a local counter for {@link Ports.count}: system, tools and
 * each message in `local`'s encoding, scaled by `factor` (a calibration).
 */
export const countLocally =
  (local: Carry.LocalCounter & { readonly countSystem: (system: TokenCounter.CountTurnInput["system"]) => number }, factor = 1) =>
  (input: TokenCounter.CountTurnInput): TokenCounter.TurnCount => {
    const scale = (n: number) => (factor === 1 ? n : Math.ceil(n * factor))
    return {
      systemTokens: scale(local.countSystem(input.system)),
      toolsTokens: scale(local.countTools(input.tools)),
      messageTokens: input.messages.map((m) => scale(local.countMessage(m))),
      backend: "tiktoken",
      encoding: local.encoding,
      exact: false,
      calibration: factor,
    }
  }
