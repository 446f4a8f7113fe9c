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

/**
 * Whether two JSON values are the same, object keys in any order and
 * `undefined` members as absent (as JSON writes them): no text is built,
 * and the walk stops at the first difference.
 */
export const equal = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false
    for (let i = 0; i < a.length; i++) if (!equal(a[i] ?? null, b[i] ?? null)) return false
    return true
  }
  if (Array.isArray(b)) return false
  const x = a as Record<string, unknown>
  const y = b as Record<string, unknown>
  let keys = 0
  for (const k in x) {
    if (x[k] === undefined) continue
    keys++
    if (!Object.hasOwn(y, k) || !equal(x[k], y[k])) return false
  }
  for (const k in y) if (y[k] !== undefined) keys--
  return keys === 0
}

/** Whether two messages are the same content. */
export const same = (a: Conversation.Message, b: Conversation.Message): boolean => equal(a, b)

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
