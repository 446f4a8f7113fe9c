/**
 * Stage `reply`: the success reply — the provider request body and the
 * report: the pipeline's, with the loop verdict, the compaction decision,
 * the provider compaction boundary applied, the virtual calls ctxd answered
 * and the session's tool waste. With `options.promptCache: false` the body
 * goes without its prompt-cache markers.
 */
import { CacheMiss, Providers, Waste } from "@ctxd/context"
import type { Turn } from "@ctxd/contracts"
import * as Carry from "./Carry.ts"

/**
 * A copy of `block` without `cache_control` (Anthropic) or `prompt_cache_breakpoint`
 * (OpenAI); the rendered blocks may be shared with the session's state: never mutated.
 */
const unmarked = (block: unknown): unknown => {
  if (typeof block !== "object" || block === null || !("cache_control" in block || "prompt_cache_breakpoint" in block)) return block
  const { cache_control: _marker, prompt_cache_breakpoint: _breakpoint, ...rest } = block as Record<string, unknown>
  return rest
}
const unmarkedAll = (value: unknown): unknown => (Array.isArray(value) ? value.map(unmarked) : value)

/** A message or input item without markers on its content (or a Responses tool output's) parts. */
const unmarkedItem = (m: unknown): unknown => {
  if (typeof m !== "object" || m === null) return m
  const item = m as Record<string, unknown>
  const out = Array.isArray(item["content"]) ? { ...item, content: unmarkedAll(item["content"]) } : item
  return Array.isArray(item["output"]) ? { ...out, output: unmarkedAll(item["output"]) } : out
}

/**
 * The body without prompt-cache markers: Anthropic `cache_control` on system, tools and message
 * blocks; OpenAI's cache key, retention, `prompt_cache_options` (but a diagnostics
 * `comparison_response_id`) and `prompt_cache_breakpoint`s.
 */
export const withoutPromptCache = (body: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const { prompt_cache_key: _key, prompt_cache_retention: _retention, prompt_cache_options: options, ...rest } = body
  const out: Record<string, unknown> = { ...rest }
  // a diagnostics comparison is no cache marker: it stays
  const comparison = (options as { readonly comparison_response_id?: unknown } | undefined)?.comparison_response_id
  if (comparison !== undefined) out["prompt_cache_options"] = { comparison_response_id: comparison }
  if (Array.isArray(body["system"])) out["system"] = unmarkedAll(body["system"])
  if (Array.isArray(body["tools"])) out["tools"] = unmarkedAll(body["tools"])
  if (Array.isArray(body["messages"])) out["messages"] = body["messages"].map(unmarkedItem)
  if (Array.isArray(body["input"])) out["input"] = body["input"].map(unmarkedItem)
  return out
}

/** The prompt's body and cache report under `options.promptCache`. */
const cached = (prompt: { readonly request: Record<string, unknown>; readonly report: Turn.Report }, on: boolean) =>
  on
    ? prompt
    : {
        request: withoutPromptCache(prompt.request),
        report: {
          ...prompt.report,
          cache: {
            ...prompt.report.cache,
            breakpoints: 0,
            promptCacheKey: null,
            // without breakpoints a breakpoint-only cache (Anthropic) caches nothing; the others still cache prefixes on their own
            ...(Providers.of(prompt.report.format).cacheRules.breakpoints ? { expectedReadTokens: 0, expectedWriteTokens: 0 } : {}),
          },
        },
      }

/**
 * `report.cache` with `miss`: the previous prompt's tokens this one will not
 * read, and why (`CacheMiss.expected`; the client's change told from a
 * digest of its own system prompt and tools against the previous turn's).
 */
const withMiss = (cache: Turn.Report["cache"], inputs: Carry.Inputs): Turn.Report["cache"] => {
  const previous = inputs.state.shape
  if (previous === undefined || cache.expectedReadTokens === undefined) return cache
  const miss = CacheMiss.expected({
    previousTokens: previous.systemTokens + previous.toolsTokens + previous.sent.reduce((n, m) => n + m.tokens, 0),
    expectedReadTokens: cache.expectedReadTokens,
    reason: cache.reason,
    clientChanged:
      previous.clientKey === undefined
        ? undefined
        : previous.clientKey !== CacheMiss.clientKey(inputs.normalized.system, inputs.normalized.tools),
    minCacheableTokens: inputs.prices.minCacheableTokens,
  })
  return miss === undefined ? cache : { ...cache, miss }
}

export const stage: Carry.Stage = {
  name: "reply",
  run: (carry) => {
    const tools = Carry.section(carry, "tools")
    const loop = Carry.section(carry, "loop")
    const { view, decision } = Carry.section(carry, "compaction")
    const built = cached(Carry.section(carry, "prompt"), carry.inputs.options.promptCache)
    const prompt = carry.inputs.options.promptCache
      ? { ...built, report: { ...built.report, cache: withMiss(built.report.cache, carry.inputs) } }
      : built
    const { memory, learnings } = Carry.section(carry, "memory")
    const reply: Turn.TurnReply = {
      ok: true,
      turnId: carry.inputs.request.turnId,
      request: prompt.request,
      report: {
        ...prompt.report,
        loop: loop.report,
        ...(decision === undefined
          ? {}
          : {
              compaction: {
                summary:
                  view.summary === undefined
                    ? null
                    : {
                        coversFromSeq: view.summary.coversFromSeq,
                        coversToSeq: view.summary.coversToSeq,
                        mode: view.summary.mode,
                        depth: view.summary.depth,
                        ...(view.summary.block === undefined ? {} : { writtenBy: "provider" as const }),
                      },
                trigger: decision.trigger,
                utilization: decision.utilization,
              },
            }),
        ...(view.boundary === undefined
          ? {}
          : {
              providerCompaction: {
                format: view.boundary.format,
                seq: view.boundary.seq,
                notSent: view.boundary.index,
                summarySuperseded: view.given !== undefined && view.summary === undefined,
              },
            }),
        virtualCalls: tools.virtualCalls,
        waste: Waste.report(tools.waste),
        ...(memory === undefined ? {} : { memory: memory.report }),
        ...(learnings === undefined || learnings.text === ""
          ? {}
          : { learnings: { injected: learnings.injected, tokens: learnings.tokens, budget: learnings.budget } }),
      },
    }
    return Carry.next({ ...carry, reply })
  },
}
