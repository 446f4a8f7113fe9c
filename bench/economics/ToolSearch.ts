/**
 * On-demand toolsets, `load_toolset` against the provider's tool search, on
 * the GitHub MCP catalog. `npm run bench -- toolsearch [--model <name>]`
 * (default `claude-opus-5-5`, a model whose row has `toolSearch`).
 *
 * Workload: the first 50 tau-bench airline sessions replayed turn by turn
 * through the worker's stages in-process (`InProcessTurns`), with the
 * airline tools and the GitHub MCP server's 117 tools (its default toolsets
 * read-only from the start, as the optimizations bench has them). Each
 * session loads two toolsets the defaults lack, read-only — `discussions`
 * a third of the way in, `actions` two thirds in — in the assistant reply
 * that opens that turn: a `load_toolset` call ctxd answers, or, with tool
 * search, the model's `server_tool_use` and its `tool_search_tool_result`
 * referencing the same tools. Both runs use the same model and prices; the
 * `load_toolset` run turns the row's `toolSearch` off. Billed by `CacheSim`
 * (agent steps 2–20 s apart, the economics bench's gap model without
 * pauses): a deferred tool costs nothing until referenced, then its
 * definition is billed where the reference stands (`CacheBlocks`).
 */
import { InProcessTurns } from "@ctxd/assembler"
import { CacheSim, CostModel, Models, Normalize, Toolsets } from "@ctxd/context"
import type { Conversation, OpenAI, Turn } from "@ctxd/contracts"
import { Workloads } from "@ctxd/testing"
import { argument } from "../Args.ts"
import { round, type Row } from "../Stats.ts"
import * as Blocks from "./Blocks.ts"
import { localCounter } from "./Ctxd.ts"
import * as Gaps from "./Gaps.ts"

const SESSIONS = 50
const LOADS = ["discussions", "actions"] as const

interface Session {
  readonly id: string
  readonly system: ReadonlyArray<Conversation.SystemSection>
  readonly turns: ReadonlyArray<ReadonlyArray<Conversation.Message>>
}

/** The turn whose opening assistant reply makes load `i`: the first such turn from `(i + 1) / 3` of the session on. */
const loadTurns = (turns: Session["turns"]): Array<number> =>
  LOADS.map((_, i) => {
    const from = Math.floor(((i + 1) * turns.length) / 3)
    const k = turns.findIndex((t, j) => j >= from && t[0]?.role === "assistant")
    return k
  })

/** `message` with load `toolset` made in it: a `load_toolset` call, or a tool search returning `names`. */
const withLoad = (message: Conversation.Message, toolset: string, names: ReadonlyArray<string>, search: boolean): Conversation.Message => {
  if (!search) {
    const call: Conversation.ToolCallPart = { type: "tool_call", id: `load_${toolset}`, name: Toolsets.LOAD_TOOLSET, input: { toolset } }
    return { ...message, parts: [...message.parts, call] }
  }
  const id = `srvtoolu_${toolset}`
  const blocks: Array<Conversation.Part> = [
    {
      type: "opaque",
      format: "anthropic",
      block: { type: "server_tool_use", id, name: "tool_search_tool_bm25", input: { query: toolset } },
    },
    {
      type: "opaque",
      format: "anthropic",
      block: {
        type: "tool_search_tool_result",
        tool_use_id: id,
        content: { type: "tool_search_tool_search_result", tool_references: names.map((n) => ({ type: "tool_reference", tool_name: n })) },
      },
    },
  ]
  return { ...message, parts: [...blocks, ...message.parts] }
}

/** The bodies ctxd sends for `session` with the loads made, and the prefix's tools tokens per turn. */
const replay = async (
  session: Session,
  tools: ReadonlyArray<Conversation.Tool>,
  config: Toolsets.Config,
  model: Models.ResolvedModel,
  count: Blocks.Counting,
  times: ReadonlyArray<number>,
  search: boolean,
): Promise<Array<Record<string, unknown>>> => {
  const local = localCounter(count)
  const prices = search ? CostModel.builtIn : CostModel.make([{ match: model.name, capabilities: { toolSearch: false } }])
  const turns = InProcessTurns.make({ local, count: InProcessTurns.countLocally(local) }, { prices })
  const at = loadTurns(session.turns)
  const out: Array<Record<string, unknown>> = []
  try {
    for (const [k, given] of session.turns.entries()) {
      const i = at.indexOf(k)
      const messages = i === -1 ? given : [withLoad(given[0]!, LOADS[i]!, readOnly(tools, LOADS[i]!), search), ...given.slice(1)]
      const request = {
        turnId: `t${k}`,
        format: "anthropic",
        model: { provider: "anthropic", name: model.name, contextWindow: 1_000_000 },
        messages: [],
        options: { toolsets: config },
      } as unknown as Turn.TurnRequest
      const normalized = { system: session.system, tools, messages: messages.map((message, j) => ({ message, sourceIndex: j })) }
      out.push((await turns.turn("bench", `${session.id}-${search}`, request, normalized, times[k]! * 1000)).request)
    }
  } finally {
    await turns.dispose()
  }
  return out
}

