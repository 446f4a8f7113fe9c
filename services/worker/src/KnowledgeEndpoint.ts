/**
 * `<root>.v1.knowledge.<tenant>`: add, list and remove an agent's knowledge
 * documents (stored in Postgres). Workers pick up changes within the
 * assembler's knowledge cache lifetime; this worker at once.
 */
import { Assembler } from "@ctxd/assembler"
import { Errors, Knowledge, type Subjects } from "@ctxd/contracts"
import { KnowledgeStore } from "@ctxd/db"
import { Endpoint } from "@ctxd/nats"
import { Effect, Either } from "effect"

export const serve = (options: { readonly subjects: Subjects.Subjects; readonly queue: string }) =>
  Effect.gen(function* () {
    const store = yield* KnowledgeStore.KnowledgeStore
    const assembler = yield* Assembler.Assembler
    const unavailable = (e: { readonly message: string }) =>
      Errors.toReply(new Errors.ServiceUnavailable({ message: "the knowledge store is unavailable; retry", hint: e.message }))

    const handle = (tenant: string, data: Uint8Array) => {
      const request = Endpoint.decodeRequest(Knowledge.Request, data, "send {op: add|list|remove, agent?, doc?, id?}")
      if (Either.isLeft(request)) return Effect.succeed(request.left)
      const r = request.right
      const agent = r.agent ?? Knowledge.DEFAULT_AGENT
      const change: Effect.Effect<boolean | undefined, { readonly message: string }> =
        r.op === "add"
          ? Effect.as(store.add(tenant, agent, r.doc), undefined)
          : r.op === "remove"
            ? store.remove(tenant, agent, r.id)
            : Effect.succeed(undefined)
      return change.pipe(
        Effect.tap(() => (r.op === "list" ? Effect.void : assembler.invalidateKnowledge(tenant, agent))),
        Effect.flatMap((removed) =>
          Effect.map(
            store.docs(tenant, agent),
            (docs): Knowledge.Reply => ({
              ok: true,
              docs: docs.map((d) => ({ id: d.id, title: d.title })),
              ...(removed === undefined ? {} : { removed }),
            }),
          ),
        ),
        Effect.catchAll((e) => Effect.succeed(unavailable(e))),
      )
    }

    return yield* Endpoint.serve({
      subject: options.subjects.knowledgeWildcard,
      queue: options.queue,
      maxConcurrent: 8,
      handler: ({ subject, data }) => {
        const tenant = options.subjects.parseKnowledge(subject)
        return tenant === undefined
          ? Effect.succeed(Errors.toReply(new Errors.BadRequest({ message: `bad subject ${JSON.stringify(subject)}` })))
          : handle(tenant, data)
      },
    })
  })
