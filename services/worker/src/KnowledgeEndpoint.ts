/**
 * `<root>.v1.knowledge.<tenant>`: add, list and remove an agent's knowledge
 * documents (stored in Postgres). Workers pick up changes within the
 * assembler's knowledge cache lifetime; this worker at once.
 *
 * Replies are bounded: `list` answers one page (`limit`, default 100, and at
 * most {@link PAGE_BYTES} of ids and titles) with a `nextCursor` when there are
 * more; `add` and `remove` answer the first page. Text Postgres cannot store
 * faithfully (NUL characters, lone UTF-16 surrogates) is `BadRequest`; echoed
 * values in error messages are cut to a preview.
 */
import { Assembler } from "@ctxd/assembler"
import { Errors, Issues, Knowledge, Requests, type Subjects } from "@ctxd/contracts"
import { KnowledgeStore } from "@ctxd/db"
import { Endpoint } from "@ctxd/nats"
import { Effect, Either } from "effect"

/** A page stops before its ids and titles take more than this many bytes of UTF-8 (256 KB). */
export const PAGE_BYTES = 256 * 1024

const HINT = "send {op: add|list|remove, agent?, doc?, id?, cursor?, limit?}"

const badRequest = (message: string, path?: string, hint?: string) =>
  Errors.toReply(new Errors.BadRequest({ message, ...(path === undefined ? {} : { path }), ...(hint === undefined ? {} : { hint }) }))

/** The request, or a bounded `BadRequest` envelope. */
export const decode = (data: Uint8Array): Either.Either<Knowledge.Request, Errors.ErrorReply> =>
  Requests.decode(Knowledge.Request, data, { what: "knowledge requests", hint: HINT })

/** The longest prefix of `docs` whose titles fit {@link PAGE_BYTES} (at least one). */
const fit = <D extends { readonly id: string; readonly title: string }>(docs: ReadonlyArray<D>): ReadonlyArray<D> => {
  let size = 0
  for (let i = 0; i < docs.length; i++) {
    // JSON escapes may grow a title up to 6× (\uXXXX for control characters): count the encoded form
    size += Buffer.byteLength(JSON.stringify(docs[i]!.title)) + docs[i]!.id.length + 20
    if (size > PAGE_BYTES && i > 0) return docs.slice(0, i)
  }
  return docs
}

export const serve = (options: { readonly subjects: Subjects.Subjects; readonly queue: string }) =>
  Effect.gen(function* () {
    const store = yield* KnowledgeStore.KnowledgeStore
    const assembler = yield* Assembler.Assembler
    const failed = (e: { readonly _tag: string; readonly message: string }) =>
      e._tag === "DatabaseUnavailable"
        ? Effect.succeed(
            Errors.toReply(new Errors.ServiceUnavailable({ message: "the knowledge store is unavailable; retry", hint: e.message })),
          )
        : Effect.logError(`knowledge store failed: ${e.message.slice(0, 300)}`).pipe(
            Effect.as(Errors.toReply(new Errors.InternalError({ message: "the knowledge store failed" }))),
          )

    const handle = (tenant: string, data: Uint8Array) => {
      const request = decode(data)
      if (Either.isLeft(request)) return Effect.succeed(request.left)
      const r = request.right
      const agent = r.agent ?? Knowledge.DEFAULT_AGENT
      const change: Effect.Effect<boolean | undefined, { readonly _tag: string; readonly message: string }> =
        r.op === "add"
          ? Effect.as(store.add(tenant, agent, r.doc), undefined)
          : r.op === "remove"
            ? store.remove(tenant, agent, r.id)
            : Effect.succeed(undefined)
      const cursor = r.op === "list" ? r.cursor : undefined
      const limit = (r.op === "list" ? r.limit : undefined) ?? Knowledge.DEFAULT_PAGE
      return change.pipe(
        Effect.tap(() => (r.op === "list" ? Effect.void : assembler.invalidateKnowledge(tenant, agent))),
        Effect.flatMap((removed) =>
          Effect.map(store.page(tenant, agent, cursor, limit), (page): Knowledge.Reply => {
            const docs = fit(page.docs)
            const more = page.more || docs.length < page.docs.length
            return {
              ok: true,
              docs: docs.map((d) => ({ id: d.id, title: d.title })),
              ...(more && docs.length > 0 ? { nextCursor: docs[docs.length - 1]!.id } : {}),
              ...(removed === undefined ? {} : { removed }),
            }
          }),
        ),
        Effect.catchAll(failed),
        Effect.annotateLogs({ tenant, op: r.op }),
      )
    }

    return yield* Endpoint.serve({
      subject: options.subjects.knowledgeWildcard,
      queue: options.queue,
      maxConcurrent: 8,
      handler: ({ subject, data }) => {
        const tenant = options.subjects.parseKnowledge(subject)
        return tenant === undefined ? Effect.succeed(badRequest(`bad subject ${Issues.preview(subject)}`)) : handle(tenant, data)
      },
    })
  })
