/**
 * `ctxd replay`: recorded agent sessions through the worker's own turn shell
 * in-process (`InProcessTurns`: the `Assembler` over in-memory stores,
 * tokens counted locally with tiktoken, no compaction — that needs a
 * summarizer model), and what each turn would have cost: ctxd's body, the
 * full history and a 40-message sliding window, each rendered in the request
 * format and billed by the cache simulator (`CacheSim`) at the model's prices
 * (`CostModel`), with the recorded assistant reply as the output.
 *
 * The model calls of a session are `gapSeconds` apart (default 10 s: no
 * cache entry expires between agent steps).
 */
import { InProcessTurns } from "@ctxd/assembler"
import type { AssemblerConfig } from "@ctxd/assembler"
import { type AgentLogs, CacheBlocks, CacheSim, CostModel, Models, Normalize, Providers } from "@ctxd/context"
import type { Conversation, Turn } from "@ctxd/contracts"
import { LocalCounter } from "@ctxd/tokens"

/** What a replay runs with; {@link defaults} fills the rest. */
export interface Settings {
  /** The model the sessions are replayed for (its window, tokenizer and prices). */
  readonly model: string
  /** The body format sent (default: the model's provider's). */
  readonly format?: Turn.Format | undefined
  /** The model's context window (default the model table's). */
  readonly contextWindow?: number | undefined
  /** Turn options, as a request's `options`. */
  readonly options: Turn.Options
  /** Seconds between model calls. */
  readonly gapSeconds: number
  /** Messages kept by the sliding-window baseline. */
  readonly slidingMessages: number
  /** The assembler's configuration (a config file's), over its defaults. */
  readonly config?: Partial<AssemblerConfig.Config> | undefined
}

/** The defaults (`ReplayDefaults`): Claude Sonnet 4.5, 10 s between calls, a 40-message sliding window baseline. */
export { defaults } from "./ReplayDefaults.ts"

/** One strategy's bill for a turn. */
export interface Bill {
  /** Input tokens of the prompt. */
  readonly tokens: number
  readonly usage: CostModel.Usage
  /** Effective cost (cache reads, writes by TTL, uncached input, output), USD. */
  readonly usd: number
}

/** One turn of a replayed session. */
export interface TurnResult {
  readonly ctxd: Bill
  readonly full: Bill
  readonly sliding: Bill
  /** Why ctxd's prompt changed before its new messages (`append`: it did not). */
  readonly cacheReason: string
  /** Tokens before the first change since the previous prompt (ctxd's estimate). */
  readonly changedAtTokens: number
  /** ctxd's prompt is over the model's effective window (its fresh tail alone did not fit). */
  readonly overWindow: boolean
  /** The full history would be over the model's effective window. */
  readonly fullOverWindow: boolean
  /** Tool calls without their result, and results without their call, in the body ctxd sent. */
  readonly orphans: number
  /** The same in the full-history body (sent as recorded: a log's unanswered call stays in it). */
  readonly fullOrphans: number
  /** Tokens each stage of ctxd's pipeline left out of this prompt (its own estimate, tokens in − out where positive), by stage. */
  readonly leftOut: Readonly<Record<string, number>>
  /** Prefix edits (`window`, `mask`) due this turn but held back: rewriting the cached prefix would not pay for itself yet. */
  readonly deferred: ReadonlyArray<string>
}

/** A flaw of the recorded log that the replay worked around (see {@link repairsOf}). */
export interface Repair {
  /** The turn (1-based) whose messages hold the call or result. */
  readonly turn: number
  readonly kind: "call without result" | "result without call"
  readonly callId: string
  /** The tool called (empty for a result without its call). */
  readonly tool: string
}

/** One replayed session. */
export interface SessionResult {
  readonly id: string
  readonly source: AgentLogs.Source
  readonly turns: ReadonlyArray<TurnResult>
  /** Why the stages refused a turn (the session stops there), if one was. */
  readonly rejected?: string | undefined
  /**
   * The log's unpaired tool calls and results in the turns replayed: ctxd
   * leaves them out of its prompts (a provider refuses them), the full
   * history and the sliding window send them as recorded.
   */
  readonly repairs: ReadonlyArray<Repair>
}

/** The sums over turns a report shows. */
export interface Totals {
  readonly turns: number
  readonly fullTokens: number
  readonly sentTokens: number
  /** ctxd's prompts: tokens read from the cache, and all input tokens. */
  readonly cacheReadTokens: number
  readonly inputTokens: number
  /** Cache reads / input tokens of ctxd's prompts. */
  readonly cacheHitShare: number
  readonly usd: { readonly ctxd: number; readonly full: number; readonly sliding: number }
  readonly overWindow: number
  readonly fullOverWindow: number
  readonly orphans: number
  /** Turns whose prompt changed before its new messages (a cache break), by reason. */
  readonly breaks: Readonly<Record<string, number>>
}

/** A replay's settings resolved: model, format, prices. */
export interface Setup {
  readonly model: Models.ResolvedModel
  readonly format: Turn.Format
  readonly prices: CostModel.ModelPrices
  readonly settings: Settings
}

