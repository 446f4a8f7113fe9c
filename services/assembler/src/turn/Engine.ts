/**
 * The turn engine: runs the pure stages (`Turn.STAGES`) over a carry and
 * answers the I/O they ask for (`Carry.Need`) through one record of
 * {@link Ports}, one function per kind of I/O. It is the only interpreter of
 * needs: the worker (`Assembler`) supplies `WorkerPorts` backed by
 * Postgres, NATS and the providers; in-process runs (`InProcessTurns`: the
 * CLI replay, the benches) run that same shell over in-memory layers — the
 * stages and this loop are the same lines for both.
 *
 * Observation wraps, it does not run: {@link traced} decorates the ports
 * with spans, and {@link Hooks.stage} wraps each stage's run (the span
 * `ctxd.stage.<name>` holding the I/O that stage asked for). With no stage
 * hook the stages run as plain calls, entering the runtime only for I/O.
 */
import type { MemoryTools } from "@ctxd/context"
import type { Judge } from "@ctxd/loop-detector"
import type { Plan, WorkQueue } from "@ctxd/compactor"
import { Spans } from "@ctxd/observe"
import type { TokenCounter } from "@ctxd/token-counter"
import { Effect } from "effect"
import type * as Carry from "./Carry.ts"
import * as Turn from "./Turn.ts"

/** The I/O a turn's stages may ask for; each gets the turn's inputs (tenant, session, state, options). */
export interface Ports {
  /** Counts a turn's system, tools and new messages. */
  readonly count: (input: TokenCounter.CountTurnInput, inputs: Carry.Inputs) => Effect.Effect<TokenCounter.TurnCount>
  /** Asks the loop judge at the detector's borderline. */
  readonly judge: (question: Judge.Question, inputs: Carry.Inputs) => Effect.Effect<Judge.Answer>
  /** Compacts now (a turn that cannot go without it); afterwards `inputs.state` holds the summary made, if any. */
  readonly compactNow: (job: WorkQueue.Job, decision: Plan.Decision, inputs: Carry.Inputs) => Effect.Effect<void>
  /** Runs the turn's memory tool calls in order; a failed call is that call's error result. */
  readonly memory: (calls: ReadonlyArray<MemoryTools.Call>, inputs: Carry.Inputs) => Effect.Effect<ReadonlyMap<string, MemoryTools.Result>>
  /** Retrieves the agent's memories and learnings for the `memory` stage. */
  readonly retrieve: (query: Carry.MemoryQuery, inputs: Carry.Inputs) => Effect.Effect<Carry.MemoryAnswer>
}

/** How a run is observed. */
export interface Hooks {
  /** Wraps one stage's run, the I/O it asks for included (absent: stages run as plain calls). */
  readonly stage?: (<A>(name: string, run: Effect.Effect<A>) => Effect.Effect<A>) | undefined
}

/** How a run ends: the reply built, or the request rejected. */
export type Finished = Extract<Turn.Outcome, { readonly _tag: "Done" }> | Carry.Rejected

/** Answers one need through `ports`: the answers to record in the carry. */
const answer = (need: Carry.Need, inputs: Carry.Inputs, ports: Ports): Effect.Effect<Carry.Answers> => {
  switch (need._tag) {
    case "Count":
      return Effect.map(ports.count(need.input, inputs), (count) => ({ count }))
    case "Judge":
      return Effect.map(ports.judge(need.input, inputs), (judge) => ({ judge }))
    case "CompactNow":
      return Effect.as(ports.compactNow(need.job, need.decision, inputs), { compacted: need.decision })
    case "Memory":
      return Effect.map(ports.memory(need.calls, inputs), (memory) => ({ memory }))
    case "Retrieve":
      return Effect.map(ports.retrieve(need.query, inputs), (retrieved) => ({ retrieved }))
  }
}

/** Runs the stages in `[from, until)`, answering their needs, until they pass, reject, or build the reply. */
const segment = (carry: Carry.Carry, from: number, until: number, ports: Ports): Effect.Effect<Turn.Outcome | Turn.Ran> =>
  Effect.suspend(() => {
    const outcome = Turn.run(carry, from, until)
    if (outcome._tag !== "Need") return Effect.succeed(outcome)
    const current = outcome.carry
    return Effect.flatMap(answer(outcome.need, current.inputs, ports), (answers) =>
      segment({ ...current, answers: { ...current.answers, ...answers } }, outcome.at, until, ports),
    )
  })

/** Runs a turn's stages from the first, answering their needs through `ports`, until the reply is built or the request rejected. */
export const run = (carry: Carry.Carry, ports: Ports, hooks: Hooks = {}): Effect.Effect<Finished> => {
  const { stage } = hooks
  if (stage === undefined) return Effect.map(segment(carry, 0, Turn.STAGES.length, ports), finished)
  const from = (current: Carry.Carry, at: number): Effect.Effect<Finished> =>
    Effect.flatMap(stage(Turn.STAGES[at]!.name, segment(current, at, at + 1, ports)), (outcome) =>
      outcome._tag === "Ran" ? from(outcome.carry, at + 1) : Effect.succeed(finished(outcome)),
    )
  return from(carry, 0)
}

const finished = (outcome: Turn.Outcome | Turn.Ran): Finished => {
  // a segment over every stage ends built or rejected; a need is always answered inside it
  if (outcome._tag === "Ran" || outcome._tag === "Need") throw new Error("turn engine: a run ended before the last stage")
  return outcome
}

/** The hooks that put each stage in its span `ctxd.stage.<name>`. */
export const stageSpans: Hooks = { stage: (name, run) => Spans.span(`ctxd.stage.${name}`)(run) }

/** `ports` with a span around each call (made only while a tracer records them). */
export const traced = (ports: Ports): Ports => ({
  count: (input, inputs) =>
    ports.count(input, inputs).pipe(
      Effect.tap((count) => Spans.annotate({ "ctxd.counter.backend": count.backend, "ctxd.counter.exact": count.exact })),
      Spans.span("ctxd.count_tokens"),
    ),
  judge: (question, inputs) => ports.judge(question, inputs).pipe(Spans.span("ctxd.loop_judge", { kind: "client" })),
  compactNow: (job, decision, inputs) => ports.compactNow(job, decision, inputs).pipe(Spans.span("ctxd.compact_now")),
  memory: (calls, inputs) =>
    ports.memory(calls, inputs).pipe(Spans.span("ctxd.memory_tools", { attributes: { "ctxd.memory.calls": calls.length } })),
  retrieve: (query, inputs) =>
    ports.retrieve(query, inputs).pipe(
      Effect.tap((answer) => Spans.annotate({ "ctxd.memory.hits": answer.hits.length, "ctxd.memory.learnings": answer.learnings.length })),
      Spans.span("ctxd.memory_search", { kind: "client" }),
    ),
})
