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

export const Format = Schema.Literal("anthropic", "openai", "openai-responses", "gemini")
export type Format = typeof Format.Type

export const Provider = Schema.Literal("anthropic", "openai", "google")
export type Provider = typeof Provider.Type

export const Model = Schema.Struct({
  provider: Provider,
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  /** Context window in tokens; default from the model table (README). */
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
  Schema.pattern(/^[A-Za-z0-9_-]{1,128}(\.md)?$/, { message: () => "a workspace extra must match [A-Za-z0-9_-]{1,128}, optionally with .md" }),
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

/** Tool schema compression levels, weakest first. */
export const ToolCompression = Schema.Literal("none", "minify", "truncate", "aggressive")
export type ToolCompression = typeof ToolCompression.Type

/** Per-request overrides of the assembly knobs (defaults in the README). */
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
  /** Loop-detector policy and thresholds for this turn (defaults in the README). */
  loop: Schema.optional(Loop.Settings),
  /** Tool schema compression: `none`, `minify`, `truncate` or `aggressive` (README). */
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
  /** Proactive compression starts when the window would use more than this fraction of the budget (default 0.85). */
  proactiveThreshold: Schema.optional(Fraction),
  /**
   * Reasoning (Anthropic thinking blocks, Responses reasoning items) is sent for the last this many
   * thinking turns; older turns' reasoning is left out (default 1, as the Anthropic API's own
   * `clear_thinking_20251015` default; at least 1: the current tool-use loop needs its own).
   */
  keepThinkingTurns: Schema.optional(Count.pipe(Schema.greaterThanOrEqualTo(1))),
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
      defaults: Schema.optional(Schema.Array(Schema.String)),
      includeWrite: Schema.optional(Schema.Boolean),
    }),
  ),
}).annotations({ identifier: "TurnOptions" })
export type Options = typeof Options.Type

const TurnId = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))

const common = {
  /** Idempotency key: the same id again returns the stored reply. */
  turnId: TurnId,
  model: Model,
  system: Schema.optional(System),
  options: Schema.optional(Options),
}

export const AnthropicTurnRequest = Schema.Struct({
  ...common,
  format: Schema.Literal("anthropic"),
  tools: Schema.optional(Schema.Array(Anthropic.Tool)),
  messages: Schema.Array(Anthropic.Message),
}).annotations({ identifier: "AnthropicTurnRequest" })
export type AnthropicTurnRequest = typeof AnthropicTurnRequest.Type

export const OpenAITurnRequest = Schema.Struct({
  ...common,
  format: Schema.Literal("openai"),
  tools: Schema.optional(Schema.Array(OpenAI.Tool)),
  messages: Schema.Array(OpenAI.Message),
}).annotations({ identifier: "OpenAITurnRequest" })
export type OpenAITurnRequest = typeof OpenAITurnRequest.Type

/** OpenAI Responses API: `input` items (and `instructions`, one more system section after `system`). */
export const OpenAIResponsesTurnRequest = Schema.Struct({
  ...common,
  format: Schema.Literal("openai-responses"),
  /** Appended to `system` as the section `{id: "instructions"}`. */
  instructions: Schema.optional(Schema.String),
  tools: Schema.optional(Schema.Array(OpenAIResponses.Tool)),
  input: Schema.Array(OpenAIResponses.Item),
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
}).annotations({ identifier: "GeminiTurnRequest" })
export type GeminiTurnRequest = typeof GeminiTurnRequest.Type

export const TurnRequest = Schema.Union(AnthropicTurnRequest, OpenAITurnRequest, OpenAIResponsesTurnRequest, GeminiTurnRequest).annotations({
  identifier: "TurnRequest",
  description: "ctx.v1.turn.<tenant>.<session> request",
})
export type TurnRequest = typeof TurnRequest.Type

