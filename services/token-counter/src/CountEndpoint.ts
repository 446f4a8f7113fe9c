/**
 * `<root>.v1.tokens.count.<tenant>` (default root `ctx`): count a whole
 * provider request body or a list of text segments for a model, over NATS,
 * with the {@link TokenCounter} of this process, on behalf of `<tenant>`
 * (a local count uses that tenant's correction factor; the tenant is in the
 * subject so NATS permissions can scope who may call the providers' count
 * endpoints). The tenant-less `<root>.v1.tokens.count` (global factor) is
 * served too unless `legacy` is false (`CTXD_LEGACY_SUBJECTS=false`).
 * Served in a queue group (default
 * `ctxd-token-counter`), so any number of workers share the subject.
 * Malformed requests get a `BadRequest` envelope; counting itself never fails
 * (a sick provider means a local answer with `exact: false`).
 */
import { Requests, Subjects, Tokens } from "@ctxd/contracts"
import { Endpoint } from "@ctxd/nats"
import { Effect, Either } from "effect"
import { TokenCounter } from "./TokenCounter.ts"

/** `<root>.v1.tokens.count`: the tenant-less subject. */
export const subject = (root: string = Subjects.DEFAULT_ROOT): string => Subjects.make(root).tokensCount

/** `<root>.v1.tokens.count.<tenant>` */
export const tenantSubject = (tenant: string, root: string = Subjects.DEFAULT_ROOT): string => Subjects.make(root).tokensCountFor(tenant)

/** How to serve; every field has a default. */
export interface CountEndpointOptions {
  /** Subject root; default `ctx`. */
  readonly root?: string | undefined
  /** Queue group; default `ctxd-token-counter`. */
  readonly queue?: string | undefined
  /** Requests handled at once; default 64 (the endpoint helper's). */
  readonly maxConcurrent?: number | undefined
  /** Largest accepted request in bytes; default none of our own. */
  readonly maxPayload?: number | undefined
  /** Serve the tenant-less `<root>.v1.tokens.count` too; default true. */
  readonly legacy?: boolean | undefined
}

/**
 * The reply to one raw request (exported for tests and for in-process
 * callers), counted for `tenant` (its correction factor) when given.
 */
export const handle = (
  data: Uint8Array,
  tenant?: string | undefined,
): Effect.Effect<Tokens.CountReply | ReturnType<typeof Endpoint.errorReply>, never, TokenCounter> =>
  Effect.gen(function* () {
    const request = Requests.decode(Tokens.CountRequest, data, {
      what: "count requests",
      hint: "send {model: {provider, name}, backend?, body} or {model, backend?, segments: [text, ...]}",
    })
    if (Either.isLeft(request)) return request.left
    const service = yield* TokenCounter
    const r = yield* service.countRequest(tenant === undefined ? request.right : { ...request.right, tenant })
    return {
      ok: true as const,
      tokens: r.tokens,
      ...(r.segments === undefined ? {} : { segments: r.segments }),
      // `backend` keeps the names old clients decode; `countedBy` says who counted
      backend: Tokens.replyBackend(r.backend),
      countedBy: r.backend,
      encoding: r.encoding,
      exact: r.exact,
      calibration: r.calibration,
      ...(r.fallback === undefined ? {} : { fallback: r.fallback }),
    }
  })

/**
 * Serves `<root>.v1.tokens.count.*` (and `<root>.v1.tokens.count` unless
 * `legacy` is false) until the surrounding scope closes; returns the
 * tenant-scoped endpoint.
 */
export const serve = (options: CountEndpointOptions = {}) =>
  Effect.gen(function* () {
    const service = yield* TokenCounter
    const subjects = Subjects.make(options.root ?? Subjects.DEFAULT_ROOT)
    const on = (subject: string) =>
      Endpoint.serve({
        subject,
        queue: options.queue ?? "ctxd-token-counter",
        maxConcurrent: options.maxConcurrent,
        maxPayload: options.maxPayload,
        handler: (request) => {
          const tenant = subjects.parseTenant(request.subject)
          const reply = Effect.provideService(handle(request.data, tenant), TokenCounter, service)
          return tenant === undefined ? reply : Effect.annotateLogs(reply, { tenant })
        },
      })
    if (options.legacy ?? true) yield* on(subjects.tokensCount)
    return yield* on(subjects.tokensCountWildcard)
  })
