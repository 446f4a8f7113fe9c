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
import { type CachePlanner, CostModel, Pipeline } from "@ctxd/context"
import * as Carry from "./Carry.ts"

/**
 * Turns a session is expected to go on for, by default: half as many as it
 * has had (at least 1). Conservative on purpose: an edit that does not pay
 * back before the session ends costs more than doing nothing, and most
 * sessions are short; a long session earns its edits as it goes on.
 */
export const expectedTurns = (turnsSoFar: number): number => Math.max(1, Math.floor(turnsSoFar / 2))

/**
 * The cache planner's inputs for this turn: the model's prices (the
 * configured table, `AssemblerConfig.prices`: read and write multipliers,
 * the default tier's TTL, the minimum cacheable prefix), the previous prompt
 * while the view is the same, whether the cache has gone cold since the
 * previous turn, and how long the session is expected to go on.
 */
export const cachePlan = (inputs: Carry.Inputs, sameView: boolean): CachePlanner.Plan => {
  const { state, options, prices, now } = inputs
  const tier = CostModel.tier(prices)
  const ttlSeconds = options.cache.ttlSeconds ?? tier.ttlSeconds
  return {
    previous: sameView ? state.shape : undefined,
    viewChanged: !sameView && state.shape !== undefined,
    read: prices.cacheReadMultiplier,
    write: tier.writeMultiplier,
    expectedTurns: options.cache.expectedTurns ?? expectedTurns(state.turns),
    cold: state.lastAt !== undefined && now - state.lastAt > ttlSeconds * 1000,
    ttlSeconds,
    minCacheable: prices.minCacheableTokens,
  }
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
