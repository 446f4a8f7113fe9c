/**
 * Compaction on long replays of the shared sessions: the 22 SWE-agent
 * trajectories back to back, and the 200 tau-bench sessions back to back,
 * each replayed as ONE long session, turn by turn, on a 32k-window Claude
 * model (effective window 28,672), three ways:
 *
 * - `without`: ctxd without compaction: the whole history, cut by the
 *   token budget (on the 20-message grid) once it no longer fits;
 * - `sliding 40`: a plain sliding window: only the last 40 messages (from
 *   a unit boundary), moving every turn, no intent anchor kept;
 * - `compaction`: the worker's turn stages in-process (`InProcessTurns`) with
 *   only compaction at work: the summarized view, compaction planned by
 *   `Plan` (background from the soft threshold, landing on the next turn;
 *   blocking over the window) through the real summarizer.
 *
 * Local counts (cl100k) under-count Claude's tokenizer (lesson 3); as the
 * token counter's calibration does in production, every count is scaled by
 * the workload's ratio of ground truth (the fake provider's Claude BPE) to
 * local count, measured once over all its messages.
 *
 * Every rendered body goes to the fake provider through the Anthropic SDK;
 * its usage (with its prompt-cache model: breakpoints on tools, system and
 * the last message, 5-minute entries) gives the billed input, cache reads
 * and cache writes. Effective cost in input-token units: uncached + 0.1 ×
 * read + 1.25 × write; with compaction plus the summarizer's own tokens
 * (input 1×, output 5×, uncached). Dollars at Claude Sonnet's $3 per
 * million input tokens.
 */
import Anthropic from "@anthropic-ai/sdk"
import { Plan, type View } from "@ctxd/compactor"
import { Models, Normalize, Pipeline, Units } from "@ctxd/context"
import { InProcessTurns } from "@ctxd/assembler"
import type { Conversation, Turn } from "@ctxd/contracts"
import { Llm, Summarizer, SummarizerConfig } from "@ctxd/summarizer"
import { FakeProvider, Workloads } from "@ctxd/testing"
import { LocalCounter } from "@ctxd/tokens"
import { Effect, Layer, Redacted } from "effect"
import { round, type Row } from "./Stats.ts"

const MODEL = { provider: "anthropic", name: "claude-sonnet-4-6", contextWindow: 32_768, maxOutputTokens: 4_096 } as const
const resolved = Models.resolve(MODEL)
const W = resolved.effectiveWindow
const ENCODING = "cl100k_base"
const DOLLARS_PER_TOKEN = 3 / 1_000_000

type Strategy = "without" | "sliding 40" | "compaction"
const STRATEGIES: ReadonlyArray<Strategy> = ["without", "sliding 40", "compaction"]

/** The worker's options with only compaction at work (no masking, tool compression, proactive steps or nudges), as the baselines. */
const COMPACTION_ONLY: Turn.Options = {
  windowMessages: 1_000_000,
  windowStep: 20,
  toolCompression: "none",
  maskKeep: 1_000_000,
  proactiveThreshold: 1,
  loop: { policy: "off" },
}

interface Workload {
  readonly name: string
  readonly system: ReadonlyArray<Conversation.SystemSection>
  readonly tools: ReadonlyArray<Conversation.Tool>
  readonly turns: ReadonlyArray<ReadonlyArray<Conversation.Message>>
}

/** Sessions back to back as one long session; call ids made unique per source session. */
const backToBack = (name: string, sessions: ReadonlyArray<Workloads.ReplaySession>): Workload => ({
  name,
  system: Normalize.system(sessions[0]!.system),
  tools: Normalize.tools("openai", [...new Map(sessions.flatMap((s) => s.tools).map((t) => [t.function.name, t])).values()]),
  turns: sessions.flatMap((session, s) =>
    session.turns.map((turn) =>
      Normalize.fromOpenAI(turn.messages).map((m) => ({
        ...m,
        parts: m.parts.map((p) =>
          p.type === "tool_call" ? { ...p, id: `${s}-${p.id}` } : p.type === "tool_result" ? { ...p, callId: `${s}-${p.callId}` } : p,
        ),
      })),
    ),
  ),
})

interface Totals {
  turns: number
  input: number
  read: number
  write: number
  compactions: number
  blocking: number
  summarizerIn: number
  summarizerOut: number
  maxUtilization: number
  /** Turns whose body no longer carried the session's first request, verbatim or in a summary. */
  taskLost: number
  /** Bodies the provider rejected (a prompt over the window). */
  rejected: number
}

const effective = (t: Totals): number => t.input + 0.1 * t.read + 1.25 * t.write
const withSummarizer = (t: Totals): number => effective(t) + t.summarizerIn + 5 * t.summarizerOut

