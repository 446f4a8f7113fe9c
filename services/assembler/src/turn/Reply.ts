/**
 * Stage `reply`: the success reply — the provider request body and the
 * report: the pipeline's, with the loop verdict, the compaction decision,
 * the provider compaction boundary applied, the virtual calls ctxd answered
 * and the session's tool waste.
 */
import { Waste } from "@ctxd/context"
import type { Turn } from "@ctxd/contracts"
import * as Carry from "./Carry.ts"

export const stage: Carry.Stage = {
  name: "reply",
  run: (carry) => {
    const tools = Carry.section(carry, "tools")
    const loop = Carry.section(carry, "loop")
    const { view, decision } = Carry.section(carry, "compaction")
    const prompt = Carry.section(carry, "prompt")
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
        ...(learnings === undefined || learnings.text === "" ? {} : { learnings: { injected: learnings.injected, tokens: learnings.tokens, budget: learnings.budget } }),
      },
    }
    return Carry.next({ ...carry, reply })
  },
}
