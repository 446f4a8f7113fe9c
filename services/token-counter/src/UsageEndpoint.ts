/**
 * `<root>.v1.usage.<tenant>.<session>`: the usage the provider billed for a
 * turn (`{turnId, usage}`, either provider's field names) feeds drift and
 * calibration. The turn's own estimate comes from whoever stored the turn
 * report (the assembler's store), through `lookup`; a turn it does not know
 * is rejected as `unknown_turn`. Every rejection is a `BadRequest` envelope
 * and leaves calibration untouched.
 *
 * A turn's usage is counted once: after the report is validated, `claim`
 * records `(tenant, session, turnId)` durably (the worker uses
 * `UsageStore`, shared by all workers); a later report of the same turn is
 * answered with `counted: false` and changes nothing. Without `claim`, an
 * in-process set of the last {@link LOCAL_CLAIMS} turns stands in (one
 * process only). Calibration is per tenant (see `CalibrationState`).
 *
 * When the turn's report expected cache reads (`report.cache.expectedReadTokens`,
 * through `lookup`), the reply carries `cache`: the billed reads and writes
 * against it and whether the cache broke where ctxd did not break it (the
 * rule is in {@link CacheCheck}); the first report of the turn counts it in
 * `ctxd_cache_break_total{reason}`. A duplicate is compared the same way
 * and counts nothing. Without an expectation the reply is as before.
 */
import { CacheDiagnostics } from "@ctxd/context"
import { Errors, Issues, Requests, type Subjects } from "@ctxd/contracts"
import { Endpoint } from "@ctxd/nats"
import { Effect, Either, Option } from "effect"
import * as CacheCheck from "./CacheCheck.ts"
import * as Calibration from "./Calibration.ts"
import * as UsageMetrics from "./UsageMetrics.ts"
import { type Model, TokenCounter, unknownTurn } from "./TokenCounter.ts"
import { Tokens } from "@ctxd/contracts"

const { toWireError, UsageReport } = Tokens
type UsageReply = Tokens.UsageReply
type UsageReport = Tokens.UsageReport

/** What the turn report said about a turn (report `tokens.total` and `counter`). */
export interface TurnEstimate {
  readonly model: Model
  /** The prompt estimate (report `tokens.total`). */
  readonly estimate: number
  /** Report `counter.backend`. */
  readonly backend: string
  /** Report `counter.calibration` (1 when none). */
  readonly calibration: number
  /** Report `cache.expectedReadTokens` and friends; absent when the report has none (older workers). */
  readonly cache?: CacheCheck.Expectation | undefined
}

/** Finds a turn's estimate; `None` when the session never answered that turn. */
export type Lookup<E, R> = (tenant: string, session: string, turnId: string) => Effect.Effect<Option.Option<TurnEstimate>, E, R>

/** Claims a turn's usage report: true for the first report of the turn (count it), false for a duplicate. */
export type Claim<E, R> = (tenant: string, session: string, turnId: string, billed: number) => Effect.Effect<boolean, E, R>

/** Turns remembered by the in-process stand-in for `claim`. */
export const LOCAL_CLAIMS = 100_000

/** A process-local {@link Claim} (the last {@link LOCAL_CLAIMS} turns): for a counter without a database. */
export const localClaim = (): Claim<never, never> => {
  const seen = new Set<string>()
  return (tenant, session, turnId) =>
    Effect.sync(() => {
      const key = JSON.stringify([tenant, session, turnId])
      if (seen.has(key)) return false
      seen.add(key)
      if (seen.size > LOCAL_CLAIMS) seen.delete(seen.values().next().value as string)
      return true
    })
}

const HINT = "send {turnId, usage} with the provider's usage object (non-negative whole token counts)"

const badRequest = (message: string, path?: string, hint?: string) =>
  Errors.toReply(new Errors.BadRequest({ message, ...(path === undefined ? {} : { path }), ...(hint === undefined ? {} : { hint }) }))

const decode = (data: Uint8Array): Either.Either<UsageReport, Errors.ErrorReply> =>
  Requests.decode(UsageReport, data, { what: "usage reports", hint: HINT })

const unavailable = (what: string, error: unknown) =>
  Errors.toReply(new Errors.ServiceUnavailable({ message: `the ${what} is unavailable; retry`, hint: String(error) }))

