import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { Spans, TraceContext } from "../src/index.ts"

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
const SPAN = "00f067aa0ba902b7"
const header = `00-${TRACE}-${SPAN}-01`

const headers = (values: Record<string, string>): TraceContext.Readable => ({ get: (name) => values[name] ?? "" })

describe("TraceContext.parse", () => {
  it("reads a valid traceparent and its tracestate", () => {
    expect(TraceContext.parse(header, "congo=t61rcWkgMzE")).toEqual(
      Option.some({ traceId: TRACE, spanId: SPAN, traceFlags: 1, traceState: "congo=t61rcWkgMzE" }),
    )
    expect(Option.map(TraceContext.parse(`00-${TRACE}-${SPAN}-00`), (c) => c.traceFlags)).toEqual(Option.some(0))
  })

  it("ignores what W3C calls invalid", () => {
    for (const bad of [
      "",
      "garbage",
      `00-${TRACE.toUpperCase()}-${SPAN}-01`,
      `00-${"0".repeat(32)}-${SPAN}-01`,
      `00-${TRACE}-${"0".repeat(16)}-01`,
      `ff-${TRACE}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}-01-extra`,
      `00-${TRACE.slice(1)}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}-1`,
    ]) {
      expect(TraceContext.parse(bad), bad).toEqual(Option.none())
    }
    expect(TraceContext.parse(undefined)).toEqual(Option.none())
  })

  it("accepts later versions with more fields, and drops an oversized tracestate", () => {
    expect(Option.isSome(TraceContext.parse(`01-${TRACE}-${SPAN}-01-whatever`))).toBe(true)
    const parsed = TraceContext.parse(header, "a=1,".repeat(200))
    expect(Option.map(parsed, (c) => c.traceState)).toEqual(Option.some(undefined))
  })

  it("formats what it parses", () => {
    expect(TraceContext.format({ traceId: TRACE, spanId: SPAN, traceFlags: 1 })).toBe(header)
  })
})

describe("TraceContext.continueFrom / headersOf (spans recorded)", () => {
  it.effect("runs the effect as a child of the caller's span", () =>
    Effect.gen(function* () {
      const span = yield* Effect.currentSpan.pipe(Spans.span("child"), TraceContext.continueFrom(headers({ traceparent: header })))
      expect(span.traceId).toBe(TRACE)
      expect(Option.map(span.parent, (p) => p.spanId)).toEqual(Option.some(SPAN))
    }).pipe(Effect.withTracer(Spans.nativeRecorder)),
  )

  it.effect("leaves the effect alone without a valid traceparent", () =>
    Effect.gen(function* () {
      const parent = yield* Effect.option(Effect.currentParentSpan).pipe(TraceContext.continueFrom(headers({ traceparent: "nope" })))
      expect(Option.isNone(parent)).toBe(true)
      expect(yield* TraceContext.headersOf).toEqual({})
    }),
  )

  it.effect("writes the current span's traceparent, and the caller's tracestate", () =>
    Effect.gen(function* () {
      const [span, written] = yield* Effect.zip(Effect.currentSpan, TraceContext.headersOf).pipe(
        Spans.span("client"),
        TraceContext.continueFrom(headers({ traceparent: header })),
      )
      expect(written).toEqual({ traceparent: `00-${TRACE}-${span.spanId}-01` })
      const remote = yield* TraceContext.headersOf.pipe(TraceContext.continueFrom(headers({ traceparent: header, tracestate: "k=v" })))
      expect(remote).toEqual({ traceparent: header, tracestate: "k=v" })
    }).pipe(Effect.withTracer(Spans.nativeRecorder)),
  )

  it.effect("Spans.child makes a span only inside a trace", () =>
    Effect.gen(function* () {
      const outside = yield* Effect.option(Effect.currentSpan).pipe(Spans.child("io"))
      expect(Option.isNone(outside)).toBe(true)
      const inside = yield* Effect.currentSpan.pipe(Spans.child("io"), Spans.span("turn"))
      expect(inside.name).toBe("io")
    }).pipe(Effect.withTracer(Spans.nativeRecorder)),
  )

  it.effect("with no tracer recording, a caller's traceparent is passed on as it is", () =>
    Effect.gen(function* () {
      const written = yield* TraceContext.headersOf.pipe(Spans.span("client"), TraceContext.continueFrom(headers({ traceparent: header })))
      expect(written).toEqual({ traceparent: header })
    }),
  )
})
