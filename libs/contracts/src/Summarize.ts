/**
 * Summaries on the wire: the structured snapshot the summarizer asks the
 * model for, and `<root>.v1.summarize.<tenant>` (summarize a span of
 * messages given in any turn format; the tenant-less `<root>.v1.summarize`
 * takes the same request).
 */
import { Schema } from "effect"
import * as Anthropic from "./Anthropic.ts"
import * as Gemini from "./Gemini.ts"
import * as OpenAI from "./OpenAI.ts"
import * as OpenAIResponses from "./OpenAIResponses.ts"
import * as Turn from "./Turn.ts"

/**
 * How to summarize: `one_shot` free prose; `rolling` a bounded list of
 * bullets (previous summary + new span → at most N bullets); `structured` a
 * JSON {@link Snapshot} validated and rendered to text.
 */
export const Mode = Schema.Literal("one_shot", "rolling", "structured").annotations({ identifier: "SummaryMode" })
export type Mode = typeof Mode.Type

const Items = Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] })

/** A named thing the conversation is about (a file, a user, an order...). */
export const Entity = Schema.Struct({
  name: Schema.String,
  type: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String),
}).annotations({ identifier: "SnapshotEntity" })
export type Entity = typeof Entity.Type

/** `from —relation→ to` between two entities. */
export const Relation = Schema.Struct({
  from: Schema.String,
  relation: Schema.String,
  to: Schema.String,
}).annotations({ identifier: "SnapshotRelation" })
export type Relation = typeof Relation.Type

/** The task the agent works on and where it stands. */
export const TaskState = Schema.Struct({
  description: Schema.String,
  state: Schema.String,
  nextSteps: Items,
}).annotations({ identifier: "SnapshotTask" })
export type TaskState = typeof TaskState.Type

/**
 * The structured snapshot: what a fresh agent needs to carry on. Every list
 * may be empty (and may be left out of the model's JSON); `currentTask` is
 * required.
 */
export const Snapshot = Schema.Struct({
  currentTask: TaskState,
  keyFindings: Items,
  activeHypotheses: Items,
  entities: Schema.optionalWith(Schema.Array(Entity), { default: () => [] }),
  relations: Schema.optionalWith(Schema.Array(Relation), { default: () => [] }),
  userPreferences: Items,
  openQuestions: Items,
}).annotations({ identifier: "SummarySnapshot" })
export type Snapshot = typeof Snapshot.Type

/** Bullets in a rolling summary: 1 to 100. */
export const MaxBullets = Schema.Int.pipe(Schema.between(1, 100))

const common = {
  /** The session's model: the summarizer's model when none is configured, and whose window bounds nothing here. */
  model: Turn.Model,
  /** Default: the summarizer's configured mode (`CTXD_SUMMARIZER_MODE`, default `rolling`). */
  mode: Schema.optional(Mode),
  /** A previous summary to fold the new span into. */
  previousSummary: Schema.optional(Schema.String.pipe(Schema.maxLength(1_000_000))),
  /** Bullets of a rolling summary; default `CTXD_SUMMARIZER_BULLETS` (12). */
  maxBullets: Schema.optional(MaxBullets),
}

/** `<root>.v1.summarize` request: the span to summarize, in `format`. */
export const SummarizeRequest = Schema.Union(
  Schema.Struct({ format: Schema.Literal("anthropic"), messages: Schema.Array(Anthropic.Message).pipe(Schema.minItems(1)), ...common }),
  Schema.Struct({ format: Schema.Literal("openai"), messages: Schema.Array(OpenAI.Message).pipe(Schema.minItems(1)), ...common }),
  Schema.Struct({
    format: Schema.Literal("openai-responses"),
    input: Schema.Array(OpenAIResponses.Item).pipe(Schema.minItems(1)),
    ...common,
  }),
  Schema.Struct({ format: Schema.Literal("gemini"), contents: Schema.Array(Gemini.Content).pipe(Schema.minItems(1)), ...common }),
).annotations({ identifier: "SummarizeRequest", description: "ctx.v1.summarize request" })
export type SummarizeRequest = typeof SummarizeRequest.Type

/** Why the text is not what the mode asked for: the model's JSON stayed invalid after one repair, so its text was kept. */
export const Fallback = Schema.Literal("invalid_json")
export type Fallback = typeof Fallback.Type

/** `<root>.v1.summarize` success reply. */
export const SummarizeReply = Schema.Struct({
  ok: Schema.Literal(true),
  /** The summary as text (a structured snapshot rendered). */
  text: Schema.String,
  mode: Mode,
  /** 1 for a single call; n when the span was summarized in chunks, then summaries of summaries, n levels deep. */
  depth: Schema.Number,
  /** The summarizer model and the provider client that served it. */
  model: Schema.String,
  /** `google` only when a Gemini model summarized (the session's own, or `CTXD_SUMMARIZER_PROVIDER=google`). */
  provider: Schema.Literal("anthropic", "openai", "openai_compatible", "google"),
  /** Input and output tokens billed over all calls (as the provider reported them). */
  tokensIn: Schema.Number,
  tokensOut: Schema.Number,
  /** Provider calls made (chunks, combination, JSON repair). */
  calls: Schema.Number,
  /** Tool results cut to `tool_result_max_pct` of the summarizer input. */
  truncatedToolResults: Schema.Number,
  fallback: Schema.NullOr(Fallback),
  /** The validated snapshot (structured mode without fallback). */
  snapshot: Schema.NullOr(Snapshot),
}).annotations({ identifier: "SummarizeReply", description: "ctx.v1.summarize success reply" })
export type SummarizeReply = typeof SummarizeReply.Type
