/**
 * Stage `compaction`: the history as the model sees it under the session's
 * live summary (the summary pair, then the messages after it; the previous
 * turn's view is extended rather than rebuilt while the summary stays), and
 * the compaction decision on the pre-flight estimate: at the soft threshold
 * a background job is scheduled (once until it lands); only a prompt that
 * would exceed the window blocks on a compaction now (I/O: asked of the
 * shell, which re-reads the live summary; the turn then goes on with or
 * without the new summary). A summary that landed in the background is not
 * swapped in here: the previous view, extended, goes along as `held`, and the
 * prompt stage swaps when it pays (`CachePlanner.swapSummary`).
 *
 * A provider compaction of the request's format in the history is a
 * boundary (`View.applySummary`): the view starts at it, a summary made
 * before it is superseded, and the job's `afterSeq` (what the view already
 * folds) and `format` keep the compactor's cut after it.
 */
import { Plan, ProviderSummary, View } from "@ctxd/compactor"
import * as Carry from "./Carry.ts"

export const stage: Carry.Stage = {
  name: "compaction",
  run: (carry) => {
    const { tenant, session, request, state, model, local } = carry.inputs
    // `options.compaction: false`: no decision, so nothing scheduled and nothing to wait for
    const thresholds = carry.inputs.options.compaction ? carry.inputs.thresholds : undefined
    const { count, fresh } = Carry.section(carry, "count")
    const history = state.messages.concat(fresh)
    const summary = state.summary
    const format = request.format
    // the view's `given` is the summary it was made with, applied or superseded by a provider compaction
    const sameSummary = state.view !== undefined && (state.view.given ?? state.view.summary) === summary && state.view.format === format
    const view = sameSummary ? View.extend(state.view!, history) : View.applySummary(history, summary, local.countMessage, format)
    const fixedTokens = count.systemTokens + count.toolsTokens
    const decided =
      carry.answers.compacted ??
      (thresholds === undefined ? undefined : Plan.decide(Plan.estimate(view.messages, fixedTokens), model.effectiveWindow, thresholds))
    const backend = ProviderSummary.backendFor(carry.inputs.options.summarizerBackend, model.name, format)
    const job = { tenant, session, afterSeq: View.foldedThrough(view), model: request.model, fixedTokens, format, backend }
    if (decided?.trigger === "blocking" && carry.answers.compacted === undefined) {
      return Carry.need({ _tag: "CompactNow", job: { ...job, trigger: "over_window" }, decision: decided })
    }
    const schedule =
      decided?.trigger === "background" && state.compactionPending === undefined
        ? { ...job, trigger: decided.reason === "hard" ? ("hard" as const) : ("soft" as const) }
        : undefined
    // Landmarks and mask grids are positions in the view: a new summary starts them afresh.
    const sameView = state.view !== undefined && state.view.key === view.key
    // a newer summary landed: swapping it in is the prompt stage's decision, unless this turn had to compact;
    // a provider-written one goes in at once, as the background compaction docs tell ("send the swapped history
    // on the first request after the block arrives, so that thinking produced while the summary was being
    // written stays valid": https://platform.claude.com/docs/en/build-with-claude/compaction-background)
    const held =
      !sameView &&
      (view.summary?.block === undefined || format !== View.BLOCK_FORMAT) &&
      state.view !== undefined &&
      carry.answers.compacted === undefined &&
      state.view.format === format &&
      state.view.boundary?.seq === view.boundary?.seq &&
      (state.view.summary?.coversToSeq ?? 0) < (view.summary?.coversToSeq ?? 0)
        ? View.extend(state.view, history)
        : undefined
    return Carry.next({ ...carry, compaction: { view, decision: decided, schedule, sameView, held } })
  },
}
