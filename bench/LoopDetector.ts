/**
 * Loop-detection cost per turn at a given history length: the incremental
 * path (fold the turn's new messages into the stored state, then judge) next
 * to a full rescan of the history (what a non-incremental detector would do).
 *
 * The history is an agent session: tool calls over six tools with varied
 * arguments, ~1.5 kB tool results, a user message every 24 messages. A turn
 * adds an assistant tool call and its result. Every timed turn starts from the
 * same stored state (the state is immutable), so each sample is one turn at
 * exactly that history length.
 *
 * `node bench/LoopDetector.ts` prints the table; {@link run}
 * returns the rows for `npm run bench`.
 */
import type { Conversation } from "@ctxd/contracts"
import { Detector, LoopState } from "@ctxd/loop-detector"
import type { Row } from "./Stats.ts"

export interface Options {
  /** History lengths to measure; default [1000, 10000]. */
  readonly historySizes?: ReadonlyArray<number>
  /** Timed turns per measurement (after 1/5 as many warm-up turns); default 2000. */
  readonly turns?: number
}

export interface Measurement {
  readonly history: number
  readonly mode: "incremental" | "rescan"
  readonly p50Micros: number
  readonly p99Micros: number
  readonly meanMicros: number
}

const TOOLS = ["read_file", "search", "run_tests", "get_reservation", "list_dir", "edit_file"]

const filler = (seed: number): string => {
  let text = ""
  for (let line = 0; text.length < 1_500; line++)
    text += `${seed}:${line} ${((seed * 7919 + line * 104729) % 1_000_003).toString(36)} lorem ipsum dolor sit amet\n`
  return text
}

/** Messages `from`..`from + count - 1` of the synthetic session. */
export const session = (from: number, count: number): ReadonlyArray<Conversation.Message> =>
  Array.from({ length: count }, (_, k): Conversation.Message => {
    const i = from + k
    if (i === 0) return { role: "system", parts: [{ type: "text", text: "You are a careful agent." }] }
    if (i % 24 === 1) return { role: "user", parts: [{ type: "text", text: `Next step ${i}, please.` }] }
    const call = Math.floor(i / 2)
    return i % 2 === 0
      ? {
          role: "assistant",
          parts: [
            {
              type: "tool_call",
              id: `call_${call}`,
              name: TOOLS[call % TOOLS.length]!,
              input: { path: `src/f${call % 97}.ts`, line: call },
            },
          ],
        }
      : {
          role: "tool",
          parts: [{ type: "tool_result", callId: `call_${call}`, content: [{ type: "text", text: filler(call) }], isError: false }],
        }
  })

const stats = (samples: Array<number>) => {
  samples.sort((a, b) => a - b)
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.ceil(q * samples.length) - 1)]! * 1000
  const mean = (samples.reduce((a, b) => a + b, 0) / samples.length) * 1000
  return { p50Micros: round(at(0.5)), p99Micros: round(at(0.99)), meanMicros: round(mean) }
}

const round = (x: number) => Number(x.toFixed(2))

/** Measures both paths at each history length. */
export const measure = (options: Options = {}): ReadonlyArray<Measurement> => {
  const turns = options.turns ?? 2_000
  const out: Array<Measurement> = []
  for (const n of options.historySizes ?? [1_000, 10_000]) {
    // Even n: the turn (assistant call + its result) starts on an assistant message.
    const size = n % 2 === 0 ? n : n + 1
    const history = session(0, size)
    const turn = session(size, 2)
    const stored = LoopState.observe(LoopState.initial(), history, 0)
    const full = [...history, ...turn]
    const warmup = Math.ceil(turns / 5)
    let sink = 0
    const time = (f: () => Detector.Verdict, count: number): Array<number> => {
      const samples: Array<number> = []
      for (let t = 0; t < count; t++) {
        const start = performance.now()
        const verdict = f()
        samples.push(performance.now() - start)
        sink += verdict.findings.length
      }
      return samples
    }
    const incremental = () => Detector.verdict(LoopState.observe(stored, turn, size))
    const rescan = () => Detector.check(full)
    time(incremental, warmup)
    out.push({ history: size, mode: "incremental", ...stats(time(incremental, turns)) })
    // The rescan is O(history): fewer samples keep the run short at large n.
    const rescanTurns = Math.max(50, Math.floor((turns * 1_000) / size / 4))
    time(rescan, Math.ceil(rescanTurns / 5))
    out.push({ history: size, mode: "rescan", ...stats(time(rescan, rescanTurns)) })
    if (sink < 0) console.log(sink) // keeps the work observable
  }
  return out
}

/** The bench-table rows: per-turn cost at 1,000 history messages (and any other sizes measured). */
export const run = (options: Options = {}): ReadonlyArray<Row> =>
  measure(options).map((m) => ({
    bench: "loop-detector",
    metric: `${m.mode} observe+verdict per turn p50 @ ${m.history} msgs`,
    value: m.p50Micros,
    unit: "µs",
    ...(m.mode === "incremental" ? { target: "≤ 100", met: m.p50Micros <= 100 } : {}),
  }))

/** Prints the measurements as a table. */
export const print = (measurements: ReadonlyArray<Measurement>): void => {
  console.log("loop-detector: detection cost per turn (observe + verdict)")
  console.log("| history | mode        | p50 µs   | p99 µs   | mean µs  |")
  console.log("| ------: | ----------- | -------: | -------: | -------: |")
  for (const m of measurements) {
    const cell = (x: number) => x.toFixed(2).padStart(8)
    console.log(
      `| ${String(m.history).padStart(7)} | ${m.mode.padEnd(11)} | ${cell(m.p50Micros)} | ${cell(m.p99Micros)} | ${cell(m.meanMicros)} |`,
    )
  }
  for (const n of new Set(measurements.map((m) => m.history))) {
    const inc = measurements.find((m) => m.history === n && m.mode === "incremental")
    const scan = measurements.find((m) => m.history === n && m.mode === "rescan")
    if (inc && scan)
      console.log(`at ${n} messages the incremental path is ${(scan.p50Micros / inc.p50Micros).toFixed(0)}× cheaper than a rescan`)
  }
}

if (import.meta.main) print(measure())
