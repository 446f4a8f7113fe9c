/**
 * Stage `tools`: what the model may call this turn. The knowledge index
 * joins the system sections (with `load_knowledge`); on-demand toolsets are
 * rebuilt from the history once per session and `load_toolset` /
 * `load_knowledge` calls in the new messages are answered by ctxd itself
 * (their results are stored like any other); the tools to send are selected
 * in cache-stable order; tools sent and called are recorded for waste
 * detection.
 */
import { Knowledge, Toolsets, Waste } from "@ctxd/context"
import * as Carry from "./Carry.ts"

export const stage: Carry.Stage = {
  name: "tools",
  run: (carry) => {
    const { normalized, state, knowledge, options, local } = carry.inputs
    const context: Toolsets.Context = {
      tools: normalized.tools,
      config: options.toolsets,
      ...(knowledge.length === 0 ? {} : { knowledge }),
    }
    const index = Knowledge.section(knowledge)
    const loaded =
      state.toolsets ??
      Toolsets.replay(
        state.messages.map((m) => m.message),
        context,
      )
    const answered = Toolsets.answerVirtualCalls(
      normalized.messages.map((n) => n.message),
      loaded,
      context,
    )
    const sent = Toolsets.selectTools(normalized.tools, answered.state, options.toolsets, knowledge.length === 0 ? [] : [Knowledge.tool])
    return Carry.next({
      ...carry,
      tools: {
        system: index === undefined ? normalized.system : [...normalized.system, index],
        sent,
        messages: answered.messages,
        virtualCalls: answered.calls,
        toolsets: answered.state,
        waste: Waste.record(state.waste, sent, answered.messages, (tool) => local.countTools([tool])),
      },
    })
  },
}
