/**
 * `<root>.v1.learn.<tenant>.<session>`: folds a finished session into
 * learnings of its agent. The session's stored history (all of it) goes to
 * the summarizer (`Summarizer.learn`: at most `maxLessons`, default 5, short
 * lessons; hierarchical when the history does not fit one call), and each
 * lesson is stored in the memory store with kind `learning`, source
 * `session:<session>`, unless the agent already has a near-identical one
 * (`MemoryRetrieval.similarity` ≥ 0.85 with its best match). The agent's later
 * sessions carry them in their learnings section (turn stage `memory`).
 *
 * Errors: a session with no stored messages, or no provider key this tenant
 * may use (the message names the variable to set), is `BadRequest`; the summarizer's
 * provider failing after its retries, or the stores unavailable, is
 * `Unavailable`; a history too large even hierarchically is `TooLarge`.
 * A store failure midway leaves the lessons stored so far: a retry finds
 * them and counts them as duplicates.
 */
import { Assembler } from "@ctxd/assembler"
import { MemoryRetrieval } from "@ctxd/context"
import { Errors, Issues, Learn, Requests, type Subjects } from "@ctxd/contracts"
import { MemoryStore, SessionStore } from "@ctxd/db"
import { Endpoint } from "@ctxd/nats"
import { Summarizer } from "@ctxd/summarizer"
import { Effect, Either } from "effect"

const HINT = "send {model: {provider, name}, agent?, maxLessons?}"

const failure = (code: Errors.ErrorCode, message: string, hint?: string) =>
  Errors.capReply(Endpoint.errorReply(code, message, hint === undefined ? {} : { hint }))

/** The reply to one raw learn request for `tenant`/`session`. */
export const handle = (tenant: string, session: string, data: Uint8Array) =>
  Effect.gen(function* () {
    const request = Requests.decode(Learn.LearnRequest, data, { what: "learn requests", hint: HINT })
    if (Either.isLeft(request)) return request.left
    const r = request.right
    const agent = r.agent ?? MemoryStore.DEFAULT_AGENT
    const sessions = yield* SessionStore.SessionStore
    const memory = yield* MemoryStore.MemoryStore
    const summarizer = yield* Summarizer.Summarizer
    const assembler = yield* Assembler.Assembler
    const unavailable = (e: { readonly _tag: string; readonly message: string }) =>
      e._tag === "MemoryInvalid"
        ? Effect.succeed(failure("BadRequest", e.message))
        : Effect.logWarning(`learn: a store failed: ${e.message.slice(0, 300)}`).pipe(
            Effect.as(failure("Unavailable", "the session or memory store is unavailable; retry")),
          )

    const rows = yield* Effect.either(sessions.loadMessages(tenant, session, 0))
    if (Either.isLeft(rows)) return yield* unavailable(rows.left)
    if (rows.right.length === 0) return failure("BadRequest", `session ${session} has no stored messages to learn from`)
    const learned = yield* Effect.either(
      summarizer.learn({
        items: rows.right.map((row) => ({ seq: row.seq, message: row.message })),
        sessionModel: { provider: r.model.provider, name: r.model.name },
        max: r.maxLessons ?? MemoryRetrieval.defaults.maxLearnings,
        tenant,
      }),
    )
    if (Either.isLeft(learned)) {
      const e = learned.left
      return e.cause?.reason === "denied"
        ? failure(
            "BadRequest",
            e.message,
            "the operator must configure a provider key (the worker's, or this tenant's in its section's `providers`) or allow the tenant the worker's (CTXD_WORKER_KEY_TENANTS)",
          )
        : e.reason === "provider"
          ? failure("Unavailable", e.message, "the summarizer's provider failed after retries; retry later")
          : e.reason === "too_large"
            ? failure("TooLarge", e.message, "raise CTXD_SUMMARIZER_MAX_DEPTH")
            : failure("BadRequest", e.message)
    }
    const scope = { tenant, agent }
    const stored = yield* Effect.either(
      Effect.forEach(learned.right.lessons, (text) =>
        Effect.gen(function* () {
          const [best] = yield* memory.search(scope, text, { limit: 1, kind: "learning" })
          if (best !== undefined && MemoryRetrieval.similarity(best.text, text) >= MemoryRetrieval.defaults.duplicate) return undefined
          const { id } = yield* memory.remember(scope, { text, kind: "learning", source: `session:${session}`, tags: ["learning"] })
          return { id, text }
        }),
      ),
    )
    if (Either.isLeft(stored)) return yield* unavailable(stored.left)
    yield* assembler.invalidateMemory(tenant, agent)
    const learnings = stored.right.filter((l): l is Learn.Learning => l !== undefined)
    const reply: Learn.LearnReply = {
      ok: true,
      learnings,
      duplicates: stored.right.length - learnings.length,
      messages: rows.right.length,
      model: learned.right.model,
      tokensIn: learned.right.tokensIn,
      tokensOut: learned.right.tokensOut,
    }
    return reply
  }).pipe(Effect.annotateLogs({ tenant, session }))

/** Serves `<root>.v1.learn.>` until the scope closes. */
export const serve = (options: {
  readonly subjects: Subjects.Subjects
  readonly queue: string
  readonly maxPayload?: number | undefined
}) =>
  Effect.gen(function* () {
    const context = yield* Effect.context<
      SessionStore.SessionStore | MemoryStore.MemoryStore | Summarizer.Summarizer | Assembler.Assembler
    >()
    return yield* Endpoint.serve({
      subject: options.subjects.learnWildcard,
      queue: options.queue,
      maxConcurrent: 4,
      maxPayload: options.maxPayload,
      handler: ({ subject, data }) => {
        const ids = options.subjects.parseSession(subject)
        return ids === undefined
          ? Effect.succeed(failure("BadRequest", `bad subject ${Issues.preview(subject)}`))
          : Effect.provide(handle(ids.tenant, ids.session, data), context)
      },
    })
  })
