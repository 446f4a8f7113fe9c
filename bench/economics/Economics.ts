/**
 * Issue 11 (cache economics): what each context strategy really costs once
 * the provider's prompt cache bills it. `npm run bench -- economics
 * [--model <name> | --models <name,name,...>]` (default `claude-sonnet-5-5`;
 * with `--models`, sections (a) and (b) per model, (c) for the first, and
 * a per-model summary: the worst session against the full history and the
 * sessions above 1.01 ×, with and without gaps; `--cache-edits expected`:
 * the planner without its savings ledger).
 *
 * Sessions: the 22 SWE-agent trajectories back to back as one 230-turn
 * session (as in the optimizations bench), and each of the 200 tau-bench
 * airline sessions on its own (fresh cache, airline tools). Each session runs
 * twice: agent steps only (2–20 s apart; no TTL expires) and with human
 * pauses (3–40 min before each new user message; see `Gaps.ts`).
 *
 * Strategies: the peers of `Strategies.ts` (rendered by ctxd's renderer, with
 * its breakpoints) and ctxd (`Ctxd.bodies`). Each turn's body becomes blocks
 * (`Blocks.ts`); `CacheSim` bills them as the model's provider does; the
 * effective input cost is cache reads × read multiplier + writes × their TTL
 * premium + uncached input, in base-input-token units (tok-eq). Ratios are
 * on that input cost: the output (the recorded assistant reply) is the same
 * for every strategy of a replay and is reported separately, in USD.
 */
import { CacheSim, CostModel, Models, Normalize, RenderAnthropic, RenderOpenAI } from "@ctxd/context"
import type { Conversation, OpenAI, Turn } from "@ctxd/contracts"
import { Workloads } from "@ctxd/testing"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as Optimizations from "../Optimizations.ts"
import { argument } from "../Args.ts"
import { round, type Row } from "../Stats.ts"
import * as Blocks from "./Blocks.ts"
import * as Ctxd from "./Ctxd.ts"
import * as Gaps from "./Gaps.ts"
import * as MemoryPlacement from "./MemoryPlacement.ts"
import * as Strategies from "./Strategies.ts"
import * as Summary from "./Summary.ts"

/** `--cache-edits expected`: ctxd's planner without the savings ledger (the turn option `cacheEdits`). */
const cacheEdits = argument("cache-edits")
const options: Turn.Options | undefined =
  cacheEdits === undefined ? undefined : { cacheEdits: cacheEdits === "expected" ? "expected" : "guarded" }

/** The seed of the gap model (the number). */
const SEED = 11
const CTXD = "ctxd"
const modes = [
  ["no gaps", false],
  ["gaps", true],
] as const
type Mode = (typeof modes)[number][0]

interface Outcome {
  readonly usage: CostModel.Usage
  /** Effective input cost, tok-eq. */
  readonly input: number
  /** Total cost with output, USD. */
  readonly usd: number
  /** Turns whose view held no message (trimMessages with no human message in its window). */
  readonly emptyViews: number
}

interface SessionResult {
  readonly id: string
  readonly turns: number
  readonly humanPauses: number
  /** Input tokens of the largest full-history request. */
  readonly largest: number
  readonly outcomes: Record<Mode, Record<string, Outcome>>
  /** Reasoning parts ctxd left out, summed over the session's requests (`report.reasoning.dropped`; 0 without reasoning). */
  readonly reasoningLeftOut: Record<Mode, number>
}

interface Setup {
  readonly prices: CostModel.ModelPrices
  readonly model: Models.ResolvedModel
  readonly format: "anthropic" | "openai"
  readonly count: Blocks.Counting
}

const setup = (name: string): Setup => {
  const prices = CostModel.lookup(name)
  const format = prices.provider === "openai" || prices.provider === "gemini" ? "openai" : "anthropic"
  const model = Models.resolve({ provider: format, name, contextWindow: 1_000_000 })
  return { prices, model, format, count: Blocks.counting(model) }
}

const render = (s: Setup, session: Ctxd.Session, messages: ReadonlyArray<Conversation.Message>): Record<string, unknown> => {
  const input = { model: s.model, system: session.system, tools: session.tools, messages, toolOrder: "name" as const }
  return s.format === "anthropic"
    ? RenderAnthropic.render(input).body
    : RenderOpenAI.render({ ...input, tenant: "bench", session: session.id }).body
}

