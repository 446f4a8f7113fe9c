/**
 * `<root>.v1.memory.<tenant>`: remember, search, read, list, history and
 * forget an agent's (and a user's) memories, stored in Postgres
 * (`MemoryStore`). Requests count against the tenant's admission share.
 *
 * Replies are bounded: the documents of a `search`, `list` or `history` reply
 * stop before {@link Memory.limits}.`replyBytes` of JSON, with `truncated:
 * true` (a `list` then continues after the last one sent). Input the
 * contract or the store refuses is `BadRequest` with the path of the
 * offending field, and nothing is written.
 */
import { Errors, Issues, Memory, Requests, type Subjects } from "@ctxd/contracts"
import { MemoryStore } from "@ctxd/db"
import { Endpoint } from "@ctxd/nats"
import { Effect, Either } from "effect"

const HINT =
  "send {op: remember|search|read|list|history|forget, agent?, user?, text?, tags?, source?, kind?, query?, id?, cursor?, limit?}"

const badRequest = (message: string, path?: string) =>
  Errors.toReply(new Errors.BadRequest({ message, ...(path === undefined ? {} : { path }), hint: HINT }))

/** The request, or a bounded `BadRequest` envelope. */
export const decode = (data: Uint8Array): Either.Either<Memory.Request, Errors.ErrorReply> =>
  Requests.decode(Memory.Request, data, { what: "memory requests", hint: HINT })

/** The longest prefix of `items` whose JSON fits `bytes` (at least one), and whether it is shorter. */
export const fit = <A>(
  items: ReadonlyArray<A>,
  bytes: number = Memory.limits.replyBytes,
): { readonly items: ReadonlyArray<A>; readonly truncated: boolean } => {
  let size = 0
  for (let i = 0; i < items.length; i++) {
    size += Buffer.byteLength(JSON.stringify(items[i])) + 1
    if (size > bytes && i > 0) return { items: items.slice(0, i), truncated: true }
  }
  return { items, truncated: false }
}

const truncatedFlag = (truncated: boolean) => (truncated ? { truncated: true } : {})

type Failure = MemoryStore.Failure

/** Answers one decoded request for `tenant`. */
export const handle = (store: MemoryStore.MemoryStoreService, tenant: string, r: Memory.Request): Effect.Effect<Memory.Reply, Failure> => {
  const scope: MemoryStore.Scope = { tenant, agent: r.agent, user: r.user }
  switch (r.op) {
    case "remember":
      return Effect.map(store.remember(scope, { text: r.text, tags: r.tags, source: r.source, kind: r.kind, id: r.id }), (done) => ({
        ok: true as const,
        id: done.id,
        version: done.version,
        created: done.created,
      }))
    case "search":
      return Effect.map(store.search(scope, r.query, { limit: r.limit, kind: r.kind }), (hits) => {
        const { items, truncated } = fit(hits)
        return { ok: true as const, results: items, ...truncatedFlag(truncated) }
      })
    case "read":
      return Effect.map(store.read(scope, r.id), (document) => ({ ok: true as const, ...(document === undefined ? {} : { document }) }))
    case "list":
      return Effect.flatMap(store.list(scope, { cursor: r.cursor, limit: r.limit, kind: r.kind }), (page) => {
        const { items, truncated } = fit(page.documents)
        if (!truncated)
          return Effect.succeed({
            ok: true as const,
            documents: items,
            ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor }),
          })
        // continue after the last document sent: the store's cursor for a page ending there
        return Effect.map(store.list(scope, { cursor: r.cursor, limit: items.length, kind: r.kind }), (short) => ({
          ok: true as const,
          documents: items,
          truncated: true,
          ...(short.nextCursor === undefined ? {} : { nextCursor: short.nextCursor }),
        }))
      })
    case "history":
      return Effect.map(store.history(scope, r.id), (versions) => {
        if (versions === undefined) return { ok: true as const }
        const { items, truncated } = fit(versions)
        return { ok: true as const, versions: items, ...truncatedFlag(truncated) }
      })
    case "forget":
      return Effect.map(store.forget(scope, r.id), (forgotten) => ({ ok: true as const, forgotten }))
  }
}

export const serve = (options: { readonly subjects: Subjects.Subjects; readonly queue: string }) =>
  Effect.gen(function* () {
    const store = yield* MemoryStore.MemoryStore
    const failed = (e: Failure) =>
      e._tag === "MemoryInvalid"
        ? Effect.succeed(badRequest(`invalid memory request: ${e.message}`, e.path))
        : e._tag === "DatabaseUnavailable"
          ? Effect.succeed(
              Errors.toReply(new Errors.ServiceUnavailable({ message: "the memory store is unavailable; retry", hint: e.message })),
            )
          : Effect.logError(`memory store failed: ${e.message.slice(0, 300)}`).pipe(
              Effect.as(Errors.toReply(new Errors.InternalError({ message: "the memory store failed" }))),
            )

    return yield* Endpoint.serve({
      subject: options.subjects.memoryWildcard,
      queue: options.queue,
      maxConcurrent: 8,
      tenantOf: options.subjects.parseMemory,
      handler: ({ subject, data }) => {
        const tenant = options.subjects.parseMemory(subject)
        if (tenant === undefined) return Effect.succeed(badRequest(`bad subject ${Issues.preview(subject)}`))
        const request = decode(data)
        if (Either.isLeft(request)) return Effect.succeed(request.left)
        return handle(store, tenant, request.right).pipe(
          Effect.catchAll(failed),
          Effect.withSpan("memory"),
          Effect.annotateLogs({ tenant, op: request.right.op }),
        )
      },
    })
  })
