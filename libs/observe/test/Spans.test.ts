// Spans.recording: per-stage spans are made only when a tracer other than
// Effect's built-in one records them (the worker's exporter, a test's).
import { Effect, Tracer } from "effect"
import { describe, expect, it } from "vitest"
import { Spans } from "../src/index.ts"

describe("Spans.recording", () => {
  it("is false under Effect's built-in tracer, true under another", () => {
    expect(Effect.runSync(Spans.recording)).toBe(false)
    const builtIn = Effect.runSync(Effect.tracer)
    const recorder = Tracer.make({ span: (...args) => builtIn.span(...args), context: (f) => f() })
    expect(Effect.runSync(Effect.withTracer(Spans.recording, recorder))).toBe(true)
  })
})
