/**
 * Sticky routing of one turn: a session's turns run on the worker that owns
 * the session's shard (`ShardLeases`). The owner handles the turn; any other
 * worker forwards the request's bytes to the owner's direct subject and
 * relays the owner's reply as it is. When no owner is known, or the owner
 * cannot be reached, the reply is `NotOwner` (retryable: the client retries
 * with backoff and the same turnId, and a handover ends within a lease round
 * or two). A forward that meets no responders reports the owner
 * (`ShardLeases.unreachable`: a dead worker's shards move at once); one
 * answered `NotOwner` means this worker's view is stale: it runs a lease
 * round and routes once more. Forwarded requests carry the
 * `ctxd-forwarded` header and are never forwarded again.
 */
import { Errors, Subjects } from "@ctxd/contracts"
import { Endpoint, type FlowControl, type NatsClient, Permits, Request } from "@ctxd/nats"
import { type Membership, ShardLeases } from "@ctxd/sharding"
import { Cause, Effect, Option } from "effect"
import { Assembler } from "./Assembler.ts"

const { DIRECT_HEADER, FORWARDED_HEADER, WORKER_HEADER } = Subjects

/** Reply header (value `1`) of a `NotOwner` answer, so a forwarding worker sees it without parsing the reply. */
const NOT_OWNER_HEADER = "ctxd-not-owner"

/** A session's ids. */
export type Ids = { readonly tenant: string; readonly session: string }
type Routed = Effect.Effect<Endpoint.Reply, never, NatsClient.NatsClient>

