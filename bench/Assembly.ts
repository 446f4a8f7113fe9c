/**
 * In-process assembly cost (the pure pipeline: window, budget, pruning,
 * rendering) at 100, 1,000 and 10,000 history messages built from real
 * tau-bench sessions replayed back to back, in both output formats, with the
 * landmarks carried from turn to turn as the assembler does. Output formats:
 * Anthropic and OpenAI Chat Completions, or those of `--format` (one format, or `all`).
 */
import { Models, Normalize, Pipeline } from "@ctxd/context"
import type { Conversation } from "@ctxd/contracts"
import { Workloads } from "@ctxd/testing"
import { LocalCounter } from "@ctxd/tokens"
import type { Turn } from "@ctxd/contracts"
import { formats } from "./Args.ts"
import { quantile, round, type Row } from "./Stats.ts"

const counter = LocalCounter.make({ backend: "tiktoken", cacheCapacity: 100_000 })

/** `n` real messages: tau-bench sessions back to back (call ids made unique per session). */
const realHistory = (n: number): Array<Pipeline.StoredMessage> => {
  const out: Array<Pipeline.StoredMessage> = []
  const sessions = Workloads.tauBenchSessions(Workloads.fullDataDir())
  for (let s = 0; out.length < n; s++) {
    const session = sessions[s % sessions.length]!
    const raw = session.turns.flatMap((t) => t.messages)
    const messages: Array<Conversation.Message> = Normalize.fromOpenAI(raw).map((m) => ({
      ...m,
      parts: m.parts.map((p) =>
        p.type === "tool_call" ? { ...p, id: `${s}-${p.id}` } : p.type === "tool_result" ? { ...p, callId: `${s}-${p.callId}` } : p,
      ),
    }))
    for (const message of messages) {
      if (out.length === n) break
      out.push({ seq: out.length + 1, message, tokens: counter.countMessage(message, "o200k_base") })
    }
  }
  return out
}

const measure = (n: number, format: Turn.Format): { p50: number; p99: number } => {
  const history = realHistory(n)
  const [tau] = Workloads.tauBenchSessions(Workloads.fullDataDir())
  const tools = Normalize.tools("openai", tau!.tools)
  const system = Normalize.system(tau!.system)
  const base = {
    tenant: "bench",
    session: "s",
    format,
    model: Models.resolve(Workloads.defaultModel(format)),
    system,
    systemTokens: counter.countSystem(system, "o200k_base"),
    tools,
    toolsTokens: counter.countTools(tools, "o200k_base"),
    // As the worker runs it: masking, schema compression and proactive compression on.
    options: Pipeline.resolveOptions(Pipeline.defaults),
    toolOrder: "given",
    countTools: (ts: ReadonlyArray<Conversation.Tool>) => counter.countTools(ts, "o200k_base"),
    countText: (text: string) => counter.countText(text, "o200k_base"),
    counter: { backend: "tiktoken", encoding: "o200k_base", exact: false, calibration: 1 },
  } as const
  // Landmarks of all but the last message, as the assembler holds them before a turn.
  const prefix = Pipeline.run({ ...base, history: history.slice(0, -1) })
  const carried = { landmarks: prefix.landmarks, maskGrid: prefix.maskGrid, proactiveRung: prefix.proactiveRung }
  // The assembler keeps the stored-token sum as it appends; so does this bench.
  const storedTokens = history.reduce((sum, m) => sum + m.tokens, 0)
  const run = () => Pipeline.run({ ...base, history, ...carried, storedTokens })
  for (let i = 0; i < 300; i++) run()
  const samples: number[] = []
  for (let i = 0; i < 2_000; i++) {
    const t = performance.now()
    run()
    samples.push(performance.now() - t)
  }
  return { p50: quantile(samples, 0.5), p99: quantile(samples, 0.99) }
}

export const run = (): Promise<Row[]> => {
  const rows: Row[] = []
  for (const format of formats(["anthropic", "openai"])) {
    const at: Record<number, { p50: number; p99: number }> = {}
    for (const n of [100, 1_000, 10_000]) {
      at[n] = measure(n, format)
      const bench = `assembly ${format}, ${n.toLocaleString("en")} messages`
      rows.push(
        n === 1_000
          ? { bench, metric: "p50", value: round(at[n]!.p50 * 1000, 1), unit: "µs", target: "≤ 1000", met: at[n]!.p50 <= 1 }
          : { bench, metric: "p50", value: round(at[n]!.p50 * 1000, 1), unit: "µs" },
        { bench, metric: "p99", value: round(at[n]!.p99 * 1000, 1), unit: "µs" },
      )
    }
    const ratio = at[10_000]!.p50 / at[100]!.p50
    rows.push({
      bench: `assembly ${format}`,
      metric: "p50 10,000 / 100 messages",
      value: round(ratio, 2),
      unit: "×",
      target: "≤ 2",
      met: ratio <= 2,
    })
  }
  return Promise.resolve(rows)
}
