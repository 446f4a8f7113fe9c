/**
 * A turn's options, merged once and cut into the slice each stage reads.
 * Precedence, lowest first: the environment's defaults (`CTXD_WINDOW_MESSAGES`,
 * ...), the config file's `defaults`, the tenant's section, the agent's section
 * (`agents.<options.agent>`), the request's own `options`; `loop` merges field
 * by field.
 */
import { MemoryRetrieval, Pipeline, type Toolsets } from "@ctxd/context"
import { Knowledge, Tenants, type Tokens, type Turn } from "@ctxd/contracts"
import { LoopConfig } from "@ctxd/loop-detector"
import type * as AssemblerConfig from "../AssemblerConfig.ts"

/** Every stage's slice of the merged options. */
export interface Resolved {
  /** The pipeline's knobs (`Pipeline.defaults` under the merged options). */
  readonly pipeline: Pipeline.Options
  /** On-demand toolsets. */
  readonly toolsets: Toolsets.Config
  /** Whose knowledge documents and memories the turn sees. */
  readonly agent: string
  /** The user whose memories the turn also sees (undefined: the agent's shared memories only). */
  readonly user: string | undefined
  /** Offer the memory tools: always (true), never (false), or when the agent/user has any memory (undefined). */
  readonly memoryTools: boolean | undefined
  /** Who counts this turn (undefined: the worker's default). */
  readonly tokenBackend: Tokens.BackendChoice | undefined
  /** The loop detector's thresholds and policy. */
  readonly loop: LoopConfig.Config
  /** The optional LLM judge at the loop detector's borderline. */
  readonly judge: { readonly enabled: boolean; readonly model: string | undefined }
  /** Memory in the prompt and learnings (see `Memory`). */
  readonly memory: Memory
  /** The cache planner's overrides (undefined: the model's TTL; the turns expected from the agent's session lengths, `Prompt.expectedTurns`). */
  readonly cache: {
    readonly ttlSeconds: number | undefined
    readonly expectedTurns: number | undefined
    /** `guarded` (default): optional edits bounded by the session's savings (`Ledger`); `expected`: not. */
    readonly edits: "guarded" | "expected"
  }
  /** False: no prompt-cache markers in the body (`options.promptCache`). */
  readonly promptCache: boolean
  /** False: a workspace bundle's files are read for this turn, not taken from (nor put in) the worker's cache (`options.workspaceCache`). */
  readonly workspaceCache: boolean
  /** False: this turn neither schedules nor waits for a compaction (`options.compaction`). */
  readonly compaction: boolean
  /** Who writes the compaction summaries, as asked (`options.summarizer.backend`; undefined: the model's default, `Compactor.backendFor`). */
  readonly summarizerBackend: "ctxd" | "provider" | undefined
}

/** The memory knobs of a turn, merged. */
export interface Memory {
  /** `true`: retrieve every turn; `false`: never; undefined: while the agent has memories (a cached presence check). */
  readonly enabled: boolean | undefined
  readonly tokens: number | undefined
  readonly fraction: number | undefined
  readonly placement: "tail" | "system"
  readonly learningsFraction: number
}

/** The merged options, before slicing: environment < file `defaults` < tenant < agent < request. */
export const merge = (config: AssemblerConfig.Config, tenant: string, request: Turn.Options | undefined): Turn.Options => {
  const sections = config.sections()
  const section = sections.tenants[tenant]
  const forTenant = section === undefined ? undefined : Tenants.optionsOf(section)
  const under: Turn.Options = { ...config.defaults, ...sections.defaults, ...forTenant }
  const forAgent = sections.agents[request?.agent ?? under.agent ?? Knowledge.DEFAULT_AGENT]
  const merged: Turn.Options = { ...under, ...forAgent, ...request }
  const loop: Turn.Options["loop"] = { ...config.loop, ...sections.defaults.loop, ...forTenant?.loop, ...forAgent?.loop, ...request?.loop }
  return { ...merged, loop }
}

/** Merges the options ({@link merge}) and slices them. */
export const resolve = (config: AssemblerConfig.Config, tenant: string, request: Turn.Options | undefined): Resolved => {
  const merged = merge(config, tenant, request)
  const loop = merged.loop
  return {
    pipeline: Pipeline.resolveOptions({ ...Pipeline.defaults, ...merged }),
    toolsets: {
      defaultToolsets: merged.toolsets?.defaults ?? config.defaultToolsets,
      includeWriteByDefault: merged.toolsets?.includeWrite ?? false,
    },
    agent: merged.agent ?? Knowledge.DEFAULT_AGENT,
    user: merged.user,
    memoryTools: merged.memoryTools,
    tokenBackend: merged.tokenBackend,
    loop: LoopConfig.make(loop),
    judge: { enabled: loop?.judge?.enabled === true, model: loop?.judge?.model },
    memory: {
      enabled: merged.memory,
      tokens: merged.memoryTokens,
      fraction: merged.memoryFraction,
      placement: merged.memoryPlacement ?? "tail",
      learningsFraction: merged.learningsFraction ?? MemoryRetrieval.defaults.learningsFraction,
    },
    cache: { ttlSeconds: merged.cacheTtlSeconds, expectedTurns: merged.expectedTurns, edits: merged.cacheEdits ?? "guarded" },
    promptCache: merged.promptCache ?? true,
    workspaceCache: merged.workspaceCache ?? true,
    compaction: merged.compaction ?? true,
    summarizerBackend: merged.summarizer?.backend,
  }
}
