/**
 * `<root>.v1.turn.<tenant>.<session>`: one request per model call. The
 * request carries the messages since the previous turn; the reply carries
 * the provider-ready request body and a report of what was sent.
 */
import { Schema } from "effect"
import * as Anthropic from "./Anthropic.ts"
import * as Conversation from "./Conversation.ts"
import * as Gemini from "./Gemini.ts"
import * as Loop from "./Loop.ts"
import * as OpenAI from "./OpenAI.ts"
import * as OpenAIResponses from "./OpenAIResponses.ts"
import * as Tokens from "./Tokens.ts"
import { Provider, ToolCompression } from "./Formats.ts"

export * from "./Formats.ts"
export * from "./TurnReport.ts"

export const Model = Schema.Struct({
  provider: Provider,
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  /** Context window in tokens; default from the model table (docs/providers.md). */
  contextWindow: Schema.optional(Schema.Int.pipe(Schema.between(1024, 10_000_000))),
  /** Tokens reserved for the answer; default from the model table. */
  maxOutputTokens: Schema.optional(Schema.Int.pipe(Schema.between(1, 1_000_000))),
}).annotations({ identifier: "Model" })
export type Model = typeof Model.Type

export const SystemSectionInput = Schema.Struct({
  id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  text: Schema.String,
  /** Prompt-cache lifetime; default `"5m"`. */
  cache: Schema.optional(Conversation.CacheTtl),
})
export type SystemSectionInput = typeof SystemSectionInput.Type

/** The most extra files a workspace reference may name: 16. */
export const MAX_WORKSPACE_EXTRAS = 16

/** A workspace scope: one directory under the worker's `CTXD_WORKSPACE_ROOT` (a subject token: no `/`, no `..`). */
export const WorkspaceScope = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_-]{1,128}$/, { message: () => "workspace must match [A-Za-z0-9_-]{1,128}" }),
)

/** An extra file of a workspace, by name with or without `.md` (`TOOLS` or `TOOLS.md`): a file directly in the scope's directory. */
export const WorkspaceExtra = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_-]{1,128}(\.md)?$/, {
    message: () => "a workspace extra must match [A-Za-z0-9_-]{1,128}, optionally with .md",
  }),
)

/**
 * A workspace bundle instead of the sections' text: the Markdown files of
 * `<CTXD_WORKSPACE_ROOT>/<workspace>/` (`IDENTITY.md`, `SOUL.md`, `USER.md`,
 * `AGENTS.md`, `MEMORY.md`, then the `extras` sorted by name), each one
 * section `{id: "<file name>", cache}`; missing files are skipped.
 */
export const WorkspaceRef = Schema.Struct({
  workspace: WorkspaceScope,
  /** More files of the scope's directory, beyond the five fixed ones (at most 16). */
  extras: Schema.optional(Schema.Array(WorkspaceExtra).pipe(Schema.maxItems(MAX_WORKSPACE_EXTRAS))),
  /** Prompt-cache lifetime of every section of the bundle; default `"5m"`. */
  cache: Schema.optional(Conversation.CacheTtl),
}).annotations({ identifier: "WorkspaceRef" })
export type WorkspaceRef = typeof WorkspaceRef.Type

export const System = Schema.Union(Schema.String, Schema.Array(SystemSectionInput), WorkspaceRef)
export type System = typeof System.Type

/** Whether `system` names a workspace bundle (read by the worker) rather than carrying its text. */
export const isWorkspaceRef = (system: System | undefined): system is WorkspaceRef =>
  typeof system === "object" && system !== null && !Array.isArray(system) && "workspace" in system

/**
 * `{ref: "<hash>"}` in place of a request's `system` or `tools`: the same
 * value this session sent before, named by the hash a reply's `refs` gave
 * (the SHA-256, hex, of the value's JSON text as `JSON.stringify` writes
 * it). A worker that does not hold it for the session answers `BadRequest`
 * with path `system.ref` / `tools.ref`: resend the turn in full.
 */
export const PrefixRef = Schema.Struct({
  ref: Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/, { message: () => "ref must be 64 lowercase hex digits (a reply's refs)" })),
}).annotations({ identifier: "PrefixRef" })
export type PrefixRef = typeof PrefixRef.Type

const Fraction = Schema.Number.pipe(Schema.between(0, 1))
const Count = Schema.Int.pipe(Schema.between(0, 1_000_000))

