/**
 * `<root>.v1.tokens.count` (default root `ctx`): count a whole provider
 * request body or a list of text segments for a model, over NATS, with the
 * {@link TokenCounter} of this process. Served in a queue group (default
 * `ctxd-token-counter`), so any number of workers share the subject.
 * Malformed requests get a `BadRequest` envelope; counting itself never fails
 * (a sick provider means a local answer with `exact: false`).
 */
import { Requests, Subjects, Tokens } from "@ctxd/contracts"
import { Endpoint } from "@ctxd/nats"
import { Effect, Either } from "effect"
import { TokenCounter } from "./TokenCounter.ts"

/** `<root>.v1.tokens.count` */
export const subject = (root: string = Subjects.DEFAULT_ROOT): string => `${root}.v1.tokens.count`

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
}


/** The reply to one raw request (exported for tests and for in-process callers). */
export const handle = (data: Uint8Array): Effect.Effect<Tokens.CountReply | ReturnType<typeof Endpoint.errorReply>, never, TokenCounter> =>
  Effect.gen(function* () {
    const request = Requests.decode(Tokens.CountRequest, data, { what: "count requests", hint: "send {model: {provider, name}, backend?, body} or {model, backend?, segments: [text, ...]}" })
    if (Either.isLeft(request)) return request.left
    const service = yield* TokenCounter
    const r = yield* service.countRequest(request.right)
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

/** Serves `<root>.v1.tokens.count` until the surrounding scope closes. */
export const serve = (options: CountEndpointOptions = {}) =>
  Effect.gen(function* () {
    const service = yield* TokenCounter
    return yield* Endpoint.serve({
      subject: subject(options.root),
      queue: options.queue ?? "ctxd-token-counter",
      maxConcurrent: options.maxConcurrent,
      maxPayload: options.maxPayload,
      handler: ({ data }) => Effect.provideService(handle(data), TokenCounter, service),
    })
  })
