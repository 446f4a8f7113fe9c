/**
 * The loop detector's verdict over a folded {@link LoopState.State}, and the
 * one-shot {@link check} behind `ctx.v1.loop.check`. A verdict describes the
 * tail of the session: a loop the agent has already broken out of is no
 * longer reported. Evaluating it costs O(1) in the history length (it reads
 * at most {@link LoopState.EVENT_CAP} recent calls).
 */
import { type Conversation, Loop } from "@ctxd/contracts"
import * as LoopConfig from "./LoopConfig.ts"
import * as LoopState from "./LoopState.ts"

export const Pattern = Loop.Pattern
export type Pattern = Loop.Pattern
export const Finding = Loop.Finding
export type Finding = Loop.Finding
export const Verdict = Loop.Verdict
export type Verdict = Loop.Verdict

/** No loop. */
export const none: Verdict = { looping: false, findings: [] }

/** Re-exported for callers that only import the detector. */
export const initial = LoopState.initial
/** Re-exported for callers that only import the detector; see {@link LoopState.observe}. */
export const observe = LoopState.observe

/**
 * The loops active at the end of what `state` has folded, judged against
 * `config` (default {@link LoopConfig.defaults}). Policy `off` always gives
 * {@link none}.
 */
export const verdict = (state: LoopState.State, config: LoopConfig.Config = LoopConfig.defaults): Verdict => {
  if (config.policy === "off") return none
  const findings: Array<Finding> = []
  const events = state.events
  const last = events[events.length - 1]
  if (last !== undefined) {
    if (!last.failed) {
      const repeats = state.runs[0]! + 1
      if (fires(repeats, config.repeatedCall.threshold)) {
        findings.push({
          pattern: "repeated_call",
          repeats,
          evidence: callEvidence(events, repeats),
          detail: `${last.preview} returned the same result ${repeats} times in a row`,
        })
      }
    } else if (fires(state.errorRun, config.repeatedError.threshold)) {
      findings.push({
        pattern: "repeated_error",
        repeats: state.errorRun,
        evidence: callEvidence(events, state.errorRun),
        detail: `${last.preview} failed ${state.errorRun} times in a row`,
      })
    }
    const cycle = alternation(state, config)
    if (cycle !== undefined) findings.push(cycle)
  }
  if (fires(state.monologue, config.monologue.threshold)) {
    findings.push({
      pattern: "monologue",
      repeats: state.monologue,
      evidence: state.monologueIndices,
      detail: `${state.monologue} assistant messages in a row without a tool call or any new input`,
    })
  }
  const { threshold, withinMessages } = config.contextOverflow
  const recent = state.overflows.filter((i) => i >= state.next - withinMessages)
  if (fires(recent.length, threshold)) {
    findings.push({
      pattern: "context_overflow",
      repeats: recent.length,
      evidence: recent,
      detail: `${recent.length} context-overflow errors in the last ${withinMessages} messages`,
    })
  }
  return findings.length === 0 ? none : { looping: true, findings }
}

/** Folds the whole history at once and judges it: `verdict(observe(initial(), messages, 0), config)`. */
export const check = (messages: ReadonlyArray<Conversation.Message>, config: LoopConfig.Config = LoopConfig.defaults): Verdict =>
  verdict(LoopState.observe(LoopState.initial(), messages, 0), config)

const fires = (repeats: number, threshold: number): boolean => threshold > 0 && repeats >= threshold

/** The smallest cycle length p (2..maxPeriod) whose repetition reaches the threshold. */
const alternation = (state: LoopState.State, config: LoopConfig.Config): Finding | undefined => {
  const events = state.events
  const maxPeriod = Math.min(config.alternation.maxPeriod, LoopConfig.MAX_PERIOD)
  for (let p = 2; p <= maxPeriod; p++) {
    const run = state.runs[p - 1]!
    if (run === 0 || !isPrimitiveCycle(events, p)) continue
    const cycles = Math.floor((run + p) / p)
    if (!fires(cycles, config.alternation.cycles)) continue
    const span = Math.min(run + p, events.length)
    const first = events.length - span
    const steps = events.slice(first, first + p).map((e) => e.preview)
    return {
      pattern: "alternation",
      repeats: cycles,
      evidence: callEvidence(events, span),
      detail: `the cycle ${steps.join(" → ")} repeated ${cycles} times with the same results`,
    }
  }
  return undefined
}

/** True when the last p keys are not themselves a repetition of a shorter cycle (A-A is not a 2-cycle). */
const isPrimitiveCycle = (events: ReadonlyArray<LoopState.CallEvent>, p: number): boolean => {
  if (events.length < p) return false
  const start = events.length - p
  for (let d = 1; d < p; d++) {
    if (p % d !== 0) continue
    let periodic = true
    for (let i = start + d; i < events.length && periodic; i++) periodic = events[i]!.key === events[i - d]!.key
    if (periodic) return false
  }
  return true
}

/** Call and result indices of the last `count` events (as many as the state still holds), ascending, distinct. */
const callEvidence = (events: ReadonlyArray<LoopState.CallEvent>, count: number): ReadonlyArray<number> => {
  const indices = new Set<number>()
  for (const e of events.slice(Math.max(0, events.length - count))) {
    indices.add(e.callIndex)
    indices.add(e.resultIndex)
  }
  return [...indices].sort((a, b) => a - b)
}
