// Spans are made only when a tracer other than Effect's built-in one records
// them (the worker's exporter, a test's): under the built-in one the effect
// runs as it is.
import { Effect, Option, Tracer } from "effect"
import { describe, expect, it } from "vitest"
import { Spans } from "../src/index.ts"

const currentName = Effect.map(Spans.current, (span) =>
  Option.getOrUndefined(Option.map(span, (s) => (s._tag === "Span" ? s.name : "external"))),
)

describe("Spans", () => {
  it("recording is false under Effect's built-in tracer, true under another", () => {
    expect(Effect.runSync(Spans.recording)).toBe(false)
    const builtIn = Effect.runSync(Effect.tracer)
    const recorder = Tracer.make({ span: (...args) => builtIn.span(...args), context: (f) => f() })
    expect(Effect.runSync(Effect.withTracer(Spans.recording, recorder))).toBe(true)
    expect(Effect.runSync(Effect.withTracer(Spans.recording, Spans.nativeRecorder))).toBe(true)
  })

  it("span and child make spans only while a tracer records them", () => {
    const nested = currentName.pipe(Spans.child("io"), Spans.span("turn"))
    expect(Effect.runSync(currentName.pipe(Spans.span("turn")))).toBeUndefined()
    expect(Effect.runSync(nested)).toBeUndefined()
    expect(Effect.runSync(Effect.withTracer(currentName.pipe(Spans.span("turn")), Spans.nativeRecorder))).toBe("turn")
    expect(Effect.runSync(Effect.withTracer(nested, Spans.nativeRecorder))).toBe("io")
    // child: never a trace of its own
    expect(Effect.runSync(Effect.withTracer(currentName.pipe(Spans.child("io")), Spans.nativeRecorder))).toBeUndefined()
  })
})
