/**
 * A session's stored data on request (contract: `Session`):
 *
 * - `<root>.v1.session.<tenant>.<session>` (queue group): `{op: "delete"}`
 *   deletes every row of the session in one transaction, then each of its
 *   client-history branches (`ClientTurn.branchesOf`) the same way (the
 *   right to be forgotten; idempotent: `deleted: false` when there was
 *   nothing, and a delete cut short is finished by sending it again); `{op:
 *   "export", cursor?, limit?}` answers one page of its stored data as JSON
 *   Lines (`LifecycleStore.exportPage`), at most `Session.EXPORT_PAGE_BYTES`.
 * - `<root>.v1.user.<tenant>` (queue group): `{op: "deleteUser", user}`
 *   deletes each session of the tenant whose turns carried that
 *   `options.user`, at most `Session.MAX_USER_SESSIONS` per request (`more`).
 * - `<address>.session.<tenant>.<session>` (this worker's direct subject): a
 *   delete forwarded by another worker to the session's owner.
 *
 * A delete is fenced twice against the session's turns: it runs on the owner
 * of the session's shard as the session's only operation
 * (`Assembler.exclusive`, after the turns already waiting; the owner's cached
 * state is dropped, so the next turn starts a fresh session), and its
 * transaction takes the session row's lock, which a turn's commit takes too.
 * A worker that is not the owner forwards the delete there; when the owner
 * cannot be reached it deletes itself (the row lock still fences; a stale
 * cached state is noticed at the owner's next commit and reloaded).
 */
import { Assembler, ClientTurn } from "@ctxd/assembler"
import { Errors, Issues, Requests, Session, type Subjects } from "@ctxd/contracts"
import { LifecycleStore, MemoryStore, SessionStore } from "@ctxd/db"
import { Endpoint, NatsClient, Request } from "@ctxd/nats"
import { ShardLeases } from "@ctxd/sharding"
import { Effect, Either, Option, Schema } from "effect"

const HINT = 'send {"op": "delete"}, {"op": "export", "cursor"?, "limit"?} or {"op": "inspect", "turnId"?, "limit"?}'
const USER_HINT = 'send {"op": "deleteUser", "user": "<options.user>"}'

const badRequest = (message: string, path?: string, hint?: string) =>
  Errors.toReply(new Errors.BadRequest({ message, ...(path === undefined ? {} : { path }), ...(hint === undefined ? {} : { hint }) }))

type StoreFailure = { readonly _tag: string; readonly message: string }

/** A store failure as a coded error: `Unavailable` (retry) when Postgres cannot be reached, else `Internal` (logged). */
const storeFailure = (e: StoreFailure): Effect.Effect<Errors.WireError> =>
  e._tag === "DatabaseUnavailable"
    ? Effect.succeed(new Errors.ServiceUnavailable({ message: "the session store is unavailable; retry", hint: e.message }))
    : Effect.as(
        Effect.logError(`session store failed: ${e.message.slice(0, 300)}`),
        new Errors.InternalError({ message: "the session store failed" }),
      )

const decodeDeleteReply = Schema.decodeUnknownEither(Schema.parseJson(Session.DeleteReply))

export interface SessionEndpointOptions {
  readonly subjects: Subjects.Subjects
  readonly queue: string
  /** How long a delete forwarded to the session's owner waits for its reply, ms. */
  readonly forwardTimeoutMs: number
  /** How long requests in flight may take to finish when the endpoint closes. */
  readonly drainTimeoutMs: number
}

