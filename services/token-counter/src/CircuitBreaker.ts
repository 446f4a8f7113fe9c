/**
 * A generic circuit breaker over Effect's `Ref` and `Clock` (so `TestClock`
 * drives it in tests).
 *
 * - **closed**: calls go through; `failureThreshold` consecutive failures
 *   (default 3) open the circuit. A success resets the count.
 * - **open**: calls fail at once with {@link CircuitOpen} for `openFor`
 *   (default 30 s).
 * - **half open**: once `openFor` has passed, exactly one call (the probe)
 *   goes through; every other call meanwhile gets {@link CircuitOpen} at once.
 *   A successful probe closes the circuit and resets the open period; a failed
 *   one opens it again for twice as long, at most `maxOpenFor` (default 300 s).
 *   An interrupted probe lets the next caller probe.
 *
 * What counts as a failure: any error for which `isFailure` answers true
 * (default: every error), and any defect. Errors for which it answers false
 * (a request the provider rejected as malformed) prove the provider is
 * reachable: they count as successes. Interruptions count as nothing.
 */
import { Cause, Clock, Duration, Effect, Exit, Option, Ref, Schema } from "effect"

/** The circuit is open: the call was not attempted. Retry after `retryAfterMs`. */
export class CircuitOpen extends Schema.TaggedError<CircuitOpen>()("CircuitOpen", {
  message: Schema.String,
  /** Milliseconds until a probe may go through (0 while a probe is in flight). */
  retryAfterMs: Schema.Number,
}) {}

/** The externally visible state. */
export type Status = "closed" | "open" | "half_open"

/** How to build a breaker; every field has a default. */
export interface Options {
  /** Consecutive failures that open the circuit; default 3. */
  readonly failureThreshold?: number
  /** How long the circuit stays open the first time; default 30 seconds. */
  readonly openFor?: Duration.DurationInput
  /** The longest open period after repeated failed probes (each doubles it); default 300 seconds. */
  readonly maxOpenFor?: Duration.DurationInput
  /** Whether an error is the dependency's fault and counts as a failure; default: every error. */
  readonly isFailure?: (error: unknown) => boolean
  /** Name used in log lines; default `circuit`. */
  readonly name?: string
}

/** A point-in-time view, for metrics and tests. */
export interface Snapshot {
  readonly status: Status
  /** Consecutive failures while closed. */
  readonly failures: number
  /** The current (or next) open period in milliseconds. */
  readonly openForMs: number
  /** Milliseconds until a probe may go through; 0 unless open. */
  readonly retryAfterMs: number
  /** How many times the circuit has opened (from closed or from a failed probe). */
  readonly openings: number
  /** True once the circuit has opened at least once. */
  readonly hasOpened: boolean
}

/** A breaker guarding one dependency. */
export interface CircuitBreaker {
  /** Runs `effect` through the breaker; fails with {@link CircuitOpen} without running it when open. */
  readonly run: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | CircuitOpen, R>
  /** `half_open` as soon as the open period has passed, before the probe starts. */
  readonly state: Effect.Effect<Status>
  /** True once the circuit has opened at least once; never false again. */
  readonly hasOpened: Effect.Effect<boolean>
  readonly snapshot: Effect.Effect<Snapshot>
}

interface Internal {
  readonly status: Status
  readonly failures: number
  readonly openedAt: number
  readonly openForMs: number
  readonly probing: boolean
  readonly openings: number
}

type Ticket = { readonly _tag: "pass" } | { readonly _tag: "probe" } | { readonly _tag: "reject"; readonly retryAfterMs: number }

type Outcome = "success" | "failure" | "interrupted"

const outcomeOf = <A, E>(exit: Exit.Exit<A, E>, isFailure: (error: unknown) => boolean): Outcome => {
  if (Exit.isSuccess(exit)) return "success"
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) return isFailure(failure.value) ? "failure" : "success"
  return Cause.isInterruptedOnly(exit.cause) ? "interrupted" : "failure"
}

