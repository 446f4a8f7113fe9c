/**
 * Stage `prompt`: the context pipeline of `@ctxd/context` (window →
 * compress → mask → budget → prune → render → proactive) over the view,
 * with what the session remembers for cache stability (landmarks, mask
 * grid, proactive rung) while the view is the same.
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
    const prompt = Pipeline.run({
      tenant,
      session,
      format: request.format,
      model,
      system: tools.system,
      systemTokens: count.systemTokens,
      tools: tools.sent,
      toolsTokens: count.toolsTokens,
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
    return Carry.next({ ...carry, prompt })
  },
}
