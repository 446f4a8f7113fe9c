/**
 * ctxd's side of the economics bench: the request body ctxd sends for each
 * turn of a session, from the worker's own turn stages run in-process
 * (`InProcessTurns`, the worker's default options; the model's window is
 * 1,000,000 tokens, as in the optimizations bench, so the budget never
 * forces a cut the peers do not get). It gets the whole session — turns,
 * their times, the model and its prices — and returns one body per turn.
 */
import { InProcessTurns } from "@ctxd/assembler"
import type { CostModel, Models } from "@ctxd/context"
import type { Conversation, Turn } from "@ctxd/contracts"
import type { MemoryStore } from "@ctxd/db"
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
  /** The agent's memory store, searched by the `memory` stage (absent: no memories), and the request's options. */
  readonly memory?: MemoryStore.MemoryStoreService | undefined
  readonly options?: Turn.Options | undefined
  /** Sees each turn's reply (its report). */
  readonly onReply?: ((reply: Turn.TurnReply) => void) | undefined
}

/** The in-process turns' local counter over the bench's counting. */
export const localCounter = (count: Counting) => ({
  encoding: count.encoding,
  countText: count.text,
  countTools: count.tools,
  countMessage: count.message,
  countSystem: count.system,
})

/** The body ctxd sends per turn. */
export const bodies = async (input: Input): Promise<Array<Record<string, unknown>>> => {
  const { session, count, model, format } = input
  const local = localCounter(count)
  const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local), memory: input.memory })
  const out: Array<Record<string, unknown>> = []
  try {
    for (const [k, messages] of session.turns.entries()) {
      const request = {
        turnId: `t${k}`,
        format,
        model: { provider: model.provider, name: model.name, contextWindow: 1_000_000 },
        messages: [],
        ...(input.options === undefined ? {} : { options: input.options }),
      } as const
      const normalized = {
        system: session.system,
        tools: session.tools,
        messages: messages.map((message, i) => ({ message, sourceIndex: i })),
      }
      const reply = await turns.turn("bench", session.id, request, normalized, input.times[k]! * 1000)
      input.onReply?.(reply)
      out.push(reply.request)
    }
  } finally {
    await turns.dispose()
  }
  return out
}
