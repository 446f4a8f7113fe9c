/**
 * ctxd's side of the economics bench: the request body ctxd sends for each
 * turn of a session. THIS is the one function to swap when the pipeline
 * changes (the edit planner, `Pipeline`): it gets the whole session — turns,
 * their times, the model and its prices — and returns one body per turn, so
 * a planner that reads the clock and the price table fits the same shape.
 *
 * Today it runs the worker's current pure pipeline turn by turn exactly as
 * `bench/Optimizations.ts` does: `Assemble.assemble` with
 * `Assemble.optimizationDefaults` (truncate schemas, masking K 3 / batch
 * 2,000, proactive 0.85; window 40 / step 20), landmarks, mask grid and
 * proactive rung carried from turn to turn; tools sorted by name; tiktoken
 * counts. The model's window is 1,000,000 tokens (as in the optimizations
 * bench) so the budget never forces a cut the peers do not get.
 */
import { Assemble, type CostModel, type Models, type Window } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import type { Counting } from "./Blocks.ts"

/** One session as the bench replays it. */
export interface Session {
  readonly id: string
  readonly system: ReadonlyArray<Conversation.SystemSection>
  readonly tools: ReadonlyArray<Conversation.Tool>
  /** Per model call, the messages that arrived since the previous call. */
  readonly turns: ReadonlyArray<ReadonlyArray<Conversation.Message>>
}

export interface Input {
  readonly session: Session
  /** Seconds since the session started, per turn (the gap model's clock). */
  readonly times: ReadonlyArray<number>
  readonly format: "anthropic" | "openai"
  readonly model: Models.ResolvedModel
  readonly prices: CostModel.ModelPrices
  readonly count: Counting
}

const options = Assemble.resolveOptions({ ...Assemble.optimizationDefaults })

/** The body ctxd sends per turn (today: the current pipeline, blind to times and prices). */
export const bodies = (input: Input): Array<Record<string, unknown>> => {
  const { session, count, model, format } = input
  const history: Array<Assemble.StoredMessage> = []
  const toolsTokens = count.tools(session.tools)
  const systemTokens = count.system(session.system)
  let landmarks: Window.Landmarks | undefined
  let maskGrid: Assemble.Assembled["maskGrid"]
  let proactiveRung: number | undefined
  const out: Array<Record<string, unknown>> = []
  for (const messages of session.turns) {
    for (const message of messages) history.push({ seq: history.length + 1, message, tokens: count.message(message) })
    const assembled = Assemble.assemble({
      tenant: "bench",
      session: session.id,
      format,
      model,
      system: session.system,
      systemTokens,
      tools: session.tools,
      toolsTokens,
      history,
      options,
      counter: { backend: "tiktoken", encoding: count.encoding, exact: false, calibration: 1 },
      landmarks,
      maskGrid,
      proactiveRung,
      toolOrder: "name",
      countTools: count.tools,
      countText: count.text,
    })
    landmarks = assembled.landmarks
    maskGrid = assembled.maskGrid
    proactiveRung = assembled.proactiveRung
    out.push(assembled.request)
  }
  return out
}
