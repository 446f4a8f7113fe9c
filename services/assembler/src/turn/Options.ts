/**
 * A turn's options, merged once — the global defaults (environment), then
 * the tenant's, then the request's own (`loop` field by field) — and cut
 * into the slice each stage reads.
 */
import { MemoryRecall, Pipeline, type Toolsets } from "@ctxd/context"
import { Knowledge, type Tokens, type Turn } from "@ctxd/contracts"
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
  readonly cache: { readonly ttlSeconds: number | undefined; readonly expectedTurns: number | undefined }
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

/** Merges `config`'s global and `tenant`'s options under the request's own, and slices them. */
export const resolve = (config: AssemblerConfig.Config, tenant: string, request: Turn.Options | undefined): Resolved => {
  const forTenant = config.tenants[tenant]
  const merged: Turn.Options = { ...config.defaults, ...forTenant, ...request }
  const loop: Turn.Options["loop"] = { ...config.loop, ...forTenant?.loop, ...request?.loop }
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
      learningsFraction: merged.learningsFraction ?? MemoryRecall.defaults.learningsFraction,
    },
    cache: { ttlSeconds: merged.cacheTtlSeconds, expectedTurns: merged.expectedTurns },
  }
}
