/**
 * The worker's turn shell in-process, with no NATS and no database: the
 * real `Assembler` (decode → session actor → `Commit.retrying(TurnAttempt)`:
 * gather → turn engine → commit → advance state → schedule compaction) over
 * in-memory ports — the session store, knowledge and memory stores and
 * workspace bundles in memory, a process that owns every shard, the
 * caller's local counting, no loop judge, and the caller's compaction run
 * at once. The CLI replay and the benches replay real sessions through it,
 * so a replayed session goes through the lines a served one does.
 *
 * A background compaction runs at once and lands on the session's next
 * turn (in the worker it lands when a compactor finishes the job).
 */
import type { Normalize, SessionLengths } from "@ctxd/context"
import { Errors, type Turn } from "@ctxd/contracts"
import type { Plan } from "@ctxd/compactor"
import { KnowledgeStore, MemoryStore, SessionStore } from "@ctxd/db"
import { Judge } from "@ctxd/loop-detector"
import { ShardLeases } from "@ctxd/sharding"
import type { TokenCounter } from "@ctxd/token-counter"
import { Clock, type Duration, Effect, Layer, ManagedRuntime } from "effect"
import { Assembler } from "./Assembler.ts"
import * as AssemblerConfig from "./AssemblerConfig.ts"
import * as CompactionPort from "./CompactionPort.ts"
import * as Decode from "./Decode.ts"
import * as LengthHistory from "./LengthHistory.ts"
import * as LocalTokens from "./internal/localTokens.ts"
import type * as Carry from "./turn/Carry.ts"
import * as WorkspaceCache from "./WorkspaceCache.ts"

/** What the turns run over: the caller's counting, compaction and data, each as the worker's port reads it. */
export interface Ports {
  /** The local counter the stages count with; its `encoding` names the token family stored counts are kept in. */
  readonly local: Carry.LocalCounter
  /** Counts a turn (the worker asks its token counter). */
  readonly count: (input: TokenCounter.CountTurnInput) => TokenCounter.TurnCount
  /** When to compact; absent: compaction off. */
  readonly thresholds?: Plan.Thresholds | undefined
  /** Folds the head of a session's stored history (after its live summary) into a new summary; absent: compaction off. */
  readonly compact?: CompactionPort.Compact | undefined
  /** The agents' knowledge documents (default none): read as the worker reads its knowledge store. */
  readonly knowledge?: KnowledgeStore.KnowledgeStore | undefined
  /**
   * The tenant's agent's history of session lengths, for the cache planner's
   * expected turns (absent, or undefined for a pair: its rule of thumb).
   */
  readonly lengths?: ((tenant: string, agent: string) => SessionLengths.Histogram | undefined) | undefined
  /** The agents' memories and learnings, searched as the worker searches its store; absent: no memory store. */
  readonly memory?: MemoryStore.MemoryStoreService | undefined
  /** Workspace bundles' files by scope (as `WorkspaceCache.layerMemory` takes them); absent: none (a request naming one is rejected). */
  readonly workspaces?: Readonly<Record<string, Readonly<Record<string, string>>>> | undefined
}

/** A request the worker answers with `BadRequest` (nothing was kept). */
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
   * the worker answers `BadRequest` (another error: an `Error` with its
   * message). `normalized`: the request's content given in neutral form
   * (replays of logs), instead of its `messages`, `system` and `tools`;
   * without it the request goes through the worker's decode as its JSON.
   * `at`: when the turn runs, in ms (default now): replays pass the logged
   * times so the cache planner sees the real gaps.
   */
  readonly turn: (
    tenant: string,
    session: string,
    request: Turn.TurnRequest,
    normalized?: Normalize.NormalizedRequest,
    at?: number,
  ) => Promise<Turn.TurnReply>
  /** Releases the in-memory sessions and the runtime's fibers; a turn after it fails. */
  readonly dispose: () => Promise<void>
}

/** What a loop judge answers where there is none. */
const NO_JUDGE: Judge.Answer = { answered: false, progress: null, reason: "no judge in-process", model: "", tokensIn: 0, tokensOut: 0 }

/**
 * The `Assembler` over in-memory ports: what {@link make} runs turns on,
 * for callers that want the service itself (tests comparing it with a
 * served turn). `config` over `AssemblerConfig.defaults`.
 */
export const layer = (ports: Ports, config: Partial<AssemblerConfig.Config> = {}): Layer.Layer<Assembler> => {
  const sessions = SessionStore.layerMemory()
  const compaction =
    ports.compact === undefined || ports.thresholds === undefined
      ? CompactionPort.layerDisabled
      : CompactionPort.layerInProcess({ thresholds: ports.thresholds, compact: ports.compact })
  const lengths = ports.lengths
  const services = Layer.mergeAll(
    AssemblerConfig.layer(config),
    ShardLeases.layerMemory(),
    Layer.succeed(KnowledgeStore.KnowledgeStore, ports.knowledge ?? KnowledgeStore.makeMemory()),
    lengths === undefined
      ? LengthHistory.layerNone
      : Layer.succeed(LengthHistory.LengthHistory, { get: (tenant, agent) => Effect.sync(() => lengths(tenant, agent)) }),
    LocalTokens.layer(ports.local, ports.count),
    WorkspaceCache.layerMemory(ports.workspaces ?? {}),
    Layer.succeed(Judge.Judge, { ask: () => Effect.succeed(NO_JUDGE) }),
    ports.memory === undefined ? Layer.empty : Layer.succeed(MemoryStore.MemoryStore, ports.memory),
    compaction,
  ).pipe(Layer.provideMerge(sessions))
  return Assembler.Default.pipe(Layer.provide(services))
}

/** A clock standing still at `at` (ms): a replayed turn runs at its logged time. */
const fixedClock = (at: number): Clock.Clock => {
  const clock = Clock.make()
  const nanos = BigInt(Math.round(at)) * 1_000_000n
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => at,
    currentTimeMillis: Effect.succeed(at),
    unsafeCurrentTimeNanos: () => nanos,
    currentTimeNanos: Effect.succeed(nanos),
    sleep: (duration: Duration.Duration) => clock.sleep(duration),
  }
}

const utf8 = new TextEncoder()

/** Turns in memory under `config` (over `AssemblerConfig.defaults`), over `ports`. */
export const make = (ports: Ports, config: Partial<AssemblerConfig.Config> = {}): InProcessTurns => {
  const runtime = ManagedRuntime.make(layer(ports, config))
  const turn: InProcessTurns["turn"] = async (tenant, session, request, normalized, at) => {
    const answered = Effect.flatMap(Assembler, (assembler) =>
      normalized === undefined
        ? assembler.turn(tenant, session, utf8.encode(JSON.stringify(request)))
        : assembler.turnDecoded(tenant, session, Decode.given(request, normalized)),
    )
    const exit = await runtime.runPromiseExit(at === undefined ? answered : Effect.withClock(answered, fixedClock(at)))
    if (exit._tag === "Success") return exit.value.reply
    const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
    if (failure instanceof Errors.BadRequest) throw new Rejected(failure.path, failure.message)
    throw new Error(failure === undefined ? "in-process turn failed" : failure.message, { cause: exit.cause })
  }
  return { turn, dispose: () => runtime.dispose() }
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