const providerOf = (prices: CostModel.ModelPrices, name: string): Turn.Provider =>
  Providers.forPrices(prices.provider)?.provider ?? (/^gemini/i.test(name) ? "google" : /^(gpt|o\d)/i.test(name) ? "openai" : "anthropic")

const formatOf = (provider: Turn.Provider): Turn.Format => Providers.forProvider(provider).format

/** The model resolved, the format chosen (given, else the provider's), the prices looked up (configured rows first). */
export const setup = (settings: Settings): Setup => {
  const prices = (settings.config?.prices ?? CostModel.builtIn).lookup(settings.model)
  const provider = providerOf(prices, settings.model)
  const model = Models.resolve({
    provider,
    name: settings.model,
    ...(settings.contextWindow === undefined ? {} : { contextWindow: settings.contextWindow }),
  })
  return { model, format: settings.format ?? formatOf(provider), prices, settings }
}

const counter = LocalCounter.make({ backend: "tiktoken", cacheCapacity: 200_000 })

/** Tool calls and results that do not pair up in a rendered body (0 for a valid prompt). */
export const orphansIn = (format: Turn.Format, body: Record<string, unknown>): number => {
  const field = Providers.of(format).historyField
  const messages = Normalize.fromHistory({ format, [field]: body[field] } as unknown as Normalize.History)
  const calls = new Set<string>()
  let orphans = 0
  for (const m of messages) {
    for (const p of m.parts) {
      if (p.type === "tool_call") calls.add(p.id)
      else if (p.type === "tool_result" && !calls.delete(p.callId)) orphans++
    }
  }
  return orphans + calls.size
}

/** The tool calls without a result and the results without a call in a log's first `turns` turns (a reused id counts once answered). */
export const repairsOf = (turns: ReadonlyArray<ReadonlyArray<Conversation.Message>>): Array<Repair> => {
  const open = new Map<string, { turn: number; tool: string }>()
  const repairs: Array<Repair> = []
  turns.forEach((messages, k) => {
    for (const m of messages)
      for (const p of m.parts) {
        if (p.type === "tool_call") open.set(p.id, { turn: k + 1, tool: p.name })
        else if (p.type === "tool_result" && !open.delete(p.callId))
          repairs.push({ turn: k + 1, kind: "result without call", callId: p.callId, tool: "" })
      }
  })
  for (const [callId, { turn, tool }] of open) repairs.push({ turn, kind: "call without result", callId, tool })
  return repairs.sort((a, b) => a.turn - b.turn)
}

/** What each stage left out (tokens in − out where positive), by stage name. */
const leftOutOf = (report: Turn.Report): Record<string, number> =>
  Object.fromEntries((report.stages ?? []).flatMap((st) => (st.tokensIn > st.tokensOut ? [[st.stage, st.tokensIn - st.tokensOut]] : [])))

const requestFields = (format: Turn.Format) => ({ format, [Providers.of(format).historyField]: [] })

