/**
 * The tau-bench airline sessions (`Workloads.tauBenchSessions`) in the
 * neutral conversation model, turn by turn, and the fake provider's count of
 * the Anthropic body ctxd renders for a prompt: the ground truth the token
 * counter's tests and its bench measure against.
 */
import { Models, Normalize, RenderAnthropic } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import * as FakeProvider from "./FakeProvider.ts"
import * as Workloads from "./Workloads.ts"

export interface Session {
  readonly id: string
  readonly system: ReadonlyArray<Conversation.SystemSection>
  readonly tools: ReadonlyArray<Conversation.Tool>
  /** The new messages of each turn. */
  readonly turns: ReadonlyArray<ReadonlyArray<Conversation.Message>>
}

/** The model the replay renders for (Anthropic, so `count_tokens` applies). */
export const MODEL = { provider: "anthropic", name: "claude-sonnet-4-6" } as const

const normalized = (s: Workloads.ReplaySession): Session => ({
  id: s.id,
  system: Normalize.system(s.system),
  tools: Normalize.tools("openai", s.tools),
  turns: s.turns.map((t) => Normalize.fromOpenAI(t.messages)).filter((t) => t.length > 0),
})

/** The first `n` tau-bench sessions of `dir` (all by default; the bundled samples unless `dir` names another data set), normalized. */
export const tauBench = (n?: number, dir: string = Workloads.dataDir()): ReadonlyArray<Session> =>
  Workloads.tauBenchSessions(dir).slice(0, n).map(normalized)

/** The bundled tau-bench session `id` (`Workloads.tauBenchSession`), normalized. */
export const session = (id: string): Session => normalized(Workloads.tauBenchSession(id))

/** The Anthropic body ctxd would send for this prompt (the real renderer). */
export const render = (session: Session, messages: ReadonlyArray<Conversation.Message>): Record<string, unknown> =>
  RenderAnthropic.render({ model: Models.resolve(MODEL), system: session.system, tools: session.tools, messages }).body

/** The fake provider's count of that body: what `count_tokens` answers and what a response bills. */
export const groundTruth = (session: Session, messages: ReadonlyArray<Conversation.Message>): number =>
  FakeProvider.countRequestTokens("anthropic", render(session, messages))