/** A request member with `system` and `tools` that may also be a {@link PrefixRef}. */
const withRefs = <F extends typeof AnthropicTurnRequest.fields | typeof OpenAITurnRequest.fields | typeof OpenAIResponsesTurnRequest.fields | typeof GeminiTurnRequest.fields>(
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

export const TokenCounts = Schema.Struct({
  system: Schema.Number,
  tools: Schema.Number,
  memory: Schema.Number,
  history: Schema.Number,
  /** History tokens if every stored message were sent: what ctxd saved is `fullHistory − history`. */
  fullHistory: Schema.Number,
  /** system + tools + memory + history: the estimated prompt size. */
  total: Schema.Number,
  /** The budget the prompt had to fit. */
  budget: Schema.Number,
})

export const ToolsReport = Schema.Struct({
  /** Tool definitions sent. */
  sent: Schema.Number,
  /** The compression level applied. */
  compression: ToolCompression,
  /** Tokens of the tool definitions as sent. */
  tokens: Schema.Number,
  /** Tokens the compression saved (uncompressed − sent). */
  saved: Schema.Number,
})
export type ToolsReport = typeof ToolsReport.Type

export const MaskingReport = Schema.Struct({
  /** Tool results sent as one-line references instead of their content. */
  masked: Schema.Number,
  /** Tool results sent as a reference to an identical earlier result (proactive step). */
  deduplicated: Schema.Number,
  /** Tokens saved by masking and de-duplication in the messages sent. */
  tokensSaved: Schema.Number,
  /** Sequence number of the first message not masked by the batch boundary, if any is masked. */
  boundarySeq: Schema.NullOr(Schema.Number),
})
export type MaskingReport = typeof MaskingReport.Type

export const ReasoningReport = Schema.Struct({
  /** Thinking turns whose reasoning is sent (the `keepThinkingTurns` in effect). */
  keepTurns: Schema.Number,
  /** Reasoning parts (thinking blocks, reasoning items) sent. */
  sent: Schema.Number,
  /** Reasoning parts of older thinking turns left out. */
  dropped: Schema.Number,
  /** Estimated tokens of the reasoning left out. */
  tokensSaved: Schema.Number,
  /** Reasoning due to be left out but still sent this turn: the cache planner holds it while the cache is warm. */
  held: Schema.Number,
})
export type ReasoningReport = typeof ReasoningReport.Type

export const VirtualCall = Schema.Struct({
  /** `load_toolset`, `load_knowledge`, `recall` or a memory tool (`memory_search`...). */
  tool: Schema.String,
  callId: Schema.String,
  args: Schema.Unknown,
  /** False when the answer was an error (unknown toolset, document or step...). */
  ok: Schema.Boolean,
})
export type VirtualCall = typeof VirtualCall.Type

export const WasteReport = Schema.Struct({
  /** Names of tools sent in this session that the model never called, sorted. */
  sentNeverCalled: Schema.Array(Schema.String),
  /** Share of the tool-definition tokens sent in this session that went to never-called tools (0..1). */
  ratio: Schema.Number,
})
export type WasteReport = typeof WasteReport.Type

export const ProactiveStep = Schema.Struct({
  kind: Schema.Literal("toolCompression", "maskKeep", "dedupe"),
  /** The new level (`truncate`), the new K, or `on`. */
  value: Schema.Union(Schema.String, Schema.Number),
  /** Utilization after this step. */
  utilization: Schema.Number,
})
export type ProactiveStep = typeof ProactiveStep.Type

export const ProactiveReport = Schema.Struct({
  threshold: Schema.Number,
  /** What the window would use of the budget (before budget eviction) before this turn's steps. */
  utilizationBefore: Schema.Number,
  /** The same after the steps. */
  utilizationAfter: Schema.Number,
  /** The steps taken in this turn, in order (empty when already under the threshold). */
  steps: Schema.Array(ProactiveStep),
  /** Rungs already in effect from earlier turns of the session (escalation is sticky). */
  carried: Schema.Number,
  /** Rungs in effect after this turn (0: none). */
  rung: Schema.Number,
})
export type ProactiveReport = typeof ProactiveReport.Type

/** One memory (or learning) sent in the prompt. */
export const InjectedMemory = Schema.Struct({
  id: Schema.String,
  /** Its tokens as sent (local count). */
  tokens: Schema.Number,
})
export type InjectedMemory = typeof InjectedMemory.Type

export const MemoryReport = Schema.Struct({
  /** The memories sent, best first. */
  injected: Schema.Array(InjectedMemory),
  /** Tokens of the memory block as sent (the entries and their framing); `tokens.memory`. */
  tokens: Schema.Number,
  /** The memory budget this turn (`memoryTokens`, or `memoryFraction` of the available budget). */
  budget: Schema.Number,
  /** `tail` (after the last cache breakpoint) or `system` (the last system section). */
  placement: Schema.String,
  /** Hits the store returned before re-ranking and the budget's cut (over-fetched 3×). */
  candidates: Schema.Number,
})
export type MemoryReport = typeof MemoryReport.Type

export const LearningsReport = Schema.Struct({
  /** The learnings in the system section (picked at the session's first turn; kept until compaction). */
  injected: Schema.Array(InjectedMemory),
  /** Tokens of the learnings section (counted in `tokens.system`). */
  tokens: Schema.Number,
  /** `learningsFraction` of the available budget when they were picked. */
  budget: Schema.Number,
})
export type LearningsReport = typeof LearningsReport.Type

/** Why a prompt's cached prefix changed (see the README's cache economics). */
export const CacheBreakReason = Schema.Literal(
  "append",
  "window",
  "mask",
  "summary",
  "tools",
  "system",
  "knowledge",
  "budget",
  "ttl_expired",
  "first_turn",
)
export type CacheBreakReason = typeof CacheBreakReason.Type

export const StageReport = Schema.Struct({
  /** The pipeline stage (`window`, `compress`, `mask`, `budget`, `prune`, `thinking`, `render`, `proactive`). */
  stage: Schema.String,
  /** The prompt's estimated tokens (system + tools + history) before the stage. */
  tokensIn: Schema.Number,
  /** The same after it. */
  tokensOut: Schema.Number,
})
export type StageReport = typeof StageReport.Type

export const Report = Schema.Struct({
  format: Format,
  model: Schema.Struct({
    provider: Provider,
    name: Schema.String,
    contextWindow: Schema.Number,
    maxOutputTokens: Schema.Number,
    /** contextWindow − maxOutputTokens */
    effectiveWindow: Schema.Number,
  }),
  tokens: TokenCounts,
  /** tokens.total / model.effectiveWindow */
  utilization: Schema.Number,
  messages: Schema.Struct({
    /** Messages stored for the session (the full history). */
    stored: Schema.Number,
    /** Messages inside the message-count window. */
    window: Schema.Number,
    /** Messages sent. */
    sent: Schema.Number,
    droppedByWindow: Schema.Number,
    droppedByBudget: Schema.Number,
    /** Sequence number of the intent anchor (first user message), if any. */
    anchorSeq: Schema.NullOr(Schema.Number),
    /** Sequence numbers of the first and last messages sent. */
    firstSentSeq: Schema.NullOr(Schema.Number),
    lastSentSeq: Schema.NullOr(Schema.Number),
  }),
  /** Tool calls without results and results without calls removed from the view. */
  orphans: Schema.Struct({ calls: Schema.Number, results: Schema.Number }),
  /** True when the protected fresh tail alone does not fit the budget. */
  overBudget: Schema.Boolean,
  counter: Schema.Struct({
    /** `anthropic_api`, `openai_api`, `google_api`, `tiktoken` or `heuristic`: who counted this turn's new content. */
    backend: Schema.String,
    /** The tokenizer vocabulary (`o200k_base`, `cl100k_base`, `heuristic`, or the provider's name, `anthropic` / `openai` / `google`, for its own count). */
    encoding: Schema.String,
    /** True only for a provider count while its circuit breaker has never opened in this process. */
    exact: Schema.Boolean,
    /** The correction factor applied to local estimates (1 when none). */
    calibration: Schema.Number,
    /** Why a local backend answered when the provider's count was wanted (`circuit_open`, `timeout`, ...). */
    fallback: Schema.optional(Schema.String),
  }),
  cache: Schema.Struct({
    /** Anthropic `cache_control` breakpoints placed (at most 4). */
    breakpoints: Schema.Number,
    /** OpenAI `prompt_cache_key` (stable per tenant/session). */
    promptCacheKey: Schema.NullOr(Schema.String),
    /** Estimated prompt tokens (system + tools + history) in this prompt. */
    prefixTokens: Schema.optional(Schema.Number),
    /** Tokens before the first place this prompt differs from the previous turn's (the reusable cached prefix). */
    changedAtTokens: Schema.optional(Schema.Number),
    /** Why the prefix changed where it did (`append`: nothing before the new messages changed). */
    reason: Schema.optional(CacheBreakReason),
    /** The TTL the breakpoints were written with, in seconds. */
    ttlSeconds: Schema.optional(Schema.Number),
    /** Tokens the provider should read from its cache (0 when cold or below the minimum cacheable prefix). */
    expectedReadTokens: Schema.optional(Schema.Number),
    /** Tokens the provider should write to its cache (Anthropic) or bill uncached (OpenAI). */
    expectedWriteTokens: Schema.optional(Schema.Number),
    /** Prefix edits this turn held back because they do not pay for themselves yet. */
    deferred: Schema.optional(Schema.Array(Schema.Literal("window", "mask"))),
    /** A newer summary is ready but held back (the prompt still starts with the previous one): swapping does not pay yet. */
    summaryDeferred: Schema.optional(Schema.Boolean),
  }),
  /** Compaction: the live summary the history view starts with, and what this turn decided. */
  compaction: Schema.optional(
    Schema.Struct({
      summary: Schema.NullOr(
        Schema.Struct({ coversFromSeq: Schema.Number, coversToSeq: Schema.Number, mode: Schema.String, depth: Schema.Number }),
      ),
      /** `none`, `background` (a job was or is queued) or `blocking` (compacted before answering). */
      trigger: Schema.Literal("none", "background", "blocking"),
      /** Pre-flight estimate / effective window, before compaction. */
      utilization: Schema.Number,
    }),
  ),
  /**
   * A provider compaction boundary applied (set only when there is one): the
   * latest message of the stored history holding a provider compaction of
   * the request's format (Anthropic `compaction` block, Responses
   * `compaction` item). Nothing stored before it was sent; a ctxd summary
   * that predates it is superseded (`compaction.summary` is then null).
   */
  providerCompaction: Schema.optional(
    Schema.Struct({
      /** The compaction's format (`anthropic`, `openai-responses`). */
      format: Schema.String,
      /** Sequence number of the message holding it. */
      seq: Schema.Number,
      /** Stored messages before it, not sent. */
      notSent: Schema.Number,
      /** True when the session's live ctxd summary predates it (and so is not applied). */
      summarySuperseded: Schema.Boolean,
    }),
  ),
  /** The loop detector's verdict and what was done about it (always set by the worker). */
  loop: Schema.optional(Loop.Report),
  /** The tool definitions sent (set when tool compression or proactive compression is configured). */
  tools: Schema.optional(ToolsReport),
  /** Observation masking (set when masking is on). */
  masking: Schema.optional(MaskingReport),
  /** Reasoning sent and left out (set when the messages considered carry reasoning). */
  reasoning: Schema.optional(ReasoningReport),
  /** Virtual tool calls (`load_toolset`, `load_knowledge`) ctxd answered itself in this turn. */
  virtualCalls: Schema.optional(Schema.Array(VirtualCall)),
  /** Tools sent but never called in this session so far. */
  waste: Schema.optional(WasteReport),
  /** Proactive compression (set when a threshold is configured). */
  proactive: Schema.optional(ProactiveReport),
  /** Retrieved memory sent this turn (set when memory was retrieved). */
  memory: Schema.optional(MemoryReport),
  /** The agent's learnings in the system section (set when the session has any). */
  learnings: Schema.optional(LearningsReport),
  /** What each pipeline stage did to the prompt, in the order they ran. */
  stages: Schema.optional(Schema.Array(StageReport)),
}).annotations({ identifier: "TurnReport" })
export type Report = typeof Report.Type

export const TurnReply = Schema.Struct({
  ok: Schema.Literal(true),
  turnId: Schema.String,
  /** The request body for the provider API (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses, or Gemini `generateContent` parameters), with `model`. */
  request: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  report: Report,
  /**
   * The hashes of the request's `system` and `tools` (when it had them as
   * text and tool definitions): the next turns of this session may send
   * `{ref: <hash>}` instead (see {@link PrefixRef}).
   */
  refs: Schema.optional(Schema.Struct({ system: Schema.optional(Schema.String), tools: Schema.optional(Schema.String) })),
}).annotations({ identifier: "TurnReply", description: "ctx.v1.turn.<tenant>.<session> success reply" })
export type TurnReply = typeof TurnReply.Type