/** A replayer: sessions run one after the other through one set of in-process turn stages. */
export const make = (s: Setup) => {
  const count = CacheBlocks.counting(counter, s.model)
  const local = {
    encoding: count.encoding,
    countText: count.text,
    countTools: count.tools,
    countMessage: count.message,
    countSystem: count.system,
  }
  const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) }, s.settings.config ?? {})
  const toBlocks = CacheBlocks.converter(count)
  const sliding = CacheBlocks.sliding(s.settings.slidingMessages)
  const modelField = {
    provider: s.model.provider,
    name: s.model.name,
    contextWindow: s.model.contextWindow,
    maxOutputTokens: s.model.maxOutputTokens,
  }

  const render = (session: AgentLogs.Session, messages: ReadonlyArray<Conversation.Message>): Record<string, unknown> => {
    const input = { model: s.model, system: session.system, tools: session.tools, messages, tenant: "replay", session: session.id }
    return Providers.of(s.format).render(input).request
  }

  /** Bills one strategy's bodies turn by turn on a fresh cache. */
  const bill = (bodies: ReadonlyArray<Record<string, unknown>>, outputs: ReadonlyArray<number>): Array<Bill> => {
    const blocks = bodies.map(toBlocks)
    const usages = CacheSim.simulate(
      s.prices,
      blocks.map((b, k) => ({ at: k * s.settings.gapSeconds, blocks: b, output: outputs[k] })),
    )
    return usages.map((usage, k) => ({ tokens: blocks[k]!.reduce((n, b) => n + b.tokens, 0), usage, usd: CostModel.cost(s.prices, usage) }))
  }

  /** Replays one session; `onTurn` after each turn (progress). */
  const session = async (log: AgentLogs.Session, onTurn: () => void = () => {}): Promise<SessionResult> => {
    const ctxdBodies: Array<Record<string, unknown>> = []
    const reports: Array<Turn.Report> = []
    const fullBodies: Array<Record<string, unknown>> = []
    const slidingBodies: Array<Record<string, unknown>> = []
    const history: Array<Conversation.Message> = []
    let rejected: string | undefined
    for (const [k, messages] of log.turns.entries()) {
      const request = { turnId: `t${k}`, model: modelField, options: s.settings.options, ...requestFields(s.format) } as Turn.TurnRequest
      const normalized = { system: log.system, tools: log.tools, messages: messages.map((message, i) => ({ message, sourceIndex: i })) }
      try {
        const reply = await turns.turn("replay", log.id, request, normalized, k * s.settings.gapSeconds * 1000)
        ctxdBodies.push(reply.request)
        reports.push(reply.report)
      } catch (e) {
        if (!(e instanceof InProcessTurns.Rejected)) throw e
        rejected = `turn ${k}: ${e.message}${e.path === undefined ? "" : ` (at ${e.path})`}`
        break
      }
      history.push(...messages)
      fullBodies.push(render(log, history))
      slidingBodies.push(render(log, sliding(history)))
      onTurn()
    }
    // the output of turn k: the assistant reply that opens turn k + 1 (the last one is not recorded)
    const outputs = ctxdBodies.map((_, k) => {
      const reply = log.turns[k + 1]?.[0]
      return reply?.role === "assistant" ? count.message(reply) : 0
    })
    const ctxd = bill(ctxdBodies, outputs)
    const full = bill(fullBodies, outputs)
    const slide = bill(slidingBodies, outputs)
    const limit = s.model.effectiveWindow
    const results = ctxd.map((c, k): TurnResult => ({
      ctxd: c,
      full: full[k]!,
      sliding: slide[k]!,
      cacheReason: reports[k]!.cache.reason ?? "append",
      changedAtTokens: reports[k]!.cache.changedAtTokens ?? 0,
      overWindow: reports[k]!.overBudget || reports[k]!.tokens.total > limit,
      fullOverWindow: full[k]!.tokens > limit,
      orphans: orphansIn(s.format, ctxdBodies[k]!),
      fullOrphans: orphansIn(s.format, fullBodies[k]!),
      leftOut: leftOutOf(reports[k]!),
      deferred: reports[k]!.cache.deferred ?? [],
    }))
    const repairs = repairsOf(log.turns.slice(0, results.length))
    return { id: log.id, source: log.source, turns: results, repairs, ...(rejected === undefined ? {} : { rejected }) }
  }

  /** Releases the in-process turns (their sessions in memory). */
  const dispose = (): Promise<void> => turns.dispose()

  return { session, dispose }
}

const inputTokens = (u: CostModel.Usage): number => u.cacheRead + CostModel.written(u) + u.uncached

const none: Totals = {
  turns: 0,
  fullTokens: 0,
  sentTokens: 0,
  cacheReadTokens: 0,
  inputTokens: 0,
  cacheHitShare: 0,
  usd: { ctxd: 0, full: 0, sliding: 0 },
  overWindow: 0,
  fullOverWindow: 0,
  orphans: 0,
  breaks: {},
}

const plus = (a: Totals, b: Totals): Totals => {
  const breaks: Record<string, number> = { ...a.breaks }
  for (const [reason, n] of Object.entries(b.breaks)) breaks[reason] = (breaks[reason] ?? 0) + n
  const cacheReadTokens = a.cacheReadTokens + b.cacheReadTokens
  const input = a.inputTokens + b.inputTokens
  return {
    turns: a.turns + b.turns,
    fullTokens: a.fullTokens + b.fullTokens,
    sentTokens: a.sentTokens + b.sentTokens,
    cacheReadTokens,
    inputTokens: input,
    cacheHitShare: cacheReadTokens / Math.max(1, input),
    usd: { ctxd: a.usd.ctxd + b.usd.ctxd, full: a.usd.full + b.usd.full, sliding: a.usd.sliding + b.usd.sliding },
    overWindow: a.overWindow + b.overWindow,
    fullOverWindow: a.fullOverWindow + b.fullOverWindow,
    orphans: a.orphans + b.orphans,
    breaks,
  }
}

/** The sums over one session's `turns`; a cache break is a turn after the first whose reason is not `append`. */
export const totals = (turns: ReadonlyArray<TurnResult>): Totals =>
  turns.reduce<Totals>((acc, t, k) => {
    const read = t.ctxd.usage.cacheRead
    return plus(acc, {
      turns: 1,
      fullTokens: t.full.tokens,
      sentTokens: t.ctxd.tokens,
      cacheReadTokens: read,
      inputTokens: inputTokens(t.ctxd.usage),
      cacheHitShare: 0,
      usd: { ctxd: t.ctxd.usd, full: t.full.usd, sliding: t.sliding.usd },
      overWindow: t.overWindow ? 1 : 0,
      fullOverWindow: t.fullOverWindow ? 1 : 0,
      orphans: t.orphans,
      breaks: k > 0 && t.cacheReason !== "append" ? { [t.cacheReason]: 1 } : {},
    })
  }, none)

/** The sums over several sessions (the cache-hit share weighted by input tokens). */
export const sum = (sessions: ReadonlyArray<SessionResult>): Totals => sessions.map((s) => totals(s.turns)).reduce(plus, none)
