/**
 * Loop-detector thresholds and the per-tenant/agent policy. Defaults (also in
 * docs/configuration.md): policy `nudge`; repeated call 3; repeated error 3; alternation
 * 3 cycles of period 2 or 3; monologue 4; context overflow 2 within 20 messages.
 * A threshold of 0 switches that pattern off.
 */
import { Loop } from "@ctxd/contracts"

/**
 * What to do when a loop is found: `nudge` appends a short message at the end
 * of the context (the cached prefix stays untouched) and reports the flag;
 * `escalate` only reports the flag; `off` does not detect at all. Default `nudge`.
 */
export const Policy = Loop.Policy
export type Policy = Loop.Policy

/** The longest alternation cycle the state tracks (see {@link Config}'s `alternation.maxPeriod`). */
export const MAX_PERIOD = Loop.MAX_PERIOD

export interface Config {
  readonly policy: Policy
  /**
   * The same call (tool name + canonical arguments) returning the same result
   * this many times in a row, with no other call and no user input between.
   * Default 3: once is work, twice can be a deliberate re-check after a
   * thought, a third identical answer is the model not taking in the result.
   */
  readonly repeatedCall: { readonly threshold: number }
  /**
   * The same call (tool name + canonical arguments) failing this many times in
   * a row, whatever the error text says (it often carries ids or timestamps).
   * Default 3: one retry of a failed call is normal (transient errors), a
   * second identical retry is not.
   */
  readonly repeatedError: { readonly threshold: number }
  /**
   * A cycle of 2 to `maxPeriod` different calls (A-B-A-B, A-B-C-A-B-C)
   * repeated `cycles` times, each call returning the same result as in the
   * previous cycle. Default 3 cycles, `maxPeriod` 3 (at most
   * {@link MAX_PERIOD}): two identical cycles can be a re-check; by the third,
   * every call in it has been answered identically twice already.
   */
  readonly alternation: { readonly cycles: number; readonly maxPeriod: number }
  /**
   * This many assistant messages in a row with no tool call and no user or
   * tool input between them (system messages do not break the run). Default 4.
   */
  readonly monologue: { readonly threshold: number }
  /**
   * This many context-overflow errors ("maximum context length",
   * "prompt is too long", `context_length_exceeded`...) within the last
   * `withinMessages` messages. Default 2 within 20: one overflow is the
   * runtime's cue to compact; a second soon after means compaction is not
   * helping and the agent is about to retry forever.
   */
  readonly contextOverflow: { readonly threshold: number; readonly withinMessages: number }
}

/** The defaults described on {@link Config}. */
export const defaults: Config = {
  policy: "nudge",
  repeatedCall: { threshold: 3 },
  repeatedError: { threshold: 3 },
  alternation: { cycles: 3, maxPeriod: 3 },
  monologue: { threshold: 4 },
  contextOverflow: { threshold: 2, withinMessages: 20 },
}

/**
 * Overrides of {@link defaults}, as they arrive on the wire (tenant/agent
 * options, `ctx.v1.loop.check` requests). Every field is optional.
 */
export const Overrides = Loop.Settings
export type Overrides = Loop.Settings

/**
 * {@link defaults} with `overrides` applied field by field. Values are used
 * as given (decode with {@link Overrides} at the boundary to validate them);
 * `alternation.maxPeriod` is clamped to 2..{@link MAX_PERIOD}.
 */
export const make = (overrides: Overrides = {}): Config => ({
  policy: overrides.policy ?? defaults.policy,
  repeatedCall: { threshold: overrides.repeatedCall?.threshold ?? defaults.repeatedCall.threshold },
  repeatedError: { threshold: overrides.repeatedError?.threshold ?? defaults.repeatedError.threshold },
  alternation: {
    cycles: overrides.alternation?.cycles ?? defaults.alternation.cycles,
    maxPeriod: Math.min(MAX_PERIOD, Math.max(2, overrides.alternation?.maxPeriod ?? defaults.alternation.maxPeriod)),
  },
  monologue: { threshold: overrides.monologue?.threshold ?? defaults.monologue.threshold },
  contextOverflow: {
    threshold: overrides.contextOverflow?.threshold ?? defaults.contextOverflow.threshold,
    withinMessages: overrides.contextOverflow?.withinMessages ?? defaults.contextOverflow.withinMessages,
  },
})
