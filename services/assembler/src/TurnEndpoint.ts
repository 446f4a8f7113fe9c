/**
 * The turn endpoints of one worker, with sticky routing: a session's turns
 * run on the worker that owns the session's shard (`ShardLeases`).
 *
 * - `<root>.v1.turn.<tenant>.<session>` (queue group: any worker may get a
 *   request): the owner handles it; any other worker forwards the request's
 *   bytes to the owner's direct subject and relays the owner's reply as it
 *   is. When no owner is known, or the owner cannot be reached, the reply is
 *   `NotOwner` (retryable: the client retries with backoff and the same
 *   turnId, and a handover ends within a lease round or two). A forward that
 *   meets no responders reports the owner (`ShardLeases.unreachable`: a dead
 *   worker's shards move at once); one answered `NotOwner` means this
 *   worker's view is stale: it runs a lease round and routes once more.
 * - `<address>.turn.<tenant>.<session>`, where the address is this worker's
 *   `<root>.v1.worker.<workerId>` (no queue group): handled only while this
 *   worker owns the shard (after a lease round if it does not: a sender
 *   believes it should), else `NotOwner`. Forwarded requests carry the
 *   `ctxd-forwarded` header and are never forwarded again.
 *
 * Every reply carries the `ctxd-worker` header (the id of the worker that
 * handled it) and `ctxd-direct` (its direct subject prefix, so a client may
 * send the session's next turns there). Nothing a caller sends can crash
 * the worker: every failure becomes an error envelope.
 */
import { Errors, Subjects } from "@ctxd/contracts"
import { Endpoint, type NatsClient, Request } from "@ctxd/nats"
import { type Membership, ShardLeases } from "@ctxd/sharding"
import { Effect, Option } from "effect"
import { Assembler } from "./Assembler.ts"

const { DIRECT_HEADER, FORWARDED_HEADER, WORKER_HEADER } = Subjects

/** Reply header (value `1`) of a `NotOwner` answer, so a forwarding worker sees it without parsing the reply. */
const NOT_OWNER_HEADER = "ctxd-not-owner"

export interface TurnEndpointOptions {
  readonly subjects: Subjects.Subjects
  /** Queue group shared by all workers (default `ctxd-workers`). */
  readonly queue: string
  /** Requests handled at once by each of the two endpoints (queue group and direct). */
  readonly maxConcurrent: number
  /** Largest accepted request in bytes. */
  readonly maxPayload: number
  /** How long in-flight turns may take to finish when the endpoint closes. */
  readonly drainTimeoutMs: number
  /** How long a forwarded request waits for the owner's reply, in ms; default 5,000. */
  readonly forwardTimeoutMs?: number | undefined
}

/** The running endpoints. */
export interface TurnEndpoints {
  /** Requests accepted and not answered yet, on both subjects. */
  readonly inFlight: () => number
  /** Turns handled here (as the owner of their shard) so far, answered with a success or an error. */
  readonly handled: () => number
  /** Requests forwarded to another worker so far. */
  readonly forwarded: () => number
  /** The direct subject prefix of this worker. */
  readonly direct: string
}

/** Serves turn requests on both subjects until the surrounding scope closes (then drains). */
export const serve = (options: TurnEndpointOptions) =>
  Effect.gen(function* () {
    const assembler = yield* Assembler
    const leases = yield* ShardLeases.ShardLeases
    const self = leases.self
    const forwardTimeoutMs = options.forwardTimeoutMs ?? 5_000
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

    const local = (tenant: string, session: string, data: Uint8Array) =>
      assembler.turn(tenant, session, data).pipe(
        Effect.map(answer),
        Effect.catchAll((error) => rejected(error, data.byteLength)),
        Effect.ensuring(Effect.sync(() => void handled++)),
      )

    type Ids = { readonly tenant: string; readonly session: string }
    type Routed = Effect.Effect<Endpoint.Reply, never, NatsClient.NatsClient>

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
            changed && again
              ? route(shard, ids, data, false)
              : notOwner(shard, `its owner ${owner.id} is not reachable`),
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

    const onShared = (subject: string, data: Uint8Array, forwardedRequest: boolean) => {
      const ids = options.subjects.parseSession(subject)
      if (ids === undefined) return badSubject(subject, `${options.subjects.root}.v1.turn.<tenant>.<session>`)
      const shard = leases.shardOf(ids.tenant, ids.session)
      return Effect.gen(function* () {
        if (forwardedRequest && !(yield* leases.isOwner(shard))) {
          return yield* notOwner(shard, "a forwarded request is not forwarded again")
        }
        return yield* route(shard, ids, data, true)
      }).pipe(Effect.annotateLogs({ tenant: ids.tenant, session: ids.session, shard }))
    }

    const prefix = `${self.address}.turn.`
    const onDirect = (subject: string, data: Uint8Array) => {
      const tokens = subject.startsWith(prefix) ? subject.slice(prefix.length).split(".") : []
      const ids = tokens.length === 2 ? options.subjects.parseSession(options.subjects.turn(tokens[0]!, tokens[1]!)) : undefined
      if (ids === undefined) return badSubject(subject, `${prefix}<tenant>.<session>`)
      const shard = leases.shardOf(ids.tenant, ids.session)
      return Effect.gen(function* () {
        if (yield* leases.isOwner(shard)) return yield* local(ids.tenant, ids.session, data)
        // another worker believes this one owns it: maybe a handover this worker has not seen yet
        yield* leases.refreshSoon
        if (yield* leases.isOwner(shard)) return yield* local(ids.tenant, ids.session, data)
        return yield* notOwner(shard, "it is owned by another worker or being handed over")
      }).pipe(Effect.annotateLogs({ tenant: ids.tenant, session: ids.session, shard }))
    }

    const common = {
      maxConcurrent: options.maxConcurrent,
      maxPayload: options.maxPayload,
      drainTimeoutMs: options.drainTimeoutMs,
    }
    // the queue group is subscribed last, so at shutdown it drains first:
    // no new turns arrive while forwarded ones still reach the direct subject
    const own = yield* Endpoint.serve({
      ...common,
      subject: `${prefix}>`,
      handler: ({ subject, data }) => onDirect(subject, data),
    })
    const shared = yield* Endpoint.serve({
      ...common,
      subject: options.subjects.turnWildcard,
      queue: options.queue,
      handler: ({ subject, data, headers }) => onShared(subject, data, headers?.get(FORWARDED_HEADER) === "1"),
    })

    return {
      inFlight: () => shared.inFlight() + own.inFlight(),
      handled: () => handled,
      forwarded: () => forwarded,
      direct: self.address,
    } satisfies TurnEndpoints
  })