/** Output tokens of turn k: the assistant reply that opens turn k + 1 (the last turn's reply is not recorded). */
const outputs = (s: Setup, turns: ReadonlyArray<ReadonlyArray<Conversation.Message>>): Array<number> =>
  turns.map((_, k) => {
    const reply = turns[k + 1]?.[0]
    return reply?.role === "assistant" ? s.count.message(reply) : 0
  })

const bill = (
  s: Setup,
  blocks: ReadonlyArray<ReadonlyArray<CacheSim.Block>>,
  times: ReadonlyArray<number>,
  out: ReadonlyArray<number>,
  emptyViews: number,
): Outcome => {
  const usages = CacheSim.simulate(
    s.prices,
    blocks.map((b, k) => ({ at: times[k]!, blocks: b, output: out[k] })),
  )
  const usage = usages.reduce(CostModel.add, CostModel.zero)
  return { usage, input: CostModel.inputUnits(s.prices, usage), usd: CostModel.cost(s.prices, usage), emptyViews }
}

const runSession = async (s: Setup, session: Ctxd.Session): Promise<SessionResult> => {
  const toBlocks = Blocks.converter(s.count)
  const context: Strategies.Context = {
    tokensOf: s.count.message,
    systemTokens: s.count.system(session.system),
    toolsTokens: s.count.tools(session.tools),
  }
  const out = outputs(s, session.turns)
  const peers = Strategies.peers.map(([name, strategy]) => {
    const history: Array<Conversation.Message> = []
    let empty = 0
    const blocks = session.turns.map((messages) => {
      history.push(...messages)
      const view = strategy(history, context)
      if (view.length === 0) empty++
      return toBlocks(render(s, session, view))
    })
    return { name, blocks, empty }
  })
  const outcomes = {} as Record<Mode, Record<string, Outcome>>
  const reasoningLeftOut = {} as Record<Mode, number>
  let humanPauses = 0
  for (const [mode, pauses] of modes) {
    const times = Gaps.timestamps(session.id, session.turns, { seed: SEED, pauses })
    if (pauses) humanPauses = session.turns.filter((t, k) => k > 0 && Gaps.isHuman(t)).length
    const row: Record<string, Outcome> = {}
    for (const p of peers) row[p.name] = bill(s, p.blocks, times, out, p.empty)
    let leftOut = 0
    const onReply = (reply: Turn.TurnReply) => (leftOut += reply.report.reasoning?.dropped ?? 0)
    const ctxd = await Ctxd.bodies({ session, times, format: s.format, model: s.model, prices: s.prices, count: s.count, onReply, options })
    row[CTXD] = bill(s, ctxd.map(toBlocks), times, out, 0)
    outcomes[mode] = row
    reasoningLeftOut[mode] = leftOut
  }
  const largest = Math.max(0, ...peers[0]!.blocks.map((b) => b.reduce((n, x) => n + x.tokens, 0)))
  return { id: session.id, turns: session.turns.length, humanPauses, largest, outcomes, reasoningLeftOut }
}

const sweSession = (): Ctxd.Session => {
  const raw = Optimizations.sweSession()
  return { id: "swe-agent-230", system: Normalize.system(raw.system), tools: raw.tools, turns: Optimizations.turnsOf(raw.messages) }
}

const tauSessions = (): Array<Ctxd.Session> =>
  Workloads.tauBenchSessions(Workloads.fullDataDir()).map((t) => ({
    id: t.id,
    system: Normalize.system(t.system),
    tools: Normalize.tools("openai", t.tools),
    turns: t.turns.map((turn) => Normalize.fromOpenAI(turn.messages as ReadonlyArray<OpenAI.Message>)),
  }))

const peerNames = Strategies.peers.map(([name]) => name)

/** The cheapest peer (by effective input cost) of one outcome row. */
const bestPeer = (row: Record<string, Outcome>): string => peerNames.reduce((a, b) => (row[b]!.input < row[a]!.input ? b : a))

