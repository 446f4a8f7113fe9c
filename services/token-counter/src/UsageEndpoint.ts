/**
 * `<root>.v1.usage.<tenant>.<session>`: the usage the provider billed for a
 * turn (`{turnId, usage}`, either provider's field names) feeds drift and
 * calibration. The turn's own estimate comes from whoever stored the turn
 * report (the assembler's store), through `lookup`; a turn it does not know
 * is rejected as `unknown_turn`. Every rejection is a `BadRequest` envelope
 * and leaves calibration untouched.
 */
import { type Subjects } from "@ctxd/contracts"
import { Endpoint } from "@ctxd/nats"
import { Effect, Either, Option } from "effect"
import { type Model, TokenService, unknownTurn } from "./TokenService.ts"
import { Tokens } from "@ctxd/contracts"

const { toWireError, UsageReport } = Tokens
type UsageReply = Tokens.UsageReply

/** What the turn report said about a turn (report `tokens.total` and `counter`). */
export interface TurnEstimate {
  readonly model: Model
  /** The prompt estimate (report `tokens.total`). */
  readonly estimate: number
  /** Report `counter.backend`. */
  readonly backend: string
  /** Report `counter.calibration` (1 when none). */
  readonly calibration: number
}

/** Finds a turn's estimate; `None` when the session never answered that turn. */
export type Lookup<E, R> = (tenant: string, session: string, turnId: string) => Effect.Effect<Option.Option<TurnEstimate>, E, R>

/** The reply to one raw usage report for `tenant`/`session`. */
export const handle = <E, R>(
  tenant: string,
  session: string,
  data: Uint8Array,
  lookup: Lookup<E, R>,
): Effect.Effect<UsageReply | ReturnType<typeof Endpoint.errorReply>, never, TokenService | R> =>
  Effect.gen(function* () {
    const report = Endpoint.decodeRequest(UsageReport, data, "send {turnId, usage} with the provider's usage object (non-negative whole token counts)")
    if (Either.isLeft(report)) return report.left
    const { turnId, usage } = report.right
    const found = yield* Effect.either(lookup(tenant, session, turnId))
    if (Either.isLeft(found)) return Endpoint.errorReply("Unavailable", "the turn store is unavailable; retry", { hint: String(found.left) })
    const service = yield* TokenService
    const result = yield* Option.match(found.right, {
      onNone: () => Effect.fail(unknownTurn(turnId)),
      onSome: (turn) => service.recordUsage({ tenant, session, turnId, usage, ...turn }),
    }).pipe(Effect.either)
    if (Either.isLeft(result)) {
      const wire = toWireError(result.left)
      return Endpoint.errorReply("BadRequest", wire.message, { path: wire.path, hint: wire.hint })
    }
    return { ok: true as const, turnId, billed: result.right.billed, drift: result.right.drift, factor: result.right.factor }
  })

/** How to serve. */
export interface UsageEndpointOptions<E, R> {
  readonly subjects: Subjects.Subjects
  /** Queue group; default `ctxd-usage`. */
  readonly queue?: string | undefined
  readonly lookup: Lookup<E, R>
}

/** Serves `<root>.v1.usage.>` until the surrounding scope closes. */
export const serve = <E, R>(options: UsageEndpointOptions<E, R>) =>
  Endpoint.serve({
    subject: options.subjects.usageWildcard,
    queue: options.queue ?? "ctxd-usage",
    handler: ({ subject, data }) => {
      const ids = options.subjects.parseSession(subject)
      if (ids === undefined) {
        return Effect.succeed(
          Endpoint.errorReply("BadRequest", `bad subject ${JSON.stringify(subject)}: expected ${options.subjects.root}.v1.usage.<tenant>.<session>`),
        )
      }
      return handle(ids.tenant, ids.session, data, options.lookup)
    },
  })
