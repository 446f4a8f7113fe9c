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
import { Pipeline } from "@ctxd/context"
import * as Carry from "./Carry.ts"

export const stage: Carry.Stage = {
  name: "prompt",
  run: (carry) => {
    const { tenant, session, request, model, options, state, local } = carry.inputs
    const tools = Carry.section(carry, "tools")
    const { count } = Carry.section(carry, "count")
    const loop = Carry.section(carry, "loop")
    const { view, sameView } = Carry.section(carry, "compaction")
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
    return Carry.next({
      ...carry,
      tools: { ...tools, sent: alternative.sent, waste: alternative.waste, recall: { offered: true } },
      prompt: run(alternative.sent, count.toolsTokens + added),
    })
  },
}