const readOnly = (tools: ReadonlyArray<Conversation.Tool>, toolset: string): Array<string> =>
  tools.filter((t) => t.toolset === toolset && !Toolsets.isWrite(t)).map((t) => t.name)

export const run = async (): Promise<Row[]> => {
  const name = argument("model") ?? "claude-opus-5-5"
  const prices = CostModel.lookup(name)
  const model = Models.resolve({ provider: "anthropic", name, contextWindow: 1_000_000 })
  const count = Blocks.counting(model)
  const catalog = Workloads.githubCatalog(Workloads.fullDataDir())
  const github = Normalize.tools("openai", catalog.tools)
  const config: Toolsets.Config = {
    defaultToolsets: catalog.toolsets.filter((t) => t.default).map((t) => t.id),
    descriptions: Object.fromEntries(catalog.toolsets.map((t) => [t.id, t.description])),
  }
  const sessions: Array<Session> = Workloads.tauBenchSessions(Workloads.fullDataDir())
    .slice(0, SESSIONS)
    .map((t) => ({
      id: t.id,
      system: Normalize.system(t.system),
      turns: t.turns.map((turn) => Normalize.fromOpenAI(turn.messages as ReadonlyArray<OpenAI.Message>)),
    }))
  const airline = Normalize.tools("openai", Workloads.tauBenchSessions(Workloads.fullDataDir())[0]!.tools)
  const tools = [...airline, ...github]
  const bench = `toolsearch: tau-bench sessions 0–${SESSIONS - 1} + GitHub MCP catalog (${tools.length} tools), 2 toolset loads each, ${name}`
  const rows: Array<Row> = []
  const totals: Record<string, { usage: CostModel.Usage; input: number; usd: number; toolTokens: number; turns: number }> = {}
  for (const [label, search] of [
    ["load_toolset", false],
    ["tool search", true],
  ] as const) {
    const total = { usage: CostModel.zero, input: 0, usd: 0, toolTokens: 0, turns: 0 }
    for (const session of sessions) {
      const times = Gaps.timestamps(session.id, session.turns, { seed: 11, pauses: false })
      const bodies = await replay(session, tools, config, model, count, times, search)
      const toBlocks = Blocks.converter(count)
      const out = session.turns.map((_, k) => {
        const reply = session.turns[k + 1]?.[0]
        return reply?.role === "assistant" ? count.message(reply) : 0
      })
      const usages = CacheSim.simulate(
        prices,
        bodies.map((b, k) => ({ at: times[k]!, blocks: toBlocks(b), output: out[k] })),
      )
      const usage = usages.reduce(CostModel.add, CostModel.zero)
      total.usage = CostModel.add(total.usage, usage)
      total.input += CostModel.inputUnits(prices, usage)
      total.usd += CostModel.cost(prices, usage)
      for (const b of bodies) {
        const sent = (b["tools"] as Array<Record<string, unknown>>).filter((t) => t["defer_loading"] !== true)
        total.toolTokens += count.text(JSON.stringify(sent))
        total.turns++
      }
    }
    totals[label] = total
    const u = total.usage
    const tokens = u.cacheRead + CostModel.written(u) + u.uncached
    rows.push(
      {
        bench,
        metric: `${label}: input tokens (read / written / uncached)`,
        value: tokens,
        unit: `tok (${u.cacheRead} / ${CostModel.written(u)} / ${u.uncached})`,
      },
      { bench, metric: `${label}: effective input cost`, value: round(total.input, 0), unit: "tok-eq" },
      { bench, metric: `${label}: cost with output`, value: round(total.usd, 2), unit: "USD" },
      {
        bench,
        metric: `${label}: tool definitions in the prefix (mean per request)`,
        value: round(total.toolTokens / total.turns, 0),
        unit: "tok",
      },
    )
  }
  const a = totals["load_toolset"]!
  const b = totals["tool search"]!
  rows.push(
    { bench, metric: "tool search / load_toolset, effective input cost", value: round(b.input / a.input), unit: "×" },
    { bench, metric: "tool search / load_toolset, cost with output", value: round(b.usd / a.usd), unit: "×" },
  )
  return rows
}