/** The cache verdict of a usage report `recordUsage` accepted (so it parses), with the provider's diagnostics when given. */
const cacheVerdict = (
  expectation: CacheCheck.Expectation,
  usage: unknown,
  estimate: number,
  diagnostics: unknown,
): CacheCheck.Verdict | undefined =>
  Either.match(Calibration.parseUsage(usage), {
    onLeft: () => undefined,
    onRight: (parsed) => CacheCheck.compare(expectation, parsed, estimate, CacheCheck.defaultTolerance, CacheDiagnostics.read(diagnostics)),
  })

/** The reply to one raw usage report for `tenant`/`session`. */
export const handle = <E, R, E2 = never, R2 = never>(
  tenant: string,
  session: string,
  data: Uint8Array,
  lookup: Lookup<E, R>,
  /** Default: every report counts (no dedupe); {@link serve} always passes one. */
  claim: Claim<E2, R2> = () => Effect.succeed(true),
): Effect.Effect<UsageReply | Errors.ErrorReply, never, TokenCounter | R | R2> =>
  Effect.gen(function* () {
    const report = decode(data)
    if (Either.isLeft(report)) return report.left
    const { turnId, usage } = report.right
    const found = yield* Effect.either(lookup(tenant, session, turnId))
    if (Either.isLeft(found)) return unavailable("turn store", found.left)
    const service = yield* TokenCounter
    // validate first (nothing recorded), so a malformed report never claims the turn
    const checked = yield* Option.match(found.right, {
      onNone: () => Effect.fail(unknownTurn(turnId)),
      onSome: (turn) =>
        Effect.map(service.recordUsage({ tenant, session, turnId, usage, ...turn, count: false }), (dry) => ({ turn, dry })),
    }).pipe(Effect.either)
    if (Either.isLeft(checked)) {
      const wire = toWireError(checked.left)
      return badRequest(wire.message, wire.path, wire.hint)
    }
    const { turn, dry } = checked.right
    const { cache: expectation, ...estimated } = turn
    const first = yield* Effect.either(claim(tenant, session, turnId, dry.billed))
    if (Either.isLeft(first)) return unavailable("usage store", first.left)
    const result = first.right ? yield* Effect.orDie(service.recordUsage({ tenant, session, turnId, usage, ...estimated })) : dry
    const cache = expectation === undefined ? undefined : cacheVerdict(expectation, usage, turn.estimate, report.right.diagnostics)
    if (cache !== undefined && first.right) yield* Effect.zipRight(CacheCheck.record(cache), CacheCheck.recordMisses(tenant, cache))
    if (first.right) {
      const parsed = Calibration.parseUsage(usage)
      if (Either.isRight(parsed)) yield* UsageMetrics.record({ tenant, model: turn.model, usage: parsed.right, drift: result.drift })
    }
    return {
      ok: true as const,
      turnId,
      billed: result.billed,
      drift: result.drift,
      factor: result.factor,
      counted: first.right,
      ...(cache === undefined ? {} : { cache }),
    }
  })

/** How to serve. */
export interface UsageEndpointOptions<E, R, E2, R2> {
  readonly subjects: Subjects.Subjects
  /** Queue group; default `ctxd-usage`. */
  readonly queue?: string | undefined
  readonly lookup: Lookup<E, R>
  /** Counts a turn's usage once; default {@link localClaim} (this process only). */
  readonly claim?: Claim<E2, R2> | undefined
}

/** Serves `<root>.v1.usage.>` until the surrounding scope closes. */
export const serve = <E, R, E2 = never, R2 = never>(options: UsageEndpointOptions<E, R, E2, R2>) => {
  const claim = options.claim ?? (localClaim() as Claim<E2, R2>)
  return Endpoint.serve({
    subject: options.subjects.usageWildcard,
    queue: options.queue ?? "ctxd-usage",
    handler: ({ subject, data }) => {
      const ids = options.subjects.parseSession(subject)
      if (ids === undefined) {
        return Effect.succeed(
          badRequest(`bad subject ${Issues.preview(subject)}: expected ${options.subjects.root}.v1.usage.<tenant>.<session>`),
        )
      }
      return handle(ids.tenant, ids.session, data, options.lookup, claim)
    },
  })
}
