/**
 * The optional LLM judge of the loop detector, only asked when
 * `loop.judge.enabled` is set. The pure half: which findings are borderline
 * (one repeat short of their threshold), the question put to the model, and
 * reading its answer. The port ({@link Judge}, {@link layer}): asks a model
 * (the session's, or `loop.judge.model`) through the summarizer's provider
 * client whether the agent is making progress. Bounded in time; a failure is
 * an unanswered judge and flags nothing.
 */
import type { Conversation, Loop, Turn } from "@ctxd/contracts"
import { Llm } from "@ctxd/summarizer"
import { Context, Effect, Layer } from "effect"
import * as Detector from "./Detector.ts"
import type * as LoopConfig from "./LoopConfig.ts"
import type * as LoopState from "./LoopState.ts"

const lower = (threshold: number): number => (threshold === 0 ? 0 : Math.max(2, threshold - 1))

/** `config` with every threshold one lower (never below 2; 0 stays off). */
export const lowered = (config: LoopConfig.Config): LoopConfig.Config => ({
  ...config,
  repeatedCall: { threshold: lower(config.repeatedCall.threshold) },
  repeatedError: { threshold: lower(config.repeatedError.threshold) },
  alternation: { ...config.alternation, cycles: lower(config.alternation.cycles) },
  monologue: { threshold: lower(config.monologue.threshold) },
  contextOverflow: { ...config.contextOverflow, threshold: lower(config.contextOverflow.threshold) },
})

/** Findings one repeat short of `config`'s thresholds (none when the real verdict already loops). */
export const borderline = (state: LoopState.State, config: LoopConfig.Config): Detector.Verdict => {
  if (config.policy === "off" || Detector.verdict(state, config).looping) return Detector.none
  return Detector.verdict(state, lowered(config))
}

/** The judge's instructions. */
export const SYSTEM =
  "You review an AI agent's recent steps. Decide whether it is making progress toward its task or repeating itself without progress. " +
  'Answer with one JSON object only: {"progress": true|false, "reason": "<one sentence>"}.'

const textOf = (message: Conversation.Message): string =>
  message.parts
    .map((p) =>
      p.type === "text"
        ? p.text
        : p.type === "tool_call"
          ? `call ${p.name}(${JSON.stringify(p.input)})`
          : p.type === "tool_result"
            ? `result${p.isError ? " (error)" : ""}: ${p.content.map((c) => (c.type === "text" ? c.text : "[image]")).join(" ")}`
            : "",
    )
    .filter((t) => t !== "")
    .join("\n")

/** The question: what looks repetitive, and the recent messages (each cut to `maxChars`). */
export const prompt = (verdict: Detector.Verdict, recent: ReadonlyArray<Conversation.Message>, maxChars = 600): string => {
  const lines = recent.map((m) => {
    const text = textOf(m)
    return `[${m.role}] ${text.length > maxChars ? `${text.slice(0, maxChars)}…` : text}`
  })
  return [
    "Possible repetition:",
    ...verdict.findings.map((f) => `- ${f.detail}`),
    "",
    "Recent messages, oldest first:",
    ...lines,
    "",
    "Is the agent making progress?",
  ].join("\n")
}

/** Reads the model's answer: `progress` (undefined when unreadable) and the reason. */
export const parse = (text: string): { readonly progress: boolean | undefined; readonly reason: string } => {
  const match = /\{[\s\S]*\}/.exec(text)
  if (match !== null) {
    try {
      const value = JSON.parse(match[0]) as { progress?: unknown; reason?: unknown }
      if (typeof value.progress === "boolean") {
        return { progress: value.progress, reason: typeof value.reason === "string" ? value.reason : "" }
      }
    } catch {
      // not JSON: fall through
    }
  }
  return { progress: undefined, reason: `unreadable answer: ${text.slice(0, 200)}` }
}

/** The judge's answer, as it goes into the turn report. */
export type Answer = NonNullable<Loop.Report["judge"]>

/** What the judge is asked: the borderline verdict and the recent messages. */
export interface Question {
  readonly model: Turn.Model
  readonly judgeModel: string | undefined
  readonly borderline: Detector.Verdict
  readonly recent: ReadonlyArray<Conversation.Message>
  /** On whose behalf (the provider key: `ProviderKeys`); undefined: a tenant-less call. */
  readonly tenant?: string | undefined
}

/** The port. */
export interface JudgeService {
  readonly ask: (input: Question) => Effect.Effect<Answer>
}

/** The loop judge of this process. */
export class Judge extends Context.Tag("@ctxd/loop-detector/Judge")<Judge, JudgeService>() {}

/** How long the judge may take (it is on the turn's path when enabled). */
const TIMEOUT = "10 seconds"

/** The judge through the summarizer's provider clients. */
export const layer: Layer.Layer<Judge, never, Llm.Llm> = Layer.effect(
  Judge,
  Effect.map(Llm.Llm, (llm) => ({
    ask: ({ model, judgeModel, borderline, recent, tenant }) => {
      const name = judgeModel ?? model.name
      return llm
        .client(model.provider, tenant)
        .complete({ model: name, system: SYSTEM, prompt: prompt(borderline, recent), maxTokens: 200, json: true })
        .pipe(
          Effect.timeout(TIMEOUT),
          Effect.map((completion): Answer => {
            const { progress, reason } = parse(completion.text)
            return {
              answered: progress !== undefined,
              progress: progress ?? null,
              reason,
              model: name,
              tokensIn: completion.inputTokens,
              tokensOut: completion.outputTokens,
            }
          }),
          Effect.catchAll((error) => {
            // a provider failure's message is its status, error type and body size (never the body)
            const why = error._tag === "TimeoutException" ? "timeout" : `${error.provider} ${error.reason}: ${error.message}`
            return Effect.as(Effect.logDebug(`loop judge failed: ${why}`), {
              answered: false,
              progress: null,
              reason: `judge failed: ${why}`,
              model: name,
              tokensIn: 0,
              tokensOut: 0,
            } satisfies Answer)
          }),
        )
    },
  })),
)
