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
import { type CachePlanner, CostModel, Pipeline, SessionLengths } from "@ctxd/context"
import * as SessionState from "../SessionState.ts"
import * as Carry from "./Carry.ts"

/**
 * Turns the session is expected to go on for after this one: the request's
 * `expectedTurns` when it names one; otherwise, from the tenant's agent's
 * history of session lengths, the mean of what the sessions that got as far
 * went on for (`SessionLengths.estimate`, measured against the session's
 * turns once `fresh` is stored); when fewer than 20 got as far (or the
 * history is unknown), the rule of thumb: half the turns the session has had
 * before this one, at least 1.
 */
export const expectedTurns = (inputs: Carry.Inputs, fresh: ReadonlyArray<SessionState.Row>): number =>
  inputs.options.cache.expectedTurns ??
  SessionLengths.expectedTurns(inputs.lengths, SessionState.turnsAfter(inputs.state, fresh), SessionLengths.rule(inputs.state.turns))

/**
 * The cache planner's inputs for this turn: the model's prices (`CostModel`),
 * the previous prompt while the view is the same, whether the cache has gone
 * cold since the previous turn, and how long the session is expected to go on
 * ({@link expectedTurns}; `fresh`: this turn's new rows).
 */
export const cachePlan = (inputs: Carry.Inputs, sameView: boolean, fresh: ReadonlyArray<SessionState.Row>): CachePlanner.Plan => {
  const { state, options, model, now } = inputs
  const prices = CostModel.lookup(model.name)
  const tier = CostModel.tier(prices)
  const ttlSeconds = options.cache.ttlSeconds ?? tier.ttlSeconds
  return {
    previous: sameView ? state.shape : undefined,
    viewChanged: !sameView && state.shape !== undefined,
    read: prices.cacheReadMultiplier,
    write: tier.writeMultiplier,
    expectedTurns: expectedTurns(inputs, fresh),
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
    const { count, fresh } = Carry.section(carry, "count")
    const loop = Carry.section(carry, "loop")
    const { view, sameView } = Carry.section(carry, "compaction")
    const plan = cachePlan(carry.inputs, sameView, fresh)
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