/** Serves the session and user subjects until the scope closes. */
export const serve = (options: SessionEndpointOptions) =>
  Effect.gen(function* () {
    const { subjects } = options
    const store = yield* LifecycleStore.LifecycleStore
    const memory = yield* MemoryStore.MemoryStore
    const sessions = yield* SessionStore.SessionStore
    const assembler = yield* Assembler.Assembler
    const leases = yield* ShardLeases.ShardLeases
    const address = `${leases.self.address}.session.`
    const nats = yield* NatsClient.NatsClient

    /** Deletes on this worker (as the session's only operation when this worker owns its shard); logs the counts. */
    const deleteHere = (tenant: string, session: string): Effect.Effect<Session.Removed, Errors.WireError> =>
      Effect.gen(function* () {
        const removeOne = (id: string) => Effect.catchAll(store.deleteSession(tenant, id), (e) => Effect.flip(storeFailure(e)))
        // the session's branches (client-history forks, on its shard) go with it
        const remove = Effect.gen(function* () {
          const branches = yield* ClientTurn.branchesOf(tenant, session).pipe(
            Effect.provideService(SessionStore.SessionStore, sessions),
            Effect.provideService(ShardLeases.ShardLeases, leases),
            Effect.catchAll((e) => Effect.flip(storeFailure(e))),
          )
          let removed = yield* removeOne(session)
          for (const id of branches) removed = LifecycleStore.add(removed, yield* removeOne(id))
          return removed
        })
        const owner = yield* leases.isOwner(leases.shardOf(tenant, session))
        const removed = yield* owner ? assembler.exclusive(tenant, session, remove) : remove
        if (removed.sessions > 0 || removed.usageReports > 0) {
          yield* Effect.logInfo(
            `session deleted on request: ${removed.sessions} sessions, ${removed.messages} messages, ${removed.turns} turns`,
          ).pipe(Effect.annotateLogs({ tenant, session, owner, ...removed }))
        }
        return removed
      })

    /** Deletes through the owner of the session's shard (here if it is this worker, or if it cannot be reached). */
    const deleteRouted = (tenant: string, session: string): Effect.Effect<Session.Removed, Errors.WireError> =>
      Effect.gen(function* () {
        const shard = leases.shardOf(tenant, session)
        const owner = yield* leases.owner(shard)
        if ((yield* leases.isOwner(shard)) || Option.isNone(owner) || owner.value.id === leases.self.id) {
          return yield* deleteHere(tenant, session)
        }
        const forwarded = yield* Request.request(
          `${owner.value.address}.session.${tenant}.${session}`,
          new TextEncoder().encode('{"op":"delete"}'),
          {
            timeoutMs: options.forwardTimeoutMs,
          },
        ).pipe(Effect.provideService(NatsClient.NatsClient, nats), Effect.either)
        const reply = Either.isRight(forwarded) ? decodeDeleteReply(new TextDecoder().decode(forwarded.right.data)) : undefined
        if (reply !== undefined && Either.isRight(reply)) return reply.right.removed
        yield* Effect.logDebug(`session delete: the owner ${owner.value.id} did not delete; deleting here`)
        return yield* deleteHere(tenant, session)
      })

    /** Read-only: the latest turns, and the stored report and request body of one (bounded). */
    const inspect = (
      tenant: string,
      session: string,
      r: typeof Session.InspectRequest.Type,
    ): Effect.Effect<Session.InspectReply, Errors.WireError> =>
      Effect.gen(function* () {
        const failed = (e: StoreFailure) => Effect.flip(storeFailure(e))
        const turns = yield* Effect.catchAll(sessions.listTurns(tenant, session, r.limit ?? Session.DEFAULT_INSPECT_TURNS), failed)
        const listed = turns.map((t) => ({
          turnId: t.turnId,
          firstSeq: t.firstSeq,
          lastSeq: t.lastSeq,
          createdAt: t.createdAt.toISOString(),
        }))
        const turnId = r.turnId ?? turns[0]?.turnId
        if (turnId === undefined) return { ok: true as const, turns: listed }
        const found = yield* Effect.catchAll(sessions.findTurn(tenant, session, turnId), failed)
        if (Option.isNone(found)) return { ok: true as const, turns: listed }
        const { firstSeq, lastSeq, reply } = found.value
        const answered = reply as { readonly ok?: unknown; readonly report?: unknown; readonly request?: unknown }
        const base = { ok: true as const, turns: listed, turnId, stored: lastSeq - firstSeq + 1 }
        if (answered.ok !== true) return { ...base, pruned: true }
        const whole = { ...base, report: answered.report, request: answered.request }
        return JSON.stringify(whole).length <= Session.INSPECT_REPLY_BYTES ? whole : { ...base, report: answered.report, truncated: true }
      })

    const handleSession = (tenant: string, session: string, data: Uint8Array, direct: boolean) => {
      const request = Requests.decode(Session.Request, data, { what: "session requests", hint: HINT })
      if (Either.isLeft(request)) return Effect.succeed(request.left)
      const r = request.right
      const answer: Effect.Effect<unknown, Errors.WireError> =
        r.op === "delete"
          ? Effect.map((direct ? deleteHere : deleteRouted)(tenant, session), (removed): Session.DeleteReply => ({
              ok: true,
              deleted: removed.sessions > 0 || removed.usageReports > 0,
              removed,
            }))
          : r.op === "inspect"
            ? inspect(tenant, session, r)
            : store.exportPage(tenant, session, r.cursor, r.limit ?? Session.DEFAULT_EXPORT_LINES, Session.EXPORT_PAGE_BYTES).pipe(
                Effect.map((page): Session.ExportReply => ({
                  ok: true,
                  lines: page.lines,
                  ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor }),
                })),
                Effect.catchAll((e) =>
                  e instanceof LifecycleStore.BadCursor
                    ? Effect.fail(new Errors.BadRequest({ message: e.message, path: "cursor", hint: "start again without a cursor" }))
                    : Effect.flatMap(storeFailure(e), Effect.fail),
                ),
              )
      return answer.pipe(
        Effect.catchAll((error) => Effect.succeed(Errors.toReply(error))),
        Effect.annotateLogs({ tenant, session, op: r.op }),
      )
    }

    const handleUser = (tenant: string, data: Uint8Array) => {
      const request = Requests.decode(Session.UserRequest, data, { what: "user requests", hint: USER_HINT })
      if (Either.isLeft(request)) return Effect.succeed(request.left)
      const { user } = request.right
      return Effect.gen(function* () {
        const sessions = yield* Effect.catchAll(store.sessionsOfUser(tenant, user, Session.MAX_USER_SESSIONS + 1), (e) =>
          Effect.flip(storeFailure(e)),
        )
        let removed = LifecycleStore.NONE
        for (const session of sessions.slice(0, Session.MAX_USER_SESSIONS)) {
          removed = LifecycleStore.add(removed, yield* deleteRouted(tenant, session))
        }
        // and the memories stored under the user (the agents' shared ones stay)
        const memories = yield* Effect.catchAll(memory.forgetUser(tenant, user), (e) => Effect.flip(storeFailure(e)))
        yield* Effect.logInfo(
          `user's data deleted on request: ${removed.sessions} sessions, ${removed.messages} messages, ${memories} memories`,
        ).pipe(Effect.annotateLogs({ ...removed, memories }))
        return { ok: true, removed, more: sessions.length > Session.MAX_USER_SESSIONS, memories } satisfies Session.UserDeleteReply
      }).pipe(
        Effect.catchAll((error) => Effect.succeed(Errors.toReply(error))),
        Effect.annotateLogs({ tenant, op: "deleteUser" }),
      )
    }

    const common = { maxConcurrent: 8, drainTimeoutMs: options.drainTimeoutMs }
    yield* Endpoint.serve({
      ...common,
      subject: `${address}*.*`,
      handler: ({ subject, data }) => {
        const ids = subjects.parseSession(subjects.session(...(subject.slice(address.length).split(".") as [string, string])))
        return ids === undefined
          ? Effect.succeed(badRequest(`bad subject ${Issues.preview(subject)}`))
          : handleSession(ids.tenant, ids.session, data, true)
      },
    })
    yield* Endpoint.serve({
      ...common,
      subject: subjects.sessionWildcard,
      queue: options.queue,
      tenantOf: (subject) => subjects.parseSession(subject)?.tenant,
      handler: ({ subject, data }) => {
        const ids = subjects.parseSession(subject)
        return ids === undefined
          ? Effect.succeed(
              badRequest(`bad subject ${Issues.preview(subject)}`, undefined, "tenant and session must match [A-Za-z0-9_-]{1,128}"),
            )
          : handleSession(ids.tenant, ids.session, data, false)
      },
    })
    yield* Endpoint.serve({
      ...common,
      subject: subjects.userWildcard,
      queue: options.queue,
      tenantOf: subjects.parseUser,
      handler: ({ subject, data }) => {
        const tenant = subjects.parseUser(subject)
        return tenant === undefined ? Effect.succeed(badRequest(`bad subject ${Issues.preview(subject)}`)) : handleUser(tenant, data)
      },
    })
  })