const sum = (results: ReadonlyArray<SessionResult>, mode: Mode, name: string): Outcome =>
  results.reduce<Outcome>(
    (acc, r) => {
      const o = r.outcomes[mode][name]!
      return {
        usage: CostModel.add(acc.usage, o.usage),
        input: acc.input + o.input,
        usd: acc.usd + o.usd,
        emptyViews: acc.emptyViews + o.emptyViews,
      }
    },
    { usage: CostModel.zero, input: 0, usd: 0, emptyViews: 0 },
  )

const pct = (part: number, whole: number): number => round((100 * part) / Math.max(1, whole), 1)

const strategyRows = (bench: string, mode: Mode, totals: Record<string, Outcome>): Array<Row> =>
  [...peerNames, CTXD].flatMap((name) => {
    const o = totals[name]!
    const inputTokens = o.usage.cacheRead + CostModel.written(o.usage) + o.usage.uncached
    const rows: Array<Row> = [
      { bench, metric: `${mode}: ${name}: effective input cost`, value: round(o.input, 0), unit: "tok-eq" },
      {
        bench,
        metric: `${mode}: ${name}: cache read / write share of input`,
        value: pct(o.usage.cacheRead, inputTokens),
        unit: `% / ${pct(CostModel.written(o.usage), inputTokens)} %`,
      },
      { bench, metric: `${mode}: ${name}: total with output`, value: round(o.usd, 2), unit: "USD" },
    ]
    if (o.emptyViews > 0)
      rows.push({ bench, metric: `${mode}: ${name}: turns sent without any conversation`, value: o.emptyViews, unit: "turns" })
    return rows
  })

