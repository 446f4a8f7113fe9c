/**
 * W3C Trace Context over NATS headers: `traceparent` (and `tracestate`)
 * read from a request continue the caller's trace ({@link continueFrom});
 * the current span written into an outgoing request's headers
 * ({@link headersOf}) continues it on the other side.
 *
 * Parsing follows the W3C rules: `version-traceid-parentid-flags` in
 * lowercase hex, version `ff` and all-zero ids invalid, version `00`
 * exactly four fields (later versions may add fields). An invalid
 * `traceparent` is ignored (the request starts a trace of its own); a
 * `tracestate` longer than {@link MAX_TRACESTATE} characters or without a
 * valid `traceparent` is dropped.
 */
import * as OtelTracer from "@effect/opentelemetry/Tracer"
import { Context, Effect, Option, Tracer } from "effect"

/** The header names (lowercase, as W3C writes them). */
export const TRACEPARENT = "traceparent"
export const TRACESTATE = "tracestate"

/** Longest `tracestate` kept, in characters (W3C: 32 members, 512 characters). */
export const MAX_TRACESTATE = 512

/** A parsed `traceparent` (and `tracestate`). */
export interface SpanContext {
  readonly traceId: string
  readonly spanId: string
  /** W3C trace flags (bit 0: sampled). */
  readonly traceFlags: number
  readonly traceState?: string | undefined
}

const TRACEPARENT_RE = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/
const VALID_IDS = /^[0-9a-f]{32}-[0-9a-f]{16}$/
const ZERO_TRACE = "0".repeat(32)
const ZERO_SPAN = "0".repeat(16)

/** The span context of a `traceparent` header value (and `tracestate`), if valid. */
export const parse = (traceparent: string | undefined, tracestate?: string | undefined): Option.Option<SpanContext> => {
  if (traceparent === undefined || traceparent.length > 512) return Option.none()
  const match = TRACEPARENT_RE.exec(traceparent.trim())
  if (match === null) return Option.none()
  const [, version, traceId, spanId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined]
  if (version === "ff" || (version === "00" && rest !== undefined)) return Option.none()
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return Option.none()
  const state = tracestate?.trim()
  return Option.some({
    traceId,
    spanId,
    traceFlags: Number.parseInt(flags, 16),
    ...(state === undefined || state === "" || state.length > MAX_TRACESTATE ? {} : { traceState: state }),
  })
}

/** The `traceparent` value of a span context. */
export const format = (context: Pick<SpanContext, "traceId" | "spanId" | "traceFlags">): string =>
  `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, "0")}`

/** An Effect parent span for a span context (remote: its children continue the caller's trace). */
export const toSpan = (context: SpanContext): Tracer.ExternalSpan =>
  OtelTracer.makeExternalSpan({
    traceId: context.traceId,
    spanId: context.spanId,
    traceFlags: context.traceFlags,
    ...(context.traceState === undefined ? {} : { traceState: context.traceState }),
  })

/** Something headers can be read from (a NATS `MsgHdrs` fits). */
export interface Readable {
  readonly get: (name: string) => string
}

/** The span context in `headers`, if they carry a valid `traceparent`. */
export const fromHeaders = (headers: Readable | undefined): Option.Option<SpanContext> => {
  if (headers === undefined) return Option.none()
  const value = (name: string) => {
    const v = headers.get(name)
    return v === "" ? undefined : v
  }
  return parse(value(TRACEPARENT), value(TRACESTATE))
}

/** Runs `self` as a continuation of the trace in `headers`, if they carry one; else as it is. */
export const continueFrom =
  (headers: Readable | undefined) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
    const context = fromHeaders(headers)
    return Option.isNone(context) ? self : Effect.withParentSpan(self, toSpan(context.value))
  }

/**
 * The `traceparent` (and `tracestate`) of the current span, to send along
 * with an outgoing request; empty when no span is current.
 */
export const headersOf: Effect.Effect<Readonly<Record<string, string>>> = Effect.flatMap(
  Effect.serviceOption(Tracer.ParentSpan),
  (parent) => {
    // no span, or Effect's no-op span (tracing disabled): nothing to continue
    if (Option.isNone(parent) || !VALID_IDS.test(`${parent.value.traceId}-${parent.value.spanId}`)) return Effect.succeed({})
    const span = parent.value
    const traceparent = format({ traceId: span.traceId, spanId: span.spanId, traceFlags: span.sampled ? 1 : 0 })
    const state: Effect.Effect<string | undefined> =
      span._tag === "ExternalSpan"
        ? Effect.succeed(
            Option.getOrUndefined(Option.map(Context.getOption(span.context, OtelTracer.OtelTraceState), (s) => s.serialize())),
          )
        : Effect.map(Effect.option(OtelTracer.currentOtelSpan), (otel) =>
            Option.isSome(otel) ? otel.value.spanContext().traceState?.serialize() : undefined,
          )
    return Effect.map(state, (tracestate) =>
      tracestate === undefined || tracestate === ""
        ? { [TRACEPARENT]: traceparent }
        : { [TRACEPARENT]: traceparent, [TRACESTATE]: tracestate },
    )
  },
)