/** Per-request overrides of the assembly knobs (defaults: docs/configuration.md). */
export const Options = Schema.Struct({
  /** Keep at least this many recent messages in the window (default 40). */
  windowMessages: Schema.optional(Count.pipe(Schema.greaterThanOrEqualTo(1))),
  /** The budget's cut moves on a grid of this many messages (default 20); the window's cut moves when the cache planner says. */
  windowStep: Schema.optional(Count.pipe(Schema.greaterThanOrEqualTo(1))),
  /** Recent messages never evicted for budget (default 16). */
  freshTailMessages: Schema.optional(Count),
  /** Total token budget; default the effective window (context window − max output tokens). */
  budgetTokens: Schema.optional(Count.pipe(Schema.greaterThanOrEqualTo(1))),
  /** The agent this session belongs to: selects its knowledge documents and memories (default `default`). */
  agent: Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,128}$/))),
  /** The user this session acts for: its memories add to the agent's shared ones (default none: the shared ones only). */
  user: Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,128}$/))),
  /**
   * ctxd's memory tools (`memory_search`, `memory_read`, `memory_list`, `memory_history`; `memory_remember` once
   * loaded): true offers them, false never; default (absent) when the agent/user has any memory.
   */
  memoryTools: Schema.optional(Schema.Boolean),
  /** Token counting backend for this turn; default `CTXD_TOKEN_BACKEND` (`auto`). */
  tokenBackend: Schema.optional(Tokens.BackendChoice),
  /** Loop-detector policy and thresholds for this turn, field by field over the lower layers' (defaults: docs/configuration.md). */
  loop: Schema.optional(Loop.Settings),
  /**
   * Tool schema compression: `none`; `minify` (whitespace, titles, examples, empty defaults);
   * `truncate` (also the descriptions below the tool level; types, enums and `required` stay);
   * `aggressive` (also the tool description, cut to its first sentence, and long enums of optional properties).
   */
  toolCompression: Schema.optional(ToolCompression),
  /** Observation masking: the last K tool results stay whole, older ones become one-line references (default 3). */
  maskKeep: Schema.optional(Count),
  /** A `recall` answer is cut to about this many tokens (default 2,000); the masked boundary moves when the cache planner says. */
  maskBatchTokens: Schema.optional(Count.pipe(Schema.greaterThanOrEqualTo(1))),
  /**
   * Prompt-cache lifetime to plan with, in seconds; past it since the session's previous turn the
   * cache counts as cold. Default: chosen per session from its gaps (Anthropic 300 or 3,600, with the
   * breakpoints marked to match); given, it pins the TTL and the breakpoints keep the model's default.
   */
  cacheTtlSeconds: Schema.optional(Schema.Int.pipe(Schema.between(1, 86_400))),
  /**
   * Turns the session is expected to go on for, for the edit planner (default: learned from the
   * agent's past session lengths; without enough of them, half as many as it has had, at least 1).
   */
  expectedTurns: Schema.optional(Count),
  /**
   * What bounds an optional prefix-changing edit: `guarded` (default) spends only what the session
   * has saved against sending its whole history, so it never ends up costing more than that
   * history by more than 0.8 %; `expected` the rent-or-buy rule and the expected turns alone (more
   * savings on long sessions without pauses; a session that ends soon after an edit can cost more).
   */
  cacheEdits: Schema.optional(Schema.Literal("guarded", "expected")),
  /** Proactive compression starts when the window would use more than this fraction of the budget (default 0.85). */
  proactiveThreshold: Schema.optional(Fraction),
  /**
   * Reasoning (Anthropic thinking blocks, Responses reasoning items) is sent for the last this many
   * thinking turns; older turns' reasoning is left out (default 1, as the Anthropic API's own
   * `clear_thinking_20251015` default; at least 1: the current tool-use loop needs its own).
   */
  keepThinkingTurns: Schema.optional(Count.pipe(Schema.greaterThanOrEqualTo(1))),
  /**
   * On models that bind reasoning to its prefix (Anthropic's prefix check): `auto` (default) asks the
   * provider to drop failing blocks only when an edit the prompt cannot do without would invalidate
   * the block a tool-use continuation must start with; `drop_block` asks it in every body (a safety
   * net; ctxd still leaves out every block it knows is invalid). The report names the header to send.
   */
  thinkingPrefixMismatch: Schema.optional(Schema.Literal("auto", "drop_block")),
  /**
   * Memory in the prompt: `true` retrieves the agent's memories every turn, `false` never; absent
   * (default), only while the agent has any (a presence check cached per worker for 5 s).
   */
  memory: Schema.optional(Schema.Boolean),
  /** Tokens of retrieved memory per turn (default: the smaller of 2,200 and `memoryFraction` of the available budget). */
  memoryTokens: Schema.optional(Count),
  /** Share of the available budget (the budget less system and tools) for retrieved memory (default 0.15). */
  memoryFraction: Schema.optional(Fraction),
  /**
   * Where retrieved memory goes: `tail` (default) after the last cache breakpoint, as a note after
   * the newest message (it changes every turn, so it stays out of the cached prefix); `system` as the
   * last system section, inside the cached prefix (measured in the economics bench: costlier).
   */
  memoryPlacement: Schema.optional(Schema.Literal("tail", "system")),
  /** Share of the available budget for the agent's learnings, at most 5, in a system section stable for the session (default 0.05; 0: none). */
  learningsFraction: Schema.optional(Fraction),
  /**
   * Prompt caching (default true): false sends no `cache_control` breakpoints (Anthropic) and no
   * `prompt_cache_key` / `prompt_cache_retention` (OpenAI), and the report expects no cache reads
   * or writes from breakpoints; the providers' automatic prefix caching (OpenAI, Gemini) cannot be
   * turned off by a request.
   */
  promptCache: Schema.optional(Schema.Boolean),
  /**
   * Compaction (default true, where the worker runs a compactor): false neither schedules a
   * background compaction nor blocks on one for this turn; a summary already made still applies.
   */
  compaction: Schema.optional(Schema.Boolean),
  /** The compaction summaries of this turn's session. */
  summarizer: Schema.optional(
    Schema.Struct({
      /**
       * Who writes them: `provider` the model's API (Anthropic on-demand compaction: its signed block keeps
       * later thinking valid), `ctxd` its own summarizer. Default `provider` where the model has it and binds
       * thinking (`anthropic` turns), else `ctxd`.
       */
      backend: Schema.optional(Schema.Literal("ctxd", "provider")),
    }),
  ),
  /**
   * The workspace bundle cache (default true): false reads a `system: {workspace}` bundle's files
   * for this turn instead of taking them from the worker's cache (and leaves the cache as it is).
   */
  workspaceCache: Schema.optional(Schema.Boolean),
  /**
   * On-demand toolsets (tools that carry `toolset`): the toolsets sent from the
   * start (default `CTXD_DEFAULT_TOOLSETS`, none) and whether their write tools
   * come too (default false: read-only); the rest load through `load_toolset`.
   */
  toolsets: Schema.optional(
    Schema.Struct({
      /** The toolsets sent from the start; the others load through `load_toolset`. */
      defaults: Schema.optional(Schema.Array(Schema.String)),
      /** Whether a toolset's write tools come with it (false: read-only). */
      includeWrite: Schema.optional(Schema.Boolean),
    }),
  ),
}).annotations({ identifier: "TurnOptions" })
export type Options = typeof Options.Type

