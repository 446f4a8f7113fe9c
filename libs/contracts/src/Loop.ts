/**
 * Loop detection on the wire: the verdict in every turn report, the
 * per-request/tenant settings, and `<root>.v1.loop.check`.
 */
import { Schema } from "effect"
import * as Anthropic from "./Anthropic.ts"
import * as Gemini from "./Gemini.ts"
import * as OpenAI from "./OpenAI.ts"
import * as OpenAIResponses from "./OpenAIResponses.ts"

export const Pattern = Schema.Literal("repeated_call", "repeated_error", "alternation", "monologue", "context_overflow")
export type Pattern = typeof Pattern.Type

/** One detected loop. */
export const Finding = Schema.Struct({
  pattern: Pattern,
  /** How many times it repeated: calls, failures, full cycles, messages or overflow errors. */
  repeats: Schema.Number,
  /** The message indices involved (calls and their results), ascending; at most the last 64. */
  evidence: Schema.Array(Schema.Number),
  /** One line naming what repeats, e.g. `get_user_details({"user_id":"u1"}) returned the same result 3 times in a row`. */
  detail: Schema.String,
}).annotations({ identifier: "LoopFinding" })
export type Finding = typeof Finding.Type

/** The detector's answer. Findings come in {@link Pattern} order. */
export const Verdict = Schema.Struct({
  looping: Schema.Boolean,
  findings: Schema.Array(Finding),
}).annotations({ identifier: "LoopVerdict" })
export type Verdict = typeof Verdict.Type

/**
 * What to do when a loop is found: `nudge` appends a short message at the end
 * of the context (the cached prefix stays untouched) and reports the flag;
 * `escalate` only reports the flag; `off` does not detect at all. Default `nudge`.
 */
export const Policy = Schema.Literal("nudge", "escalate", "off")
export type Policy = typeof Policy.Type

/** The longest alternation cycle tracked. */
export const MAX_PERIOD = 4

/** A threshold: 0 switches the pattern off, otherwise at least 2 (a single occurrence is not a loop). */
const Threshold = Schema.Int.pipe(
  Schema.between(0, 10_000),
  Schema.filter((n) => n !== 1 || "a threshold is 0 (off) or at least 2"),
)

/** Loop-detector settings; every field optional (defaults: docs/concepts.md, "Loop detection"). */
export const Settings = Schema.Struct({
  /** What to do when a loop is found: `nudge`, `escalate` (flag only) or `off` (no detection). */
  policy: Schema.optional(Policy),
  repeatedCall: Schema.optional(
    Schema.Struct({
      /** The same call (tool and arguments) returning the same result this many times in a row, nothing else between (0: off). */
      threshold: Schema.optional(Threshold),
    }),
  ),
  repeatedError: Schema.optional(
    Schema.Struct({
      /** The same call failing this many times in a row, whatever the error text (0: off). */
      threshold: Schema.optional(Threshold),
    }),
  ),
  alternation: Schema.optional(
    Schema.Struct({
      /** A cycle of different calls (A-B-A-B) repeated this many times, each call answered as in the previous cycle (0: off). */
      cycles: Schema.optional(Threshold),
      /** The longest cycle looked for, in calls. */
      maxPeriod: Schema.optional(Schema.Int.pipe(Schema.between(2, MAX_PERIOD))),
    }),
  ),
  monologue: Schema.optional(
    Schema.Struct({
      /** Assistant messages in a row with no tool call and no user or tool input between (0: off). */
      threshold: Schema.optional(Threshold),
    }),
  ),
  contextOverflow: Schema.optional(
    Schema.Struct({
      /** Context-overflow errors ("prompt is too long", ...) within the last `withinMessages` messages (0: off). */
      threshold: Schema.optional(Threshold),
      /** The window of messages `threshold` counts overflow errors in. */
      withinMessages: Schema.optional(Schema.Int.pipe(Schema.between(1, 100_000))),
    }),
  ),
  /**
   * Optional LLM judge (off by default): when a pattern is one repeat short
   * of its threshold, ask a model whether the agent is making progress; "no"
   * flags the loop now. `model` default: the session's own.
   */
  judge: Schema.optional(
    Schema.Struct({
      /** true: ask the judge on a borderline pattern. */
      enabled: Schema.Boolean,
      /** The judge's model. */
      model: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
    }),
  ),
}).annotations({ identifier: "LoopSettings" })
export type Settings = typeof Settings.Type

/** The loop part of a turn report. */
export const Report = Schema.Struct({
  policy: Policy,
  verdict: Verdict,
  /** True when a nudge was appended at the end of this turn's context. */
  nudged: Schema.Boolean,
  /** True when the runtime should act (a loop under policy `escalate` or `nudge`). */
  escalate: Schema.Boolean,
  /** The LLM judge's answer, when it was asked (borderline pattern, judge enabled). */
  judge: Schema.optional(
    Schema.Struct({
      /** False when the call failed or timed out (then nothing is flagged). */
      answered: Schema.Boolean,
      progress: Schema.NullOr(Schema.Boolean),
      reason: Schema.String,
      model: Schema.String,
      tokensIn: Schema.Number,
      tokensOut: Schema.Number,
    }),
  ),
}).annotations({ identifier: "LoopReport" })
export type Report = typeof Report.Type

export const CheckRequest = Schema.Union(
  Schema.Struct({ format: Schema.Literal("anthropic"), messages: Schema.Array(Anthropic.Message), config: Schema.optional(Settings) }),
  Schema.Struct({ format: Schema.Literal("openai"), messages: Schema.Array(OpenAI.Message), config: Schema.optional(Settings) }),
  Schema.Struct({
    format: Schema.Literal("openai-responses"),
    input: Schema.Array(OpenAIResponses.Item),
    config: Schema.optional(Settings),
  }),
  Schema.Struct({ format: Schema.Literal("gemini"), contents: Schema.Array(Gemini.Content), config: Schema.optional(Settings) }),
).annotations({ identifier: "LoopCheckRequest", description: "ctx.v1.loop.check request" })
export type CheckRequest = typeof CheckRequest.Type

export const CheckReply = Schema.Struct({
  ok: Schema.Literal(true),
  verdict: Verdict,
  /** The nudge ctxd would append under policy `nudge`, when looping. */
  nudge: Schema.NullOr(Schema.String),
}).annotations({ identifier: "LoopCheckReply", description: "ctx.v1.loop.check success reply" })
export type CheckReply = typeof CheckReply.Type
