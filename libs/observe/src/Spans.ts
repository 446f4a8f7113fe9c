/**
 * How ctxd makes spans (Effect's tracing; exported through OpenTelemetry
 * when the worker has an OTLP endpoint, see docs/operations.md,
 * "Traces"). Spans never carry prompt text, tool output or secrets:
 * ids, counts, names of stages and reasons only.
 *
 * - {@link span}: a span always (a turn is worth a trace of its own);
 * - {@link child}: a span only inside a trace, for I/O that also runs in
 *   background loops (lease renewals, heartbeats, compaction jobs) and must
 *   not start a trace of its own every few seconds.
 *
 * Both make spans only while a tracer records them ({@link recording}: the
 * worker's OpenTelemetry exporter, a test's recorder). Under Effect's
 * built-in tracer nothing reads a span, and making one per turn, read and
 * write (with a copy of the fiber's context each) showed in the e2e
 * profile: the effect runs as it is, and a caller's `traceparent` is passed
 * on unchanged (`TraceContext`).
 *
 * Neither captures a stack trace (Effect does by default: it costs an
 * `Error` per span on the hot path), and none of these helpers looks the
 * current span up through `Effect.currentSpan` (which fails, with an
 * `Error` and its stack, when there is none): they read the context.
 */
import { Context, Effect, Option, Tracer } from "effect"

/** Span options (Effect's), without stack capture. */
export type Options = Omit<Tracer.SpanOptions, "captureStackTrace">

// Effect's built-in tracer: its spans go nowhere unless something reads them in-process
const builtIn = Effect.runSync(Effect.tracer)

/** Runs `self` in a span named `name` (while a tracer records spans). */
export const span =
  (name: string, options: Options = {}) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    // the options copied only for a span made (not on every call of the hot path)
    Effect.tracerWith((tracer) => (tracer === builtIn ? self : Effect.withSpan(self, name, { ...options, captureStackTrace: false })))

/**
 * A tracer making the same spans as Effect's built-in one that counts as
 * recording: for reading spans in-process (tests), with `Effect.withTracer`.
 */
export const nativeRecorder: Tracer.Tracer = Tracer.make({ span: (...args) => builtIn.span(...args), context: (f) => f() })

/**
 * Whether a tracer other than Effect's built-in one is installed (the
 * worker's OpenTelemetry exporter, a test's recorder): fine-grained spans
 * are only worth their cost when something records them.
 */
export const recording: Effect.Effect<boolean> = Effect.map(Effect.tracer, (tracer) => tracer !== builtIn)

/** The current span, local or remote (the parent a new span would get), if any. */
export const current: Effect.Effect<Option.Option<Tracer.AnySpan>> = Effect.serviceOption(Tracer.ParentSpan)

/** Runs `self` in a span named `name` when a trace is current (a parent span, local or remote) and a tracer records spans; else as it is. */
export const child =
  (name: string, options: Options = {}) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.tracerWith((tracer) =>
      tracer === builtIn
        ? self
        : Effect.flatMap(current, (parent) =>
            Option.isNone(parent) ? self : Effect.withSpan(self, name, { ...options, captureStackTrace: false }),
          ),
    )

/**
 * Sets attributes on the current local span (a no-op without one). Undefined
 * values are skipped. `attributes` may be a function, called only when there
 * is a span to annotate. One runtime step.
 */
export const annotate = (
  attributes:
    | Readonly<Record<string, string | number | boolean | undefined>>
    | (() => Readonly<Record<string, string | number | boolean | undefined>>),
): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) => {
    const span = Context.getOption(fiber.currentContext, Tracer.ParentSpan)
    if (Option.isNone(span) || span.value._tag !== "Span") return Effect.void
    for (const [key, value] of Object.entries(typeof attributes === "function" ? attributes() : attributes)) {
      if (value !== undefined) span.value.attribute(key, value)
    }
    return Effect.void
  })
