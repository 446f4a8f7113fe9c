/**
 * Meeting a client's whole history (`history: "client"`, what the gateway
 * sends: clients resend everything on every call) with the stored one, by
 * content, not by count: the stored messages, in order, must be the
 * client's first messages, message for message (as the store keeps them:
 * the neutral form, compared key order aside, since Postgres `jsonb` keeps
 * keys in its own order). Messages ctxd added to the stored history itself
 * (mid-conversation system notes: memory, learnings, a loop nudge) are
 * not in the client's, and are skipped where the client's next message is
 * not that same message.
 *
 * Pure: data in, data out.
 */
import { MidSystem } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"

/** How a client's history meets the stored one. */
export type Match =
  /** It extends it: the client's messages from `matched` on are new. */
  | { readonly _tag: "Extends"; readonly matched: number }
  /**
   * It does not: the client's message `at` differs from the stored one
   * there (`diverged`), or the client's history ends inside the stored one
   * (`shorter`; `at` is its length).
   */
  | { readonly _tag: "Forked"; readonly at: number; readonly reason: "diverged" | "shorter" }

/** A value's JSON text with object keys sorted and `undefined` members left out (as JSON leaves them out). */
export const canonical = (value: unknown): string => {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null"
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonical(v))).join(",")}]`
  const record = value as Record<string, unknown>
  const keys = Object.keys(record)
    .filter((k) => record[k] !== undefined)
    .sort()
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(record[k])}`).join(",")}}`
}

/** Whether two messages are the same content. */
export const same = (a: Conversation.Message, b: Conversation.Message): boolean => a === b || canonical(a) === canonical(b)

/** True for a stored message ctxd wrote itself, which no client sends back. */
export const ownMessage = (message: Conversation.Message): boolean => MidSystem.isMid(message)

/**
 * How `client` (the client's whole history, normalized) meets `stored`
 * (the stored history, oldest first). An empty stored history is extended
 * by any client history.
 */
export const match = (stored: ReadonlyArray<Conversation.Message>, client: ReadonlyArray<Conversation.Message>): Match => {
  let c = 0
  for (const message of stored) {
    // the client's own copy first: a client may send mid-conversation system messages of its own
    if (c < client.length && same(message, client[c]!)) {
      c++
      continue
    }
    if (ownMessage(message)) continue
    if (c >= client.length) return { _tag: "Forked", at: client.length, reason: "shorter" }
    return { _tag: "Forked", at: c, reason: "diverged" }
  }
  return { _tag: "Extends", matched: c }
}