const table = (results: ReadonlyArray<SessionResult>): string => {
  const lines = [
    "| session | turns | pauses | ctxd/full, no gaps | gaps | best peer, no gaps | ctxd/best | best peer, gaps | ctxd/best | reasoning left out, no gaps / gaps |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ]
  for (const r of results) {
    const ratio = (mode: Mode, other: string) => (r.outcomes[mode][CTXD]!.input / r.outcomes[mode][other]!.input).toFixed(3)
    const quiet = bestPeer(r.outcomes["no gaps"])
    const busy = bestPeer(r.outcomes.gaps)
    lines.push(
      `| ${r.id} | ${r.turns} | ${r.humanPauses} | ${ratio("no gaps", "full history")} | ${ratio("gaps", "full history")} | ${quiet} | ${ratio("no gaps", quiet)} | ${busy} | ${ratio("gaps", busy)} | ${r.reasoningLeftOut["no gaps"]} / ${r.reasoningLeftOut.gaps} |`,
    )
  }
  return lines.join("\n")
}

/** The models to price: `--models a,b,...`, else `--model`, else Claude Sonnet 5.5. */
const modelArgs = (): ReadonlyArray<string> =>
  (argument("models") ?? argument("model") ?? "claude-sonnet-5-5")
    .split(",")
    .map((m) => m.trim())
    .filter((m) => m !== "")

/** Every model's rows, then (with more than one) a summary row per model: the gate of issue 37. */
export const run = async (): Promise<Row[]> => {
  const rows: Array<Row> = []
  const summaries: Array<Row> = []
  for (const [i, name] of modelArgs().entries()) {
    const { rows: own, sessions } = await runModel(name, i === 0)
    rows.push(...own)
    summaries.push(
      ...Summary.rows(name, sessions, modes, (r, mode) => r.outcomes[mode][CTXD]!.input / r.outcomes[mode]["full history"]!.input),
    )
  }
  return [...rows, ...summaries]
}

/** One model's rows: the long SWE-agent session and the tau-bench sessions, without and with gaps (and memory placement). */
const runModel = async (name: string, memory: boolean): Promise<{ rows: Array<Row>; sessions: Array<SessionResult> }> => {
  const s = setup(name)
  const label = s.model.name
  const rows: Array<Row> = []
  const prices = `economics: prices of ${s.model.name} (${s.prices.family})`
  rows.push(
    { bench: prices, metric: "input / output", value: s.prices.inputPerMtok, unit: `/ ${s.prices.outputPerMtok} USD per Mtok` },
    { bench: prices, metric: "cache read multiplier", value: s.prices.cacheReadMultiplier, unit: "×" },
    ...s.prices.tiers.map((t): Row => ({
      bench: prices,
      metric: `cache write multiplier, ${t.name} (TTL ${t.ttlSeconds} s)`,
      value: t.writeMultiplier,
      unit: "×",
    })),
    { bench: prices, metric: "minimum cacheable prefix", value: s.prices.minCacheableTokens, unit: "tok" },
  )

  const swe = await runSession(s, sweSession())
  const benchA = `economics (a) SWE-agent, ${swe.turns} turns as one session, ${label}`
  for (const [mode] of modes) {
    const o = swe.outcomes[mode]
    const best = bestPeer(o)
    const vsFull = o[CTXD]!.input / o["full history"]!.input
    const vsBest = o[CTXD]!.input / o[best]!.input
    rows.push(
      ...strategyRows(benchA, mode, o),
      {
        bench: benchA,
        metric: `${mode}: ctxd / full history`,
        value: round(vsFull),
        unit: "×",
        target: "≤ 0.30 (and ≤ 1.01)",
        met: vsFull <= 0.3,
      },
      {
        bench: benchA,
        metric: `${mode}: ctxd / best peer (${best})`,
        value: round(vsBest),
        unit: "×",
        target: "≤ 0.5",
        met: vsBest <= 0.5,
      },
    )
  }
  rows.push(
    { bench: benchA, metric: "human pauses (gaps)", value: swe.humanPauses, unit: "turns" },
    { bench: benchA, metric: "full history: largest request", value: swe.largest, unit: "tok" },
  )

  const tau: Array<SessionResult> = []
  for (const session of tauSessions()) tau.push(await runSession(s, session))
  const benchB = `economics (b) tau-bench, ${tau.length} sessions one by one, ${label}`
  for (const [mode] of modes) {
    const totals = Object.fromEntries([...peerNames, CTXD].map((name) => [name, sum(tau, mode, name)]))
    const best = bestPeer(totals)
    const ratios = tau.map((r) => r.outcomes[mode][CTXD]!.input / r.outcomes[mode]["full history"]!.input)
    const over = ratios.filter((x) => x > 1.01).length
    rows.push(
      ...strategyRows(benchB, mode, totals),
      {
        bench: benchB,
        metric: `${mode}: ctxd / full history (sum)`,
        value: round(totals[CTXD]!.input / totals["full history"]!.input),
        unit: "×",
      },
      {
        bench: benchB,
        metric: `${mode}: ctxd / full history, worst session`,
        value: round(Math.max(...ratios)),
        unit: "×",
        target: "≤ 1.01",
        met: over === 0,
      },
      {
        bench: benchB,
        metric: `${mode}: sessions where ctxd costs more than full × 1.01`,
        value: over,
        unit: `of ${tau.length}`,
        target: "0",
        met: over === 0,
      },
      {
        bench: benchB,
        metric: `${mode}: ctxd / best peer (${best}, sum)`,
        value: round(totals[CTXD]!.input / totals[best]!.input),
        unit: "×",
      },
    )
  }
  rows.push({ bench: benchB, metric: "human pauses (gaps)", value: tau.reduce((n, r) => n + r.humanPauses, 0), unit: "turns" })

  if (memory)
    rows.push(
      ...(await MemoryPlacement.rows(
        {
          setup: { format: s.format, model: s.model, prices: s.prices, count: s.count },
          sessions: tauSessions(),
          times: (session, pauses) => Gaps.timestamps(session.id, session.turns, { seed: SEED, pauses }),
          outputs: (session) => outputs(s, session.turns),
          bill: (bodies, times, out) => bill(s, bodies.map(Blocks.converter(s.count)), times, out, 0),
        },
        label,
      )),
    )

  const all = [swe, ...tau]
  console.log(table(all))
  const dir = join(import.meta.dirname, "..", "results")
  mkdirSync(dir, { recursive: true })
  const file = join(dir, `economics-sessions-${process.env.BENCH_NAME ?? "latest"}-${s.model.name}.json`)
  writeFileSync(file, JSON.stringify({ model: s.model.name, prices: s.prices, sessions: all }, null, 1) + "\n")
  console.log(`wrote ${file}`)
  return { rows, sessions: all }
}
