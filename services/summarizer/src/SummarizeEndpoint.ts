/**
 * `<root>.v1.summarize` (default root `ctx`): summarize a span of messages
 * given in either provider format, over NATS, with the {@link Summarizer}
 * of this process. Served in a queue group (default `ctxd-summarizer`).
 * Messages are labelled 1..n in the transcript. Errors: malformed input →
 * `BadRequest`; the provider failing after the retries → `Unavailable`; a
 * span too large even hierarchically → `TooLarge`.
 */
import { Normalize } from "@ctxd/context"
import { Errors, Requests, Subjects, Summarize } from "@ctxd/contracts"
import { Endpoint } from "@ctxd/nats"
import { Effect, Either } from "effect"
import { Summarizer } from "./Summarizer.ts"

/** `<root>.v1.summarize` */
export const subject = (root: string = Subjects.DEFAULT_ROOT): string => Subjects.make(root).summarize

/** How to serve; every field has a default. */
export interface SummarizeEndpointOptions {
  /** Subject root; default `ctx`. */
  readonly root?: string | undefined
  /** Queue group; default `ctxd-summarizer`. */
  readonly queue?: string | undefined
  /** Requests handled at once; default 16 (each may make several provider calls). */
  readonly maxConcurrent?: number | undefined
  /** Largest accepted request in bytes; default none of our own. */
  readonly maxPayload?: number | undefined
}


/** The reply to one raw request (exported for tests and in-process callers). */
export const handle = (
  data: Uint8Array,
): Effect.Effect<Summarize.SummarizeReply | ReturnType<typeof Endpoint.errorReply>, never, Summarizer> =>
  Effect.gen(function* () {
    const request = Requests.decode(Summarize.SummarizeRequest, data, { what: "summarize requests", hint: "send {format, model: {provider, name}, messages: [...] (input: [...] for openai-responses, contents: [...] for gemini), mode?, previousSummary?, maxBullets?}" })
    if (Either.isLeft(request)) return request.left
    const r = request.right
    const messages = Normalize.fromHistory(r)
    const summarizer = yield* Summarizer
    const result = yield* Effect.either(
      summarizer.summarize({
        items: messages.map((message, i) => ({ seq: i + 1, message })),
        sessionModel: { provider: r.model.provider, name: r.model.name },
        mode: r.mode,
        previous: r.previousSummary,
        maxBullets: r.maxBullets,
      }),
    )
    if (Either.isLeft(result)) {
      const e = result.left
      // capped: a provider's error text is not ours to bound
      return Errors.capReply(
        e.reason === "provider"
          ? Endpoint.errorReply("Unavailable", e.message, { hint: "the summarizer's provider failed after retries; retry later" })
          : e.reason === "too_large"
            ? Endpoint.errorReply("TooLarge", e.message, { hint: "send a shorter span or raise CTXD_SUMMARIZER_MAX_DEPTH" })
            : Endpoint.errorReply("BadRequest", e.message),
      )
    }
    const s = result.right
    return {
      ok: true as const,
      text: s.text,
      mode: s.mode,
      depth: s.depth,
      model: s.model,
      provider: s.provider,
      tokensIn: s.tokensIn,
      tokensOut: s.tokensOut,
      calls: s.calls,
      truncatedToolResults: s.truncatedToolResults,
      fallback: s.fallback,
      snapshot: s.snapshot,
    }
  })

/** Serves `<root>.v1.summarize` until the surrounding scope closes. */
export const serve = (options: SummarizeEndpointOptions = {}) =>
  Effect.gen(function* () {
    const summarizer = yield* Summarizer
    return yield* Endpoint.serve({
      subject: subject(options.root),
      queue: options.queue ?? "ctxd-summarizer",
      maxConcurrent: options.maxConcurrent ?? 16,
      maxPayload: options.maxPayload,
      handler: ({ data }) => Effect.provideService(handle(data), Summarizer, summarizer),
    })
  })
