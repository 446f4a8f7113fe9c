/**
 * The queue-group endpoint on `<root>.v1.turn.<tenant>.<session>`: any worker
 * of the group takes a request, the assembler answers it, and every failure
 * becomes an error envelope — nothing a caller sends can crash the worker.
 */
import { Errors, type Subjects } from "@ctxd/contracts"
import { Endpoint } from "@ctxd/nats"
import { Effect } from "effect"
import { Assembler } from "./Assembler.ts"

export interface TurnEndpointOptions {
  readonly subjects: Subjects.Subjects
  /** Queue group shared by all workers (default `ctxd-workers`). */
  readonly queue: string
  /** Turns handled at once by this worker. */
  readonly maxConcurrent: number
  /** Largest accepted request in bytes. */
  readonly maxPayload: number
  /** How long in-flight turns may take to finish when the endpoint closes. */
  readonly drainTimeoutMs: number
}

/** Serves turn requests until the surrounding scope closes (then drains). */
export const serve = (options: TurnEndpointOptions) =>
  Effect.gen(function* () {
    const assembler = yield* Assembler
    return yield* Endpoint.serve({
      subject: options.subjects.turnWildcard,
      queue: options.queue,
      maxConcurrent: options.maxConcurrent,
      maxPayload: options.maxPayload,
      drainTimeoutMs: options.drainTimeoutMs,
      handler: ({ subject, data }) => {
        const ids = options.subjects.parseSession(subject)
        if (ids === undefined) {
          return Effect.succeed(
            Errors.toReply(
              new Errors.BadRequest({
                message: `bad subject ${JSON.stringify(subject)}: expected ${options.subjects.root}.v1.turn.<tenant>.<session>`,
                hint: "tenant and session must match [A-Za-z0-9_-]{1,128}",
              }),
            ),
          )
        }
        return assembler.turn(ids.tenant, ids.session, data).pipe(
          Effect.catchAll((error) => {
            const reply = Errors.toReply(error)
            const log = error._tag === "InternalError" || error._tag === "ServiceUnavailable" ? Effect.logWarning : Effect.logInfo
            return log(`turn rejected: ${reply.error.code}: ${reply.error.message}`).pipe(
              Effect.annotateLogs({ tenant: ids.tenant, session: ids.session }),
              Effect.as(reply),
            )
          }),
        )
      },
    })
  })
