/**
 * Stage `prompt`: the context pipeline of `@ctxd/context` (window →
 * compress → mask → budget → prune → render → proactive) over the view,
 * with what the session remembers for cache stability (landmarks, mask
 * grid, proactive rung) while the view is the same.
 *
 * The first prompt of a session that masks a tool result is run again with
 * the virtual `recall` tool added (prepared by `tools`, which this stage
 * then updates): its tool list changes in the turn whose prefix masking
 * changes anyway, and stays so. That one turn counts the added tool locally.
 */
import { CachePlanner, CostModel, Pipeline } from "@ctxd/context"
import * as Carry from "./Carry.ts"

/**
 * Turns a session is expected to go on for, by default: half as many as it
 * has had (at least 1). Conservative on purpose: an edit that does not pay
 * back before the session ends costs more than doing nothing, and most
 * sessions are short; a long session earns its edits as it goes on.
 */
export const expectedTurns = (turnsSoFar: number): number => Math.max(1, Math.floor(turnsSoFar / 2))

/**
 * The cache planner's inputs for this turn: the model's prices (`CostModel`),
 * the previous prompt while the view is the same, whether the cache has gone
 * cold since the previous turn (under the TTL that prompt was sent with), how
 * long the session is expected to go on, and the cache tier: with
 * `options.cacheTtlSeconds` that TTL under the model's default tier; else,
 * for Anthropic, 5 minutes or 1 hour, whichever the session's observed gaps
 * make cheaper (`CachePlanner.chooseTier`).
 */
export const cachePlan = (inputs: Carry.Inputs, sameView: boolean): CachePlanner.Plan => {
  const { state, options, model, now, request } = inputs
  const prices = CostModel.lookup(model.name)
  const tier = options.cache.ttlSeconds !== undefined ? CostModel.tier(prices) : tierFor(request.format, prices, state)
  const ttlSeconds = options.cache.ttlSeconds ?? tier.ttlSeconds
  const previousTtl = state.shape?.ttlSeconds ?? ttlSeconds
  return {
    previous: sameView ? state.shape : undefined,
    viewChanged: !sameView && state.shape !== undefined,
    read: prices.cacheReadMultiplier,
    write: tier.writeMultiplier,
    expectedTurns: options.cache.expectedTurns ?? expectedTurns(state.turns),
    cold: state.lastAt !== undefined && now - state.lastAt > previousTtl * 1000,
    ttlSeconds,
    minCacheable: prices.minCacheableTokens,
    tier: tier.name,
  }
}

/** The tiers a request can ask for: Anthropic breakpoints say `5m` or `1h`; elsewhere the model's default only. */
const tierFor = (format: string, prices: CostModel.ModelPrices, state: Carry.Inputs["state"]): CostModel.CacheTier => {
  const expressible = format === "anthropic" ? prices.tiers.filter((t) => t.name === "5m" || t.name === "1h") : []
  if (expressible.length < 2) return CostModel.tier(prices)
  const prompt = state.shape?.total ?? 0
  return CachePlanner.chooseTier(expressible, prices.cacheReadMultiplier, state.gaps, prompt, state.tokens / Math.max(1, state.turns))
}

export const stage: Carry.Stage = {
  name: "prompt",
  run: (carry) => {
    const { tenant, session, request, model, options, state, local } = carry.inputs
    const tools = Carry.section(carry, "tools")
    const { count } = Carry.section(carry, "count")
    const loop = Carry.section(carry, "loop")
    const { view, sameView } = Carry.section(carry, "compaction")
    const plan = cachePlan(carry.inputs, sameView)
    const run = (sent: typeof tools.sent, toolsTokens: number) => Pipeline.run({
      tenant,
      session,
      format: request.format,
      model,
      system: tools.system,
      systemTokens: count.systemTokens,
      tools: sent,
      toolsTokens,
      toolOrder: "given",
      countTools: local.countTools,
      countText: local.countText,
      history: view.messages,
      landmarks: sameView ? state.landmarks : undefined,
      maskGrid: sameView ? state.maskGrid : undefined,
      proactiveRung: state.rung,
      cachePlan: plan,
      storedTokens: count.messageTokens.reduce((sum, n) => sum + n, state.tokens),
      trailer: loop.trailer,
      options: options.pipeline,
      counter: {
        backend: count.backend,
        encoding: count.encoding,
        exact: count.exact,
        calibration: count.calibration,
        ...(count.fallback === undefined ? {} : { fallback: count.fallback }),
      },
    })
    const prompt = run(tools.sent, count.toolsTokens)
    const alternative = tools.recall.ifMasked
    if (alternative === undefined || (prompt.report.masking?.masked ?? 0) === 0) return Carry.next({ ...carry, prompt })
    const added = Math.max(0, local.countTools(alternative.sent) - local.countTools(tools.sent))
    // Offering `recall` changes the tool list, and so the whole cached prefix: it waits for a
    // moment when that prefix is lost anyway (the cache is cold, or the system or the tools change
    // this turn); until then masked references go out, and ctxd still answers a `recall` call.
    const reason = prompt.report.cache.reason
    const free = plan.cold || plan.previous === undefined || reason === "tools" || reason === "system" || reason === "summary"
    if (!free) return Carry.next({ ...carry, prompt })
    const withRecall = run(alternative.sent, count.toolsTokens + added)
    return Carry.next({
      ...carry,
      tools: { ...tools, sent: alternative.sent, waste: alternative.waste, recall: { offered: true } },
      prompt: withRecall,
    })
  },
}
