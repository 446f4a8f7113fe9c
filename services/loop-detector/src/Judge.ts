/**
 * The pure half of the optional LLM judge: which findings are borderline
 * (one repeat short of their threshold), the question put to the model, and
 * reading its answer. The call itself is the assembler's (through the
 * summarizer's provider client), only when `loop.judge.enabled` is set.
 */
import type { Conversation } from "@ctxd/contracts"
import type * as LoopConfig from "./LoopConfig.ts"
import * as Detector from "./Detector.ts"
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
