/**
 * The optional LLM judge of the loop detector, as a port: asks a model
 * (the session's, or `loop.judge.model`) through the summarizer's provider
 * client whether the agent is making progress. Bounded in time; a failure
 * is an unanswered judge and flags nothing.
 */
import type { Conversation, Loop, Turn } from "@ctxd/contracts"
import { type Detector, Judge } from "@ctxd/loop-detector"
import { Llm } from "@ctxd/summarizer"
import { Context, Effect, Layer } from "effect"

export type Answer = NonNullable<Loop.Report["judge"]>

/** What the judge is asked: the borderline verdict and the recent messages. */
export interface Question {
  readonly model: Turn.Model
  readonly judgeModel: string | undefined
  readonly borderline: Detector.Verdict
  readonly recent: ReadonlyArray<Conversation.Message>
}

export interface LoopJudgeApi {
  readonly ask: (input: Question) => Effect.Effect<Answer>
}

export class LoopJudge extends Context.Tag("@ctxd/assembler/LoopJudge")<LoopJudge, LoopJudgeApi>() {}

/** How long the judge may take (it is on the turn's path when enabled). */
const TIMEOUT = "10 seconds"

/** The judge through the summarizer's provider clients. */
export const layer: Layer.Layer<LoopJudge, never, Llm.Llm> = Layer.effect(
  LoopJudge,
  Effect.map(Llm.Llm, (llm) => ({
    ask: ({ model, judgeModel, borderline, recent }) => {
      const name = judgeModel ?? model.name
      return llm
        .client(model.provider)
        .complete({ model: name, system: Judge.SYSTEM, prompt: Judge.prompt(borderline, recent), maxTokens: 200, json: true })
        .pipe(
          Effect.timeout(TIMEOUT),
          Effect.map((completion): Answer => {
            const { progress, reason } = Judge.parse(completion.text)
            return {
              answered: progress !== undefined,
              progress: progress ?? null,
              reason,
              model: name,
              tokensIn: completion.inputTokens,
              tokensOut: completion.outputTokens,
            }
          }),
          Effect.catchAll((error) =>
            Effect.succeed<Answer>({
              answered: false,
              progress: null,
              reason: `judge failed: ${error._tag === "TimeoutException" ? "timeout" : error.message}`,
              model: name,
              tokensIn: 0,
              tokensOut: 0,
            }),
          ),
        )
    },
  })),
)