const plainText = (m: Conversation.Message): string =>
  m.parts
    .map((p) =>
      p.type === "text"
        ? p.text
        : p.type === "tool_call"
          ? `${p.name}${p.arguments ?? JSON.stringify(p.input)}`
          : p.type === "tool_result"
            ? p.content.map((c) => (c.type === "text" ? c.text : "")).join("")
            : "",
    )
    .join("")

/** Ground truth over local count for a workload's messages (the calibration factor). */
const calibration = (counter: LocalCounter.LocalCounterService, workload: Workload): number => {
  let local = 0
  let truth = 0
  for (const m of workload.turns.flat()) {
    const text = plainText(m)
    local += counter.countText(text, ENCODING)
    truth += FakeProvider.countTextTokens(text)
  }
  return Math.max(1, truth / Math.max(1, local))
}

const replay = async (
  server: FakeProvider.FakeProviderServer,
  summarizer: Summarizer.SummarizerService,
  counter: LocalCounter.LocalCounterService,
  workload: Workload,
  strategy: Strategy,
  factor: number,
): Promise<Totals> => {
  const client = new Anthropic({ baseURL: server.url, apiKey: `bench-${workload.name}-${strategy}`, maxRetries: 0 })
  const count = (m: Conversation.Message) => Math.ceil(counter.countMessage(m, ENCODING) * factor)
  const systemTokens = Math.ceil(counter.countSystem(workload.system, ENCODING) * factor)
  const toolsTokens = Math.ceil(counter.countTools(workload.tools, ENCODING) * factor)
  const fixed = systemTokens + toolsTokens
  const options = Pipeline.resolveOptions({ windowMessages: 1_000_000, windowStep: 20 })
  const firstRequest = workload.turns[0]!.flatMap((m) => (m.role === "user" ? m.parts : [])).find((p) => p.type === "text")
  const taskMarker = firstRequest?.type === "text" ? firstRequest.text.slice(0, 200) : ""
  const totals: Totals = {
    turns: 0,
    input: 0,
    read: 0,
    write: 0,
    compactions: 0,
    blocking: 0,
    summarizerIn: 0,
    summarizerOut: 0,
    maxUtilization: 0,
    taskLost: 0,
    rejected: 0,
  }
  const history: Array<Pipeline.StoredMessage> = []

  /** The compactor's part: plan the cut after the live summary and summarize it (blocking jobs fold whatever they can). */
  const compact = async (
    job: { readonly trigger: string },
    stored: ReadonlyArray<Pipeline.StoredMessage>,
    live: View.Summary | undefined,
  ): Promise<View.Summary | undefined> => {
    const minFoldTokens = job.trigger === "over_window" ? 0 : Math.floor(Plan.defaults.minFoldPct * W)
    const cut = Plan.planCut(stored, live, W, Plan.defaults, { fixedTokens: fixed, minFoldTokens })
    if (cut._tag === "NoBoundary") return undefined
    const items = stored.slice(cut.fromIndex, cut.toIndex).filter((m) => m.message.role !== "system")
    const s = await Effect.runPromise(
      summarizer.summarize({ items: items.map((m) => ({ seq: m.seq, message: m.message })), sessionModel: MODEL, previous: live?.text }),
    )
    totals.compactions++
    totals.summarizerIn += s.tokensIn
    totals.summarizerOut += s.tokensOut
    return {
      id: totals.compactions,
      coversFromSeq: cut.coversFromSeq,
      coversToSeq: cut.coversToSeq,
      text: s.text,
      mode: s.mode,
      depth: s.depth,
    }
  }
  const local = {
    encoding: ENCODING,
    countText: (text: string) => Math.ceil(counter.countText(text, ENCODING) * factor),
    countTools: (tools: ReadonlyArray<Conversation.Tool>) => Math.ceil(counter.countTools(tools, ENCODING) * factor),
    countMessage: count,
    countSystem: (system: ReadonlyArray<Conversation.SystemSection>) => Math.ceil(counter.countSystem(system, ENCODING) * factor),
  }
  // ctxd with compaction is the worker's turn stages in-process; the others are plain pipeline baselines
  const worker =
    strategy === "compaction"
      ? InProcessTurns.make({
          local,
          count: (input) => ({ ...InProcessTurns.countLocally(local)(input), calibration: factor }),
          thresholds: Plan.defaults,
          compact,
        })
      : undefined

  let k = 0
  for (const messages of workload.turns) {
    for (const message of messages) history.push({ seq: history.length + 1, message, tokens: count(message) })
    let out: { readonly request: Record<string, unknown>; readonly report: Turn.Report }
    if (worker !== undefined) {
      const normalized = {
        system: workload.system,
        tools: workload.tools,
        messages: messages.map((message, i) => ({ message, sourceIndex: i })),
      }
      out = await worker.turn(
        "bench",
        `${workload.name}-${strategy}`,
        { turnId: `t${k++}`, format: "anthropic", model: MODEL, messages: [], options: COMPACTION_ONLY },
        normalized,
      )
      if (out.report.compaction?.trigger === "blocking") totals.blocking++
    } else {
      const view = strategy === "sliding 40" ? history.slice(Units.nextBoundary(history, Math.max(0, history.length - 40))) : history
      out = Pipeline.run({
        tenant: "bench",
        session: `${workload.name}-${strategy}`,
        format: "anthropic",
        model: resolved,
        system: workload.system,
        systemTokens,
        tools: workload.tools,
        toolsTokens,
        history: view,
        options,
        counter: { backend: "tiktoken", encoding: ENCODING, exact: false, calibration: 1 },
      })
    }
    const { request, report } = out
    totals.maxUtilization = Math.max(totals.maxUtilization, report.utilization)
    if (taskMarker !== "" && !JSON.stringify(request["messages"]).includes(JSON.stringify(taskMarker).slice(1, -1))) totals.taskLost++
    totals.turns++
    const reply = await client.messages.create(request as never).catch(() => undefined)
    if (reply === undefined) {
      totals.rejected++
      continue
    }
    const usage = reply.usage
    totals.input += usage.input_tokens
    totals.read += usage.cache_read_input_tokens ?? 0
    totals.write += usage.cache_creation_input_tokens ?? 0
  }
  await worker?.dispose()
  return totals
}

