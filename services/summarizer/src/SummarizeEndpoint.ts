/**
 * `<root>.v1.summarize.<tenant>` (default root `ctx`): summarize a span of
 * messages given in any turn format, over NATS, with the {@link Summarizer}
 * of this process, on behalf of `<tenant>` (in the subject so NATS
 * permissions can scope who may spend the provider's tokens). The
 * tenant-less `<root>.v1.summarize` is served too unless `legacy` is false
 * (`CTXD_LEGACY_SUBJECTS=false`). Served in a queue group (default
 * `ctxd-summarizer`).
 * Messages are labelled 1..n in the transcript. Errors: malformed input →
 * `BadRequest`, as is no provider key this tenant may use (the message names
 * the variable to set); the provider failing after the retries → `Unavailable`; a
 * span too large even hierarchically → `TooLarge`.
 */
import { Normalize } from "@ctxd/context"
import { Errors, Requests, Subjects, Summarize } from "@ctxd/contracts"
import { Endpoint } from "@ctxd/nats"
import { Effect, Either } from "effect"
import { Summarizer } from "./Summarizer.ts"

/** `<root>.v1.summarize`: the tenant-less subject. */
export const subject = (root: string = Subjects.DEFAULT_ROOT): string => Subjects.make(root).summarize

/** `<root>.v1.summarize.<tenant>` */
export const tenantSubject = (tenant: string, root: string = Subjects.DEFAULT_ROOT): string => Subjects.make(root).summarizeFor(tenant)

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
  /** Serve the tenant-less `<root>.v1.summarize` too; default true. */
  readonly legacy?: boolean | undefined
}

/** The reply to one raw request (exported for tests and in-process callers). */
export const handle = (
  data: Uint8Array,
  /** From the subject; undefined on the tenant-less legacy subject. */
  tenant?: string | undefined,
): Effect.Effect<Summarize.SummarizeReply | ReturnType<typeof Endpoint.errorReply>, never, Summarizer> =>
  Effect.gen(function* () {
    const request = Requests.decode(Summarize.SummarizeRequest, data, {
      what: "summarize requests",
      hint: "send {format, model: {provider, name}, messages: [...] (input: [...] for openai-responses, contents: [...] for gemini), mode?, previousSummary?, maxBullets?}",
    })
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
        tenant,
      }),
    )
    if (Either.isLeft(result)) {
      const e = result.left
      // capped: a provider's error text is not ours to bound
      return Errors.capReply(
        e.cause?.reason === "denied"
          ? Endpoint.errorReply("BadRequest", e.message, {
              hint: "the operator must configure a provider key (the worker's, or this tenant's in its section's `providers`) or allow the tenant the worker's (CTXD_WORKER_KEY_TENANTS)",
            })
          : e.reason === "provider"
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

/**
 * Serves `<root>.v1.summarize.*` (and `<root>.v1.summarize` unless `legacy`
 * is false) until the surrounding scope closes; returns the tenant-scoped
 * endpoint.
 */
export const serve = (options: SummarizeEndpointOptions = {}) =>
  Effect.gen(function* () {
    const summarizer = yield* Summarizer
    const subjects = Subjects.make(options.root ?? Subjects.DEFAULT_ROOT)
    const on = (subject: string) =>
      Endpoint.serve({
        subject,
        queue: options.queue ?? "ctxd-summarizer",
        maxConcurrent: options.maxConcurrent ?? 16,
        maxPayload: options.maxPayload,
        handler: (request) => {
          const tenant = subjects.parseTenant(request.subject)
          const reply = Effect.provideService(handle(request.data, tenant), Summarizer, summarizer)
          return tenant === undefined ? reply : Effect.annotateLogs(reply, { tenant })
        },
      })
    if (options.legacy ?? true) yield* on(subjects.summarize)
    return yield* on(subjects.summarizeWildcard)
  })
