/** Test helpers: a text message, a commit of the `acme` tenant with the defaults most store tests use, and a commit as earlier releases made it. */
import type { Conversation } from "@ctxd/contracts"
import { Effect } from "effect"
import { Database, SessionStore } from "../src/index.ts"
import * as ReplyCodec from "../src/internal/replyCodec.ts"

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

/** The commit functions workers of earlier releases call (they stay in the schema for them). */
export type LegacyCommit = "ctxd_commit_turn" | "ctxd_commit_turn_v7" | "ctxd_commit_turn_v9"

/**
 * Commits `input` the way a worker of an earlier release did: by calling
 * `fn` (`ctxd_commit_turn` from migration 3, `_v7` with the length, `_v9`
 * with the length and the user) with that release's parameters. The status.
 */
export const legacyCommit = (fn: LegacyCommit, input: SessionStore.CommitTurn) =>
  Effect.flatMap(Database.Database, (db) => {
    const withLength = fn === "ctxd_commit_turn" ? [] : [input.length?.agent ?? null, input.length?.turns ?? null]
    const withUser = fn === "ctxd_commit_turn_v9" ? [input.user ?? null] : []
    const params = [
      input.tenant,
      input.session,
      input.turnId,
      input.requestHash,
      input.expectedLastSeq,
      JSON.stringify(input.messages.map((m) => ({ message: m.message, tokens: m.tokens, encoding: m.encoding }))),
      ReplyCodec.encode(JSON.stringify(input.reply) ?? "null"),
      null,
      null,
      null,
      ...withLength,
      ...withUser,
    ]
    const placeholders = params.map((_, i) => `$${i + 1}`).join(", ")
    return Effect.map(db.query<{ status: string }>(`SELECT status FROM ${fn}(${placeholders})`, params), ({ rows }) => rows[0]?.status)
  })
