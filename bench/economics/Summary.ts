/**
 * The economics bench's gate per model (issue 37): over every session of
 * the shared workloads (the SWE-agent session and the 200 tau-bench ones),
 * with and without gaps, ctxd's effective input cost against the full
 * history with caching — the worst session and how many are above 1.01 ×
 * (the target: none) — and the reasoning parts ctxd left out.
 */
import { round, type Row } from "../Stats.ts"

/** The ratio no session may exceed. */
export const LIMIT = 1.01

/** What the summary reads of one session. */
export interface Session {
  readonly reasoningLeftOut: Readonly<Record<string, number>>
}

/** The summary rows of `model` over `sessions`, per mode; `ratio` is ctxd / full history of a session in a mode. */
export const rows = <S extends Session, M extends string>(
  model: string,
  sessions: ReadonlyArray<S>,
  modes: ReadonlyArray<readonly [M, boolean]>,
  ratio: (s: S, mode: M) => number,
): Array<Row> => {
  const bench = `economics (summary) ${model}, ${sessions.length} sessions`
  return modes.flatMap(([mode]) => {
    const ratios = sessions.map((s) => ratio(s, mode))
    const above = ratios.filter((x) => x > LIMIT).length
    return [
      {
        bench,
        metric: `${mode}: worst session, ctxd / full history`,
        value: round(Math.max(...ratios)),
        unit: "×",
        target: `≤ ${LIMIT}`,
        met: above === 0,
      },
      {
        bench,
        metric: `${mode}: sessions above ${LIMIT} × full history`,
        value: above,
        unit: `of ${sessions.length}`,
        target: "0",
        met: above === 0,
      },
      {
        bench,
        metric: `${mode}: reasoning parts left out (all requests)`,
        value: sessions.reduce((n, s) => n + (s.reasoningLeftOut[mode] ?? 0), 0),
        unit: "parts",
      },
    ]
  })
}