const TurnId = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))

/**
 * `previousResponseId`: the id of the provider's response to this session's
 * previous call, in the request's format, so ctxd asks the provider for cache
 * diagnostics against it (Anthropic `diagnostics.previous_message_id`, OpenAI
 * Responses `prompt_cache_options.comparison_response_id`); `null` opts in on
 * a first call (Anthropic stores a request's fingerprint only when it asks).
 * Each format takes only its API's ids: a wrong one is a `BadRequest` naming
 * `previousResponseId`, and nothing is stored.
 */
const responseId = (pattern: RegExp, what: string) =>
  Schema.optional(
    Schema.NullOr(
      Schema.String.pipe(Schema.maxLength(200), Schema.pattern(pattern, { message: () => `previousResponseId must be ${what}` })),
    ),
  )

/**
 * What the request's messages (`messages`, `input`, `contents`) are:
 * `delta` (the default), the messages since the previous turn; `client`,
 * the client's whole history as it sends it on every call (the gateway):
 * the worker matches it against the stored history by content, appends
 * only what is new, and when it no longer extends the stored one starts a
 * new branch of the session from it (the report's `history` says which).
 *
 * With `client`, the history may travel in `clientHistory` instead of the
 * format's own field (`messages`, `input`, `contents`, then left out): a
 * worker of an earlier release, which ignores `history`, then refuses the
 * turn (its history field is missing) instead of appending the whole
 * history again.
 */
export const HistoryMode = Schema.Literal("delta", "client")
export type HistoryMode = typeof HistoryMode.Type

const common = {
  /** Idempotency key: the same id again returns the stored reply. */
  turnId: TurnId,
  model: Model,
  system: Schema.optional(System),
  options: Schema.optional(Options),
  history: Schema.optional(HistoryMode),
}

export const AnthropicTurnRequest = Schema.Struct({
  ...common,
  format: Schema.Literal("anthropic"),
  /** A Messages response id (`msg_…`), see {@link responseId}. */
  previousResponseId: responseId(/^msg_[A-Za-z0-9_-]+$/, "an Anthropic message id (msg_…)"),
  tools: Schema.optional(Schema.Array(Anthropic.Tool)),
  messages: Schema.Array(Anthropic.Message),
  /** With `history: "client"`: the history, in place of `messages` (see {@link HistoryMode}). */
  clientHistory: Schema.optional(Schema.Array(Anthropic.Message)),
}).annotations({ identifier: "AnthropicTurnRequest" })
export type AnthropicTurnRequest = typeof AnthropicTurnRequest.Type