/** Runs the replays and returns the rows (see the module doc). */
export const run = async (): Promise<Row[]> => {
  // the fake's window is the model's; a prompt above it would be rejected, and the run would fail
  const server = await FakeProvider.start({ contextWindow: MODEL.contextWindow })
  try {
    const counter = LocalCounter.make({ backend: "tiktoken", cacheCapacity: 200_000 })
    const settings: SummarizerConfig.Config = {
      ...SummarizerConfig.defaults,
      anthropic: { baseURL: server.url, apiKey: Redacted.make("bench-summarizer") },
      openai: { baseURL: server.openaiBaseURL, apiKey: Redacted.make("bench-summarizer") },
    }
    const summarizer = await Effect.runPromise(
      Summarizer.make(settings).pipe(Effect.provide(Layer.merge(Llm.layer(settings), Layer.succeed(LocalCounter.LocalCounter, counter)))),
    )
    const workloads = [
      backToBack("swe-agent", Workloads.sweAgentSessions(Workloads.fullDataDir())),
      backToBack("tau-bench", Workloads.tauBenchSessions(Workloads.fullDataDir())),
    ]
    const rows: Row[] = []
    for (const workload of workloads) {
      const results = new Map<Strategy, Totals>()
      const factor = calibration(counter, workload)
      for (const strategy of STRATEGIES) results.set(strategy, await replay(server, summarizer, counter, workload, strategy, factor))
      const without = results.get("without")!
      const bench = `compaction ${workload.name} (${without.turns} turns, 32k window, calibration ×${round(factor, 2)})`
      for (const strategy of STRATEGIES) {
        const t = results.get(strategy)!
        const cost = strategy === "compaction" ? withSummarizer(t) : effective(t)
        rows.push(
          { bench, metric: `${strategy}: input tokens (billed prompt)`, value: t.input + t.read + t.write, unit: "tok" },
          { bench, metric: `${strategy}: cache read / write`, value: round(t.read / Math.max(1, t.write), 2), unit: "×" },
          { bench, metric: `${strategy}: effective cost`, value: Math.round(cost), unit: "tok-eq" },
          { bench, metric: `${strategy}: effective cost`, value: round(cost * DOLLARS_PER_TOKEN, 2), unit: "$" },
          { bench, metric: `${strategy}: turns without the first request`, value: t.taskLost, unit: "turns" },
          {
            bench,
            metric: `${strategy}: bodies rejected (over the window)`,
            value: t.rejected,
            unit: "",
            target: "0",
            met: t.rejected === 0,
          },
          {
            bench,
            metric: `${strategy}: peak utilization`,
            value: round(t.maxUtilization, 3),
            unit: "",
            target: "≤ 1",
            met: t.maxUtilization <= 1,
          },
        )
      }
      const c = results.get("compaction")!
      rows.push(
        { bench, metric: "compaction: compactions triggered", value: c.compactions, unit: "" },
        { bench, metric: "compaction: turns that waited (blocking)", value: c.blocking, unit: "turns" },
        { bench, metric: "compaction: summarizer tokens in / out", value: c.summarizerIn, unit: `tok in / ${c.summarizerOut} out` },
        {
          bench,
          metric: "compaction vs without: effective cost saved",
          value: round((100 * (effective(without) - withSummarizer(c))) / Math.max(1, effective(without)), 1),
          unit: "%",
        },
        {
          bench,
          metric: "compaction vs sliding 40: effective cost saved",
          value: round(
            (100 * (effective(results.get("sliding 40")!) - withSummarizer(c))) / Math.max(1, effective(results.get("sliding 40")!)),
            1,
          ),
          unit: "%",
        },
      )
    }
    return rows
  } finally {
    await server.close()
  }
}
