/** Test helpers: a local counter that counts a token per 4 characters (fast, deterministic, no tokenizer). */
import type { Conversation } from "@ctxd/contracts"

/** Tokens of `text`: one per 4 characters, rounded up. */
export const words = (text: string) => Math.ceil(text.length / 4)

/** A `InProcessTurns` local counter (and `countLocally`'s `countSystem`) counting with {@link words}. */
export const local = {
  encoding: "o200k_base",
  countText: words,
  countTools: (tools: ReadonlyArray<Conversation.Tool>) => words(JSON.stringify(tools)),
  countMessage: (m: Conversation.Message) => words(JSON.stringify(m.parts)),
  countSystem: (system: ReadonlyArray<Conversation.SystemSection>) => words(system.map((s) => s.text).join("")),
}