export const OpenAITurnRequest = Schema.Struct({
  ...common,
  format: Schema.Literal("openai"),
  /** A chat completion id (`chatcmpl-…`): Chat Completions has no diagnostics, so ctxd only validates it. */
  previousResponseId: responseId(/^chatcmpl-[A-Za-z0-9_-]+$/, "a chat completion id (chatcmpl-…)"),
  tools: Schema.optional(Schema.Array(OpenAI.Tool)),
  messages: Schema.Array(OpenAI.Message),
  /** With `history: "client"`: the history, in place of `messages` (see {@link HistoryMode}). */
  clientHistory: Schema.optional(Schema.Array(OpenAI.Message)),
}).annotations({ identifier: "OpenAITurnRequest" })
export type OpenAITurnRequest = typeof OpenAITurnRequest.Type

/** OpenAI Responses API: `input` items (and `instructions`, one more system section after `system`). */
export const OpenAIResponsesTurnRequest = Schema.Struct({
  ...common,
  format: Schema.Literal("openai-responses"),
  /** Appended to `system` as the section `{id: "instructions"}`. */
  instructions: Schema.optional(Schema.String),
  /** A Responses id (`resp_…`), see {@link responseId}. */
  previousResponseId: responseId(/^resp_[A-Za-z0-9_-]+$/, "an OpenAI response id (resp_…)"),
  tools: Schema.optional(Schema.Array(OpenAIResponses.Tool)),
  input: Schema.Array(OpenAIResponses.Item),
  /** With `history: "client"`: the history, in place of `input` (see {@link HistoryMode}). */
  clientHistory: Schema.optional(Schema.Array(OpenAIResponses.Item)),
}).annotations({ identifier: "OpenAIResponsesTurnRequest" })
export type OpenAIResponsesTurnRequest = typeof OpenAIResponsesTurnRequest.Type

/**
 * Gemini API (`generateContent`): `contents` (and `systemInstruction`, one more
 * system section after `system`).
 */
export const GeminiTurnRequest = Schema.Struct({
  ...common,
  format: Schema.Literal("gemini"),
  /** Appended to `system` as the section `{id: "systemInstruction"}` (its text parts, joined by a blank line). */
  systemInstruction: Schema.optional(Gemini.SystemInstruction),
  tools: Schema.optional(Schema.Array(Gemini.Tool)),
  contents: Schema.Array(Gemini.Content),
  /** With `history: "client"`: the history, in place of `contents` (see {@link HistoryMode}). */
  clientHistory: Schema.optional(Schema.Array(Gemini.Content)),
}).annotations({ identifier: "GeminiTurnRequest" })
export type GeminiTurnRequest = typeof GeminiTurnRequest.Type

export const TurnRequest = Schema.Union(AnthropicTurnRequest, OpenAITurnRequest, OpenAIResponsesTurnRequest, GeminiTurnRequest).annotations(
  {
    identifier: "TurnRequest",
    description: "ctx.v1.turn.<tenant>.<session> request",
  },
)
export type TurnRequest = typeof TurnRequest.Type

/** A request member with `system` and `tools` that may also be a {@link PrefixRef}. */
const withRefs = <
  F extends
    | typeof AnthropicTurnRequest.fields
    | typeof OpenAITurnRequest.fields
    | typeof OpenAIResponsesTurnRequest.fields
    | typeof GeminiTurnRequest.fields,
>(
  fields: F,
  identifier: string,
) =>
  Schema.Struct({
    ...fields,
    system: Schema.optional(Schema.Union(...System.members, PrefixRef)),
    tools: Schema.optional(Schema.Union(fields.tools.from, PrefixRef)),
  }).annotations({ identifier })

/**
 * The turn request as it may travel: {@link TurnRequest}, where `system`
 * and `tools` may name a value the session sent before (`{ref}`, see
 * {@link PrefixRef}). The worker resolves refs before decoding, so the
 * pipeline only ever sees {@link TurnRequest}; this is the exported JSON
 * Schema's shape.
 */
export const TurnRequestWire = Schema.Union(
  withRefs(AnthropicTurnRequest.fields, "AnthropicTurnRequest"),
  withRefs(OpenAITurnRequest.fields, "OpenAITurnRequest"),
  withRefs(OpenAIResponsesTurnRequest.fields, "OpenAIResponsesTurnRequest"),
  withRefs(GeminiTurnRequest.fields, "GeminiTurnRequest"),
).annotations({
  identifier: "TurnRequest",
  description: "ctx.v1.turn.<tenant>.<session> request (system and tools may be {ref} of a value the session sent before)",
})
export type TurnRequestWire = typeof TurnRequestWire.Type
