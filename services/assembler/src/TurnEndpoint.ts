/**
 * The turn endpoints of one worker: the subjects and their decoding; what
 * happens to a request is `Routing`'s.
 *
 * - `<root>.v1.turn.<tenant>.<session>` (queue group: any worker may get a
 *   request) → `Routing.shared`;
 * - `<address>.turn.<tenant>.<session>`, where the address is this worker's
 *   `<root>.v1.worker.<workerId>` (no queue group) → `Routing.direct`.
 *
 * Every reply carries the `ctxd-worker` header (the id of the worker that
 * handled it) and `ctxd-direct` (its direct subject prefix, so a client may
 * send the session's next turns there). Nothing a caller sends can crash
 * the worker: every failure becomes an error envelope.
 *
 * Both subjects hold a request's bytes against its tenant's share of the
 * worker's byte budget (`Admission`), read from the subject before anything
 * is decoded.
 */
import { Subjects } from "@ctxd/contracts"
import { Endpoint, type FlowControl } from "@ctxd/nats"
import { Effect } from "effect"
import * as Routing from "./Routing.ts"

const { FORWARDED_HEADER } = Subjects

export interface TurnEndpointOptions {
  readonly subjects: Subjects.Subjects
  /** Queue group shared by all workers (default `ctxd-workers`). */
  readonly queue: string
  /**
   * The worker's flow limits (`FlowControl.derive`): its turn slots, over
   * both subjects (a turn gives its slot back once only its commit remains),
   * the requests each subject takes at once, and the CPU slice.
   */
  readonly limits: FlowControl.Limits
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
    const routing = yield* Routing.make({ forwardTimeoutMs: options.forwardTimeoutMs ?? 5_000, limits: options.limits })

    const onShared = (subject: string, data: Uint8Array, forwardedRequest: boolean) => {
      const ids = options.subjects.parseSession(subject)
      if (ids === undefined) return routing.badSubject(subject, `${options.subjects.root}.v1.turn.<tenant>.<session>`)
      return routing.shared(ids, data, forwardedRequest)
    }

    const prefix = `${routing.address}.turn.`
    const idsOfDirect = (subject: string) => {
      const tokens = subject.startsWith(prefix) ? subject.slice(prefix.length).split(".") : []
      return tokens.length === 2 ? options.subjects.parseSession(options.subjects.turn(tokens[0]!, tokens[1]!)) : undefined
    }
    const onDirect = (subject: string, data: Uint8Array) => {
      const ids = idsOfDirect(subject)
      if (ids === undefined) return routing.badSubject(subject, `${prefix}<tenant>.<session>`)
      return routing.direct(ids, data)
    }

    const annotationsOf = (ids: Routing.Ids | undefined) => (ids === undefined ? undefined : routing.logAnnotations(ids))
    const tenantOfShared = (subject: string) => options.subjects.parseSession(subject)?.tenant
    const tenantOfDirect = (subject: string) => {
      const tenant = subject.startsWith(prefix) ? subject.slice(prefix.length).split(".", 1)[0] : undefined
      return tenant === undefined || !Subjects.isValidToken(tenant) ? undefined : tenant
    }
    const common = {
      maxConcurrent: options.limits.requestsPerSubject,
      maxPending: options.limits.requestsWaiting,
      maxPayload: options.maxPayload,
      drainTimeoutMs: options.drainTimeoutMs,
    }
    // the queue group is subscribed last, so at shutdown it drains first:
    // no new turns arrive while forwarded ones still reach the direct subject
    const own = yield* Endpoint.serve({
      ...common,
      subject: `${prefix}>`,
      tenantOf: tenantOfDirect,
      logAnnotations: (subject) => annotationsOf(idsOfDirect(subject)),
      handler: ({ subject, data }) => onDirect(subject, data),
    })
    const shared = yield* Endpoint.serve({
      ...common,
      subject: options.subjects.turnWildcard,
      queue: options.queue,
      tenantOf: tenantOfShared,
      logAnnotations: (subject) => annotationsOf(options.subjects.parseSession(subject)),
      handler: ({ subject, data, headers }) => onShared(subject, data, headers?.get(FORWARDED_HEADER) === "1"),
    })

    return {
      inFlight: () => shared.inFlight() + own.inFlight(),
      handled: routing.handled,
      forwarded: routing.forwarded,
      direct: routing.address,
    } satisfies TurnEndpoints
  })
