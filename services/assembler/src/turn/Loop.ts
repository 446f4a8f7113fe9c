/**
 * Stage `loop`: folds the new messages into the session's loop state
 * (incremental), and judges it: repeated calls, action → error, A-B-A-B,
 * monologue. Under the `nudge` policy a flagged loop adds a note after the
 * last cache breakpoint (never stored). With the judge enabled, a borderline
 * case asks a model whether the agent makes progress (I/O: asked of the
 * shell); "no progress" flags the loop now rather than one repeat later.
 */
import type { Loop as LoopWire } from "@ctxd/contracts"
import { Detector, Judge, Nudge } from "@ctxd/loop-detector"
import * as Carry from "./Carry.ts"

/** Recent messages the loop judge sees: 20. */
export const JUDGE_MESSAGES = 20

export const stage: Carry.Stage = {
  name: "loop",
  run: (carry) => {
    const { state, options, request, local } = carry.inputs
    const { fresh } = Carry.section(carry, "count")
    const config = options.loop
    const folded = Detector.observe(
      state.loop,
      fresh.map((r) => r.message),
      state.messages.length,
    )
    let verdict = config.policy === "off" ? Detector.none : Detector.verdict(folded, config)
    const judged = carry.answers.judge
    if (options.judge.enabled) {
      const borderline = Judge.borderline(folded, config)
      if (borderline.looping) {
        if (judged === undefined) {
          const recent = state.messages.slice(-JUDGE_MESSAGES).concat(fresh).slice(-JUDGE_MESSAGES)
          return Carry.need({
            _tag: "Judge",
            input: { model: request.model, judgeModel: options.judge.model, borderline, recent: recent.map((r) => r.message) },
          })
        }
        if (judged.progress === false) verdict = borderline
      }
    }
    const action = Nudge.action(verdict, config.policy)
    const report: LoopWire.Report = {
      policy: config.policy,
      verdict,
      nudged: action.kind === "nudge",
      escalate: verdict.looping && config.policy !== "off",
      ...(judged === undefined ? {} : { judge: judged }),
    }
    const text = action.kind === "nudge" ? Nudge.nudgeText(verdict) : undefined
    const trailer = text === undefined ? undefined : { text, tokens: local.countText(text) }
    return Carry.next({ ...carry, loop: { report, state: folded, trailer } })
  },
}
