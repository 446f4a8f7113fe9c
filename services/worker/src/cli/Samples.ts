/**
 * The agent sessions bundled with ctxd (`examples/data`: real, MIT-licensed
 * tau-bench and SWE-agent sessions; `examples/README.md`), which
 * `ctxd replay` replays when it is given no log files. `examples/` sits at
 * the root of the repository and of the installed package, so it is found by
 * walking up from this module, wherever that is.
 */
import { existsSync, statSync } from "node:fs"
import { dirname, join } from "node:path"

/**
 * The bundled samples: the first `examples/data` directory in `from` or
 * above it (default this module's directory), or `undefined` when there is
 * none up to the filesystem root.
 */
export const samplesDir = (from: string = import.meta.dirname): string | undefined => {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, "examples", "data")
    if (existsSync(candidate) && statSync(candidate).isDirectory()) return candidate
    if (dirname(dir) === dir) return undefined
  }
}

/** A group of samples `ctxd replay` replays on its own, for the model that fits it. */
export interface Group {
  readonly name: string
  /** File-name-safe: the suffix of its `--html` report. */
  readonly slug: string
  /** Files or directories under {@link samplesDir}. */
  readonly paths: ReadonlyArray<string>
  readonly model: string
}

/**
 * What `ctxd replay` replays without log files: the tau-bench airline
 * sessions (recorded with GPT-4o) for GPT-5.6 Terra, the current OpenAI
 * model of GPT-4o's price class ($2 / $12, cached input 0.1× against
 * GPT-4o's 0.5×; see `providers/openai-chat/Models.ts`), then the SWE-agent
 * trajectories for Claude Sonnet 5.5 (a coding agent's model; Sonnet 4.5
 * reaches end of life on 2026-11-30).
 */
export const groups: ReadonlyArray<Group> = [
  { name: "tau-bench airline", slug: "tau-bench", paths: ["tau-bench-airline-gpt4o.json"], model: "gpt-5.6-terra" },
  { name: "SWE-agent", slug: "swe-agent", paths: ["swe-agent"], model: "claude-sonnet-5-5" },
]

/** One group's replay, summed. */
export interface Outcome {
  readonly name: string
  readonly model: string
  readonly sessions: number
  /** Effective cost in USD with ctxd and without it (the full history sent every turn). */
  readonly ctxd: number
  readonly full: number
}

const usd = (n: number): string => `$${n.toFixed(4)}`

const versus = (ours: number, theirs: number): string => {
  const change = ours / Math.max(1e-12, theirs) - 1
  return Math.abs(change) < 0.0005 ? "the same" : `${(100 * Math.abs(change)).toFixed(1)} % ${change < 0 ? "less" : "more"}`
}

const cost = (ctxd: number, full: number): string => `${usd(ctxd)} with ctxd, ${usd(full)} without: ${versus(ctxd, full)}`

/** The lines that open the samples' replay: the cost with ctxd and without, in all and per group, then how to replay one's own logs. */
export const headline = (outcomes: ReadonlyArray<Outcome>): Array<string> => {
  const ctxd = outcomes.reduce((n, o) => n + o.ctxd, 0)
  const full = outcomes.reduce((n, o) => n + o.full, 0)
  return [
    `bundled samples: ${cost(ctxd, full)} (without = the whole history sent every turn)`,
    ...outcomes.map((o) => `  ${o.name}, ${o.sessions} session${o.sessions === 1 ? "" : "s"} on ${o.model}: ${cost(o.ctxd, o.full)}`),
    `your own logs: ctxd replay <files or dirs...> (ctxd replay --help)`,
  ]
}