/** Routing for one worker; `forwardTimeoutMs`: how long a forwarded request waits for the owner's reply. */
export const make = (options: {
  /** How long a forwarded request waits for the owner's reply, in ms. */
  readonly forwardTimeoutMs: number
  /**
   * The worker's flow limits: its turn slots (turns whose CPU work runs at
   * once; forwards and turns waiting for a slot do not count) and the CPU
   * slice before the socket reads get their turn.
   */
  readonly limits: FlowControl.Limits
}) =>
  Effect.gen(function* () {
    const { forwardTimeoutMs, limits } = options
    const turns = yield* Permits.make(limits.turnSlots)
    const assembler = yield* Assembler
    const leases = yield* ShardLeases.ShardLeases
    const self = leases.self
    const tags = { [WORKER_HEADER]: self.id, [DIRECT_HEADER]: self.address }
    let forwarded = 0
    let handled = 0

    const answer = (value: unknown) => Endpoint.reply({ value, headers: tags })
    const notOwnerTags = { ...tags, [NOT_OWNER_HEADER]: "1" }

    /**
     * The error reply, logged by code, path and sizes: the message is logged
     * redacted (quoted values replaced by their length), since error
     * messages may echo what the caller sent (prompts, secrets).
     */
    const rejected = (error: Errors.WireError, requestBytes?: number) => {
      const reply = Errors.toReply(error)
      const log =
        error._tag === "InternalError" || error._tag === "ServiceUnavailable"
          ? Effect.logWarning
          : error._tag === "NotOwner"
            ? Effect.logDebug
            : Effect.logInfo
      return log(`turn rejected: ${reply.error.code}`).pipe(
        Effect.annotateLogs({
          code: reply.error.code,
          ...(reply.error.path === undefined ? {} : { path: reply.error.path }),
          ...(requestBytes === undefined ? {} : { requestBytes }),
          reason: Errors.redact(reply.error.message),
        }),
        Effect.as(error._tag === "NotOwner" ? Endpoint.reply({ value: reply, headers: notOwnerTags }) : answer(reply)),
      )
    }

    const notOwner = (shard: number, why: string) =>
      rejected(
        new Errors.NotOwner({
          message: `worker ${self.id} does not own shard ${shard}: ${why}`,
          hint: "retry with the same turnId; the shard is being handed over",
        }),
      )

    const badSubject = (subject: string, expected: string) =>
      Effect.succeed(
        answer(
          Errors.toReply(
            new Errors.BadRequest({
              message: `bad subject ${JSON.stringify(subject)}: expected ${expected}`,
              hint: "tenant and session must match [A-Za-z0-9_-]{1,128}",
            }),
          ),
        ),
      )

    // one step after the turn: counted whatever its end, answered or rejected. The turn holds its
    // slot and releases it itself once only its commit remains; a slot freed at a commit goes to the
    // next turn at once: without a yield, turns would run back to back while commits wait and, under
    // a burst of heavy turns, the socket would go unread until the server cut the worker off as a
    // slow consumer
    const local = (tenant: string, session: string, data: Uint8Array): Routed =>
      Effect.matchCauseEffect(
        turns.withSlot((slot) => Effect.zipRight(Endpoint.yieldIfBusy(limits.sliceMs), assembler.turn(tenant, session, data, slot))),
        {
          onSuccess: ({ reply, utf8 }) => {
            handled++
            return Effect.succeed(Endpoint.reply({ value: reply, bytes: utf8, headers: tags }))
          },
          onFailure: (cause) => {
            handled++
            const failure = Cause.failureOption(cause)
            return Option.isSome(failure) ? rejected(failure.value, data.byteLength) : Effect.failCause(cause as Cause.Cause<never>)
          },
        },
      )

    /**
     * Sends the request to `owner` and relays its reply. When the owner is not
     * (or no longer) the owner, this worker's view is stale: it runs a lease
     * round (rate-limited) and routes once more; when nobody listens on the
     * owner's subject it reports it (a dead worker's shards then move at once)
     * and routes once more if that changed anything.
     */
    const forward = (owner: Membership.Worker, shard: number, ids: Ids, data: Uint8Array, again: boolean): Routed =>
      Effect.suspend(() => {
        forwarded++
        return Request.request(`${owner.address}.turn.${ids.tenant}.${ids.session}`, data, {
          timeoutMs: forwardTimeoutMs,
          headers: Request.headers({ [FORWARDED_HEADER]: "1" }),
        })
      }).pipe(
        Effect.flatMap((msg) =>
          again && msg.headers?.get(NOT_OWNER_HEADER) === "1"
            ? Effect.zipRight(leases.refreshSoon, route(shard, ids, data, false))
            : Effect.succeed(Endpoint.reply({ bytes: msg.data, headers: msg.headers })),
        ),
        Effect.catchAll((error) => {
          if (error._tag !== "NoResponders") {
            return rejected(
              new Errors.ServiceUnavailable({
                message: `the owner of shard ${shard} (${owner.id}) did not answer: ${error.message}`,
                hint: "retry with the same turnId",
              }),
            )
          }
          // gone from NATS: if it is dead, its shards move now rather than after the TTL
          return Effect.flatMap(leases.unreachable(owner.id), (changed) =>
            changed && again ? route(shard, ids, data, false) : notOwner(shard, `its owner ${owner.id} is not reachable`),
          )
        }),
      )

    /** Handles the request here if this worker owns the shard, else forwards it to the owner. */
    const route = (shard: number, ids: Ids, data: Uint8Array, again: boolean): Routed =>
      Effect.gen(function* () {
        if (yield* leases.isOwner(shard)) return yield* local(ids.tenant, ids.session, data)
        const owner = yield* leases.owner(shard)
        if (Option.isNone(owner)) return yield* notOwner(shard, "no owner is known yet")
        if (owner.value.id === self.id) {
          // assigned here, not claimed yet: claim it now rather than at the next round
          yield* leases.refreshSoon
          if (yield* leases.isOwner(shard)) return yield* local(ids.tenant, ids.session, data)
          return yield* notOwner(shard, "it is being taken over")
        }
        return yield* forward(owner.value, shard, ids, data, again)
      })

    /** A request on the shared (queue group) subject: handled here if this worker owns the shard, else forwarded. */
    const shared = (ids: Ids, data: Uint8Array, forwardedRequest: boolean): Routed => {
      const shard = leases.shardOf(ids.tenant, ids.session)
      if (leases.isOwnerNow(shard)) return local(ids.tenant, ids.session, data)
      if (forwardedRequest) return notOwner(shard, "a forwarded request is not forwarded again")
      return route(shard, ids, data, true)
    }

    /** A request on this worker's direct subject: handled only while it owns the shard (after a lease round if not). */
    const direct = (ids: Ids, data: Uint8Array): Routed => {
      const shard = leases.shardOf(ids.tenant, ids.session)
      if (leases.isOwnerNow(shard)) return local(ids.tenant, ids.session, data)
      return Effect.gen(function* () {
        // another worker believes this one owns it: maybe a handover this worker has not seen yet
        yield* leases.refreshSoon
        if (yield* leases.isOwner(shard)) return yield* local(ids.tenant, ids.session, data)
        return yield* notOwner(shard, "it is owned by another worker or being handed over")
      })
    }

    /** A turn request's log annotations (its endpoint sets them on the request's fiber). */
    const logAnnotations = (ids: Ids) => ({ tenant: ids.tenant, session: ids.session, shard: leases.shardOf(ids.tenant, ids.session) })

    return {
      shared,
      direct,
      logAnnotations,
      badSubject,
      /** This worker's direct subject prefix. */
      address: self.address,
      handled: () => handled,
      forwarded: () => forwarded,
    } as const
  })
