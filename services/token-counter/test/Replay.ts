/**
 * Replayed workloads for the tests: the tau-bench airline sessions in the
 * neutral conversation model, turn by turn (`@ctxd/testing` TauReplay, shared
 * with the bench), and the fake provider's ground truth for a whole prompt in
 * each provider's format.
 */
import { Models, RenderGemini, RenderResponses } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import { FakeProvider, TauReplay } from "@ctxd/testing"
import { LocalCounter } from "@ctxd/tokens"
import { Effect } from "effect"

export type Session = TauReplay.Session

export const { MODEL, tauBench, render, groundTruth } = TauReplay
export const OPENAI_MODEL = { provider: "openai", name: "gpt-5" } as const
export const GEMINI_MODEL = { provider: "google", name: "gemini-2.5-flash" } as const

/** A typical bundled session, normalized: tau-airline-19-3 (15 turns, 7 tool calls and their results). */
export const typical = (): Session => TauReplay.session("tau-airline-19-3")

/** The OpenAI Responses body ctxd would send for this prompt (the real renderer). */
export const renderResponses = (session: Session, messages: ReadonlyArray<Conversation.Message>): Record<string, unknown> =>
  RenderResponses.render({
    model: Models.resolve(OPENAI_MODEL),
    system: session.system,
    tools: session.tools,
    messages,
    tenant: "t",
    session: session.id,
  }).body

/** The fake provider's count of that body: what `input_tokens` answers and what a response bills. */
export const groundTruthResponses = (session: Session, messages: ReadonlyArray<Conversation.Message>): number =>
  FakeProvider.countRequestTokens("openai-responses", renderResponses(session, messages))

/** The `@google/genai` parameters ctxd would send for this prompt (the real renderer). */
export const renderGemini = (
  session: Session,
  messages: ReadonlyArray<Conversation.Message>,
  model: string = GEMINI_MODEL.name,
): Record<string, unknown> =>
  RenderGemini.render({
    model: Models.resolve({ provider: "google", name: model }),
    system: session.system,
    tools: session.tools,
    messages,
  }).body

/** The fake provider's count of that body: what `countTokens` answers and what a response bills. */
export const groundTruthGemini = (session: Session, messages: ReadonlyArray<Conversation.Message>, model?: string): number =>
  FakeProvider.countRequestTokens("gemini", renderGemini(session, messages, model))

/**
 * Loads the vocabularies a test's counts need (both tiktoken encodings, the
 * fake provider's Claude BPE) and parses the workload: each takes seconds of
 * blocking CPU on a loaded machine the first time, which belongs in a
 * `beforeAll` (the worker warms up before it serves, too), not inside a
 * request timeout or a count call's deadline.
 */
export const warmUp = (): void => {
  const local = LocalCounter.make({ backend: "tiktoken" })
  for (const encoding of ["o200k_base", "cl100k_base"] as const) local.countText("warm up", encoding)
  FakeProvider.countTextTokens("warm up")
  typical()
}

/**
 * Replays `sessions` turn by turn through `countTurn` and lists where the
 * segment counts do not add up: an approximate batch, a count per message
 * missing, or system + tools + the history's counts so far differing from
 * `truth(session, history)` (the provider's count of the whole prompt).
 */
export const segmentMismatches = <E>(
  sessions: ReadonlyArray<Session>,
  countTurn: (
    session: Session,
    messages: ReadonlyArray<Conversation.Message>,
  ) => Effect.Effect<
    {
      readonly systemTokens: number
      readonly toolsTokens: number
      readonly messageTokens: ReadonlyArray<number>
      readonly approximate: boolean
    },
    E
  >,
  truth: (session: Session, history: ReadonlyArray<Conversation.Message>) => number,
): Effect.Effect<Array<string>, E> =>
  Effect.gen(function* () {
    const problems: Array<string> = []
    for (const session of sessions) {
      const history: Array<Conversation.Message> = []
      let historyTokens = 0
      for (const [k, messages] of session.turns.entries()) {
        const counts = yield* countTurn(session, messages)
        if (counts.approximate) problems.push(`${session.id} turn ${k}: approximate`)
        if (counts.messageTokens.length !== messages.length)
          problems.push(`${session.id} turn ${k}: ${counts.messageTokens.length} counts for ${messages.length} messages`)
        history.push(...messages)
        historyTokens += counts.messageTokens.reduce((a, b) => a + b, 0)
        const total = counts.systemTokens + counts.toolsTokens + historyTokens
        const expected = truth(session, history)
        if (total !== expected) problems.push(`${session.id} turn ${k}: ${total} counted, ${expected} whole`)
      }
    }
    return problems
  })
