/**
 * The gap model: when each model call of a replayed session happens, so the
 * cache simulator sees TTLs expire the way they would in production.
 *
 * - **Agent steps**: consecutive calls are 2–20 s apart (uniform): the model's
 *   reply plus the tool run.
 * - **Human pauses** (only with `pauses`): before each turn that carries a new
 *   user message (a `user` message with text, i.e. a human typing, not a tool
 *   result), except the session's first turn, the human takes 3–40 minutes
 *   (uniform) on top of the agent step. In tau-bench that is every customer
 *   reply (1,341 of 2,454 turns carry one); in the SWE-agent session it is
 *   every new task statement and every plain-text observation the agent got
 *   back as a user message.
 *
 * Deterministic: a mulberry32 PRNG seeded with `seed` xor the FNV-1a hash
 * of the session id, so every strategy of a session sees the same clock and
 * a session's clock does not depend on which other sessions ran.
 */
import type { Conversation } from "@ctxd/contracts"
import { Random } from "@ctxd/testing"

export interface Options {
  readonly seed: number
  /** Add human pauses (default: agent steps only). */
  readonly pauses: boolean
  /** Agent step bounds in seconds (default 2 and 20). */
  readonly stepSeconds?: readonly [number, number] | undefined
  /** Human pause bounds in seconds (default 180 and 2,400). */
  readonly pauseSeconds?: readonly [number, number] | undefined
}

/** The seeded PRNG (mulberry32) of `@ctxd/testing`. */
export const prng = Random.prng

/** FNV-1a 32-bit hash of a string. */
export const fnv1a = (text: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

/** A turn in which a human wrote: it carries a `user` message with a text part. */
export const isHuman = (messages: ReadonlyArray<Conversation.Message>): boolean =>
  messages.some((m) => m.role === "user" && m.parts.some((p) => p.type === "text" && p.text.trim() !== ""))

/** The time of each turn's model call, in seconds from the first (which is at 0). */
export const timestamps = (id: string, turns: ReadonlyArray<ReadonlyArray<Conversation.Message>>, options: Options): Array<number> => {
  const random = prng((options.seed ^ fnv1a(id)) >>> 0)
  const [stepMin, stepMax] = options.stepSeconds ?? [2, 20]
  const [pauseMin, pauseMax] = options.pauseSeconds ?? [180, 2_400]
  const times: Array<number> = []
  let now = 0
  turns.forEach((messages, k) => {
    if (k > 0) {
      // Both draws happen every turn, so the pause setting does not shift the agent steps.
      const step = stepMin + random() * (stepMax - stepMin)
      const pause = pauseMin + random() * (pauseMax - pauseMin)
      now += step + (options.pauses && isHuman(messages) ? pause : 0)
    }
    times.push(now)
  })
  return times
}
