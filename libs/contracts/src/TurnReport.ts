/**
 * The reply of `<root>.v1.turn.<tenant>.<session>`: the provider-ready
 * request body and the report of what was sent, kept, dropped, masked and
 * compacted, and what each part costs.
 */
import { Schema } from "effect"
import { Format, Provider, ToolCompression } from "./Formats.ts"
import * as Loop from "./Loop.ts"

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
  /**
   * Reasoning parts left out, by cause (models that bind reasoning to its prefix): `prefixChanged`,
   * what precedes them differs from when they were produced (an edit, or reasoning before them left
   * out); `unreadableModel`, written by a model this one cannot read; `olderTurn`, older thinking turns.
   */
  leftOut: Schema.optional(Schema.Struct({ prefixChanged: Schema.Number, unreadableModel: Schema.Number, olderTurn: Schema.Number })),
  /**
   * The body asks the provider to drop bound reasoning that fails its prefix check instead of
   * failing the request (Anthropic `thinking.block_binding.prefix_mismatch_behavior`): send the
   * request with the header `anthropic-beta: <betaHeader>`, and keep the body's `thinking.block_binding`
   * when setting `thinking` yourself.
   */
  blockBinding: Schema.optional(Schema.Struct({ prefixMismatchBehavior: Schema.Literal("drop_block"), betaHeader: Schema.String })),
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

/** Why a prompt's cached prefix changed (docs/cache-and-economics.md). */
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

/**
 * Prompt tokens not read from the provider's cache, for one cause
 * (docs/cache-and-economics.md#cache-misses-explained). `cause` is
 * `ctxd_edit`, `ttl_expiry`, `client_change` or `unknown` (a string: later
 * causes are added here); `reason` says which edit ctxd made (`window`,
 * `mask`, ...), what the client changed (`system`, `tools`, `model`, ...) or
 * what the provider's diagnostics said.
 */
export const CacheMissReport = Schema.Struct({
  cause: Schema.String,
  tokens: Schema.Number,
  reason: Schema.optional(Schema.String),
}).annotations({ identifier: "CacheMiss" })
export type CacheMissReport = typeof CacheMissReport.Type

export const StageReport = Schema.Struct({
  /** The pipeline stage (`window`, `compress`, `mask`, `budget`, `prune`, `thinking`, `render`, `proactive`). */
  stage: Schema.String,
  /** The prompt's estimated tokens (system + tools + history) before the stage. */
  tokensIn: Schema.Number,
  /** The same after it. */
  tokensOut: Schema.Number,
})
export type StageReport = typeof StageReport.Type

/**
 * What a turn sent with `history: "client"` (the client's whole history)
 * made of it: where it was stored, how much of it the stored history held
 * already (matched by content), what was appended, and — when the client's
 * history no longer extended the stored one (it compacted, edited, rewound
 * or forked it) — the new branch it started.
 */
export const HistoryReport = Schema.Struct({
  mode: Schema.Literal("client"),
  /** The stored session the turn's messages went to: the session itself, or one of its branches (`<session>-b<k>-<hash>`). */
  session: Schema.String,
  /** 0 for the session itself, k for its k-th branch. */
  branch: Schema.Number,
  /** The client's messages found in the stored history, in order (messages ctxd added itself are skipped). */
  matched: Schema.Number,
  /** The client's messages appended by this turn (the rest of its history). */
  appended: Schema.Number,
  /** Set when this turn started a new branch from the client's history (the earlier history stays as it was). */
  forked: Schema.optional(
    Schema.Struct({
      /** The stored session the client's history no longer extends (the newest one tried). */
      from: Schema.String,
      /** The index of the first client message that differs from it (`shorter`: the client's length). */
      at: Schema.Number,
      /** `diverged`: a message differs; `shorter`: the client's history stops inside the stored one. */
      reason: Schema.Literal("diverged", "shorter"),
    }),
  ),
}).annotations({ identifier: "HistoryReport" })
export type HistoryReport = typeof HistoryReport.Type

export const Report = Schema.Struct({
  format: Format,
  model: Schema.Struct({
    provider: Provider,
    name: Schema.String,
    contextWindow: Schema.Number,
    maxOutputTokens: Schema.Number,
    /** contextWindow − maxOutputTokens */
    effectiveWindow: Schema.Number,
    /**
     * Present (false) when no row of the model table names the model: its
     * limits and prices are a conservative row's (absent: a known model).
     */
    known: Schema.optional(Schema.Literal(false)),
    /** The table row that sized and priced an unknown model (`claude`, `openai`, `unknown`, ...; with `known`). */
    row: Schema.optional(Schema.String),
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
    /**
     * The previous prompt's tokens this one will not read, and why, by ctxd's
     * own knowledge (absent: none lost). The usage report's `cache.misses`
     * adds what the provider billed.
     */
    miss: Schema.optional(CacheMissReport),
  }),
  /** Compaction: the live summary the history view starts with, and what this turn decided. */
  compaction: Schema.optional(
    Schema.Struct({
      summary: Schema.NullOr(
        Schema.Struct({
          coversFromSeq: Schema.Number,
          coversToSeq: Schema.Number,
          mode: Schema.String,
          depth: Schema.Number,
          /** `provider`: the model's API wrote it (on-demand compaction) and its signed block is sent in place of the span; absent: ctxd's. */
          writtenBy: Schema.optional(Schema.Literal("provider")),
        }),
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
  /** Set for a turn sent with `history: "client"`: how the client's history met the stored one. */
  history: Schema.optional(HistoryReport),
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