/** Builds a breaker (see the module doc for the defaults). */
export const make = (options: Options = {}): Effect.Effect<CircuitBreaker> =>
  Effect.gen(function* () {
    const threshold = Math.max(1, Math.floor(options.failureThreshold ?? 3))
    const baseMs = Duration.toMillis(options.openFor ?? "30 seconds")
    const maxMs = Math.max(baseMs, Duration.toMillis(options.maxOpenFor ?? "300 seconds"))
    const isFailure = options.isFailure ?? (() => true)
    const name = options.name ?? "circuit"
    const ref = yield* Ref.make<Internal>({
      status: "closed",
      failures: 0,
      openedAt: 0,
      openForMs: baseMs,
      probing: false,
      openings: 0,
    })

    const acquire = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Ref.modify(ref, (s): readonly [Ticket, Internal] => {
        switch (s.status) {
          case "closed":
            return [{ _tag: "pass" }, s]
          case "open": {
            const left = s.openedAt + s.openForMs - now
            if (left > 0) return [{ _tag: "reject", retryAfterMs: left }, s]
            return [{ _tag: "probe" }, { ...s, status: "half_open", probing: true }]
          }
          case "half_open":
            return s.probing ? [{ _tag: "reject", retryAfterMs: 0 }, s] : [{ _tag: "probe" }, { ...s, probing: true }]
        }
      }),
    )

    const settle = (ticket: Ticket, outcome: Outcome) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Ref.modify(ref, (s): readonly [string | undefined, Internal] => {
          if (ticket._tag === "probe") {
            if (outcome === "success")
              return ["closed after a successful probe", { ...s, status: "closed", failures: 0, openForMs: baseMs, probing: false }]
            if (outcome === "interrupted") return [undefined, { ...s, probing: false }]
            const openForMs = Math.min(maxMs, s.openForMs * 2)
            return [
              `probe failed; open for ${openForMs} ms`,
              { ...s, status: "open", openedAt: now, openForMs, probing: false, openings: s.openings + 1 },
            ]
          }
          // A plain call: only counts while closed (calls started before an opening settle late).
          if (s.status !== "closed" || outcome === "interrupted") return [undefined, s]
          if (outcome === "success") return [undefined, s.failures === 0 ? s : { ...s, failures: 0 }]
          const failures = s.failures + 1
          if (failures < threshold) return [undefined, { ...s, failures }]
          return [
            `${failures} consecutive failures; open for ${baseMs} ms`,
            { ...s, status: "open", failures: 0, openedAt: now, openForMs: baseMs, openings: s.openings + 1 },
          ]
        }),
      ).pipe(
        Effect.flatMap((change) =>
          change === undefined ? Effect.void : Effect.logWarning(`${name}: ${change}`).pipe(Effect.annotateLogs({ circuit: name })),
        ),
      )

    const run = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | CircuitOpen, R> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(acquire, (ticket): Effect.Effect<A, E | CircuitOpen, R> =>
          ticket._tag === "reject"
            ? Effect.fail(
                new CircuitOpen({
                  message:
                    ticket.retryAfterMs > 0
                      ? `${name} is open; next probe in ${ticket.retryAfterMs} ms`
                      : `${name} is half open; a probe is in flight`,
                  retryAfterMs: ticket.retryAfterMs,
                }),
              )
            : restore(effect).pipe(Effect.onExit((exit) => settle(ticket, outcomeOf(exit, isFailure)))),
        ),
      )

    const snapshot = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.map(Ref.get(ref), (s): Snapshot => {
        const left = s.status === "open" ? Math.max(0, s.openedAt + s.openForMs - now) : 0
        return {
          status: s.status === "open" && left === 0 ? "half_open" : s.status,
          failures: s.failures,
          openForMs: s.openForMs,
          retryAfterMs: left,
          openings: s.openings,
          hasOpened: s.openings > 0,
        }
      }),
    )

    return {
      run,
      state: Effect.map(snapshot, (s) => s.status),
      hasOpened: Effect.map(Ref.get(ref), (s) => s.openings > 0),
      snapshot,
    }
  })
