/** Test helpers: a text message, and a commit of the `acme` tenant with the defaults most store tests use. */
import type { Conversation } from "@ctxd/contracts"
import { Effect } from "effect"
import { SessionStore } from "../src/index.ts"

/** A message of one text part. */
export const text = (role: Conversation.Role, t: string): Conversation.Message => ({ role, parts: [{ type: "text", text: t }] })

/**
 * Commits `messages` (counted 10, 11, ... tokens) as turn `turnId` of
 * `acme`/`session` after `expectedLastSeq`, with the request hash
 * `hash-<turnId>` and the reply `{ok: true, turnId}`, unless `overrides` say otherwise.
 */
export const commit = (
  session: string,
  turnId: string,
  expectedLastSeq: number,
  messages: ReadonlyArray<Conversation.Message>,
  overrides: Partial<SessionStore.CommitTurn> = {},
) =>
  Effect.flatMap(SessionStore.SessionStore, (store) =>
    store.commitTurn({
      tenant: "acme",
      session,
      turnId,
      requestHash: `hash-${turnId}`,
      expectedLastSeq,
      messages: messages.map((message, i) => ({ message, tokens: 10 + i, encoding: "o200k_base" })),
      reply: { ok: true, turnId },
      ...overrides,
    }),
  )
