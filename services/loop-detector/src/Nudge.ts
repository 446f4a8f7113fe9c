/**
 * What the assembler does with a verdict under the tenant/agent policy, and
 * the nudge text. The nudge goes at the very end of the context, after the
 * cached prefix, so the prompt cache is untouched; the text depends only on
 * the verdict (no clock, no counters beyond the verdict's own), so the same
 * loop state gives byte-identical text.
 */
import type { Conversation, Loop } from "@ctxd/contracts"
import type * as LoopConfig from "./LoopConfig.ts"

/** The line every nudge starts with, so runtimes and reports can recognise one. */
export const HEADER = "[ctxd loop check] You are repeating yourself without making progress:"

const ADVICE: Record<Loop.Pattern, string> = {
  repeated_call: "calling it again will return the same thing.",
  repeated_error: "retrying it unchanged will fail again; read the error and change the call.",
  alternation: "going around this cycle again will not give you anything new.",
  monologue: "act (call a tool) or ask the user instead of writing more messages.",
  context_overflow: "ask for smaller outputs (narrower queries, fewer lines) or summarize what you already have.",
}

const CLOSING =
  "Do not repeat it. Change your approach (a different tool, different arguments, or work with the results you already have), or ask the user how to proceed."

/**
 * A short message naming each loop (the call with its arguments, how many
 * times) and telling the model to change approach or ask the user. Empty
 * string when the verdict has no findings.
 */
export const nudgeText = (verdict: Loop.Verdict): string => {
  if (!verdict.looping || verdict.findings.length === 0) return ""
  const lines = verdict.findings.map((f) => `- ${f.detail}: ${ADVICE[f.pattern]}`)
  return [HEADER, ...lines, CLOSING].join("\n")
}

/**
 * The nudge as a message to append after the last message: a `user`
 * message, the one role every provider accepts at the end (renderers merge
 * it with a preceding user/tool-result turn where the format needs that).
 */
export const nudgeMessage = (verdict: Loop.Verdict): Conversation.Message | undefined => {
  const text = nudgeText(verdict)
  return text === "" ? undefined : { role: "user", parts: [{ type: "text", text }] }
}

/** What the policy asks for: nothing, a flag in the report, or a flag plus the nudge message. */
export type Action =
  { readonly kind: "none" } | { readonly kind: "escalate" } | { readonly kind: "nudge"; readonly message: Conversation.Message }

/**
 * The action for a verdict under a policy (default `nudge`): `off` or no loop
 * gives `none`; `escalate` gives `escalate`; `nudge` gives the message from
 * {@link nudgeMessage}. The verdict itself goes into the turn report either way.
 */
export const action = (verdict: Loop.Verdict, policy: LoopConfig.Policy = "nudge"): Action => {
  if (policy === "off" || !verdict.looping) return { kind: "none" }
  if (policy === "escalate") return { kind: "escalate" }
  const message = nudgeMessage(verdict)
  return message === undefined ? { kind: "none" } : { kind: "nudge", message }
}
