/**
 * Issue 6 (cache-aware context optimizations), measured on the pure pipeline
 * (`Pipeline.run`, no NATS/DB), turn by turn, Anthropic format:
 *
 * ctxd runs as the worker does: its turn stages in-process
 * (`InProcessTurns`, the worker's defaults); the peers and the ablations run
 * the pure pipeline with their own options.
 *
 * (a) the 22 SWE-agent trajectories back to back as one long session, each
 *     action an assistant tool call (`bash`, or the SWE-agent command it
 *     starts with) and each observation that call's tool result;
 * (b) the 200 tau-bench airline sessions with the GitHub MCP catalog (117
 *     tools) sent next to the airline tools.
 *
 * Three strategies each: full history; a 40-message sliding window (cut
 * every message); ctxd (window 40 / step 20, `Pipeline.defaults`:
 * minify, masking K 3 / batch 2,000, proactive 0.85; in (b) also the
 * on-demand toolsets: default GitHub toolsets read-only plus
 * `load_toolset`). Per strategy: history tokens per turn, and the effective
 * cost at Anthropic prices in base-input-token units: cache read 0.1×,
 * 5-minute cache write 1.25×, where the cache hit is the longest common
 * prefix (in tokens) with the previous request. The prefix is compared per
 * block: tools, system blocks, then each message content block with its
 * role, each serialized as JSON without `cache_control`; the hit is the sum
 * of the leading identical blocks' tokens. In (b) the previous request is
 * the previous one in replay order (sessions run back to back, so a new
 * session can reuse the tools and system prefix).
 *
 * Also: tokens per schema compression level on both catalogs, and the
 * default toolset context's share of the all-tools tokens.
 */
import { InProcessTurns } from "@ctxd/assembler"
import { Models, Normalize, Pipeline, SchemaCompression, Toolsets, type Window } from "@ctxd/context"
import type { Conversation, OpenAI, Turn } from "@ctxd/contracts"
import { Workloads } from "@ctxd/testing"
import { LocalCounter } from "@ctxd/tokens"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { round, type Row } from "./Stats.ts"

const counter = LocalCounter.make({ backend: "tiktoken", cacheCapacity: 200_000 })
/** Claude with a 1M window, so the full-history baseline is never cut by the budget. */
const MODEL = { provider: "anthropic", name: "claude-sonnet-4-5", contextWindow: 1_000_000 } as const
const model = Models.resolve(MODEL)
const encoding = counter.encodingFor(model)
const countTools = (tools: ReadonlyArray<Conversation.Tool>) => counter.countTools(tools, encoding)
const countText = (text: string) => counter.countText(text, encoding)

const READ = 0.1
const WRITE = 1.25

type Json = Record<string, unknown>

/** The request as comparable blocks: tools, system blocks, message blocks with their role; no `cache_control`. */
const blocks = (body: Json): Array<string> => {
  const plain = (b: Json): string => {
    const { cache_control: _drop, ...rest } = b
    return JSON.stringify(rest)
  }
  const out: Array<string> = []
  for (const t of (body["tools"] as Array<Json> | undefined) ?? []) out.push(`tool:${plain(t)}`)
  for (const s of (body["system"] as Array<Json> | undefined) ?? []) out.push(`system:${plain(s)}`)
  for (const m of body["messages"] as Array<Json>) {
    const content = m["content"]
    if (typeof content === "string") out.push(`${String(m["role"])}:${JSON.stringify(content)}`)
    else for (const b of content as Array<Json>) out.push(`${String(m["role"])}:${plain(b)}`)
  }
  return out
}

interface Strategy {
  readonly name: string
  readonly options: Pipeline.Options
  readonly tools: ReadonlyArray<Conversation.Tool>
  readonly toolOrder: "name" | "given"
  /** ctxd itself: the worker's turn stages in-process (the other fields are then unused). */
  readonly worker?: { readonly defaultToolsets?: ReadonlyArray<string> } | undefined
}

interface Tally {
  turns: number
  history: number
  input: number
  cached: number
  cost: number
  previous: Array<string>
}

const tally = (): Tally => ({ turns: 0, history: 0, input: 0, cached: 0, cost: 0, previous: [] })

const local = {
  encoding,
  countText,
  countTools,
  countMessage: (m: Conversation.Message) => counter.countMessage(m, encoding),
  countSystem: (system: ReadonlyArray<Conversation.SystemSection>) => counter.countSystem(system, encoding),
}

/** Adds one rendered request to the tally (cache hit: the leading blocks identical to the previous request's). */
const bill = (t: Tally, request: Json, historyTokens: number): void => {
  const now = blocks(request)
  let hit = 0
  let total = 0
  let same = true
  for (let i = 0; i < now.length; i++) {
    const n = countText(now[i]!)
    total += n
    if (same && t.previous[i] === now[i]) hit += n
    else same = false
  }
  t.turns++
  t.history += historyTokens
  t.input += total
  t.cached += hit
  t.cost += READ * hit + WRITE * (total - hit)
  t.previous = now
}

let sessions = 0

/** Replays one session's turns through the worker's turn stages in-process (`InProcessTurns`), with its defaults. */
const replayWorker = async (
  turns: ReadonlyArray<ReadonlyArray<Conversation.Message>>,
  system: ReadonlyArray<Conversation.SystemSection>,
  tools: ReadonlyArray<Conversation.Tool>,
  worker: NonNullable<Strategy["worker"]>,
  t: Tally,
): Promise<void> => {
  const turnsOfWorker = InProcessTurns.make(
    { local, count: InProcessTurns.countLocally(local) },
    { defaults: { ...(worker.defaultToolsets === undefined ? {} : { toolsets: { defaults: worker.defaultToolsets } }) } },
  )
  const session = `s${sessions++}`
  let k = 0
  try {
    for (const messages of turns) {
      const request = { turnId: `t${k++}`, format: "anthropic", model: MODEL, messages: [] } as const
      const normalized = { system, tools, messages: messages.map((message, i) => ({ message, sourceIndex: i })) }
      const reply = await turnsOfWorker.turn("bench", session, request, normalized)
      bill(t, reply.request, reply.report.tokens.history)
    }
  } finally {
    await turnsOfWorker.dispose()
  }
}

/** Replays one session's turns under a strategy, adding to `t`. */
const replay = async (
  turns: ReadonlyArray<ReadonlyArray<Conversation.Message>>,
  system: ReadonlyArray<Conversation.SystemSection>,
  strategy: Strategy,
  t: Tally,
): Promise<void> => {
  if (strategy.worker !== undefined) return replayWorker(turns, system, strategy.tools, strategy.worker, t)
  const history: Array<Pipeline.StoredMessage> = []
  const toolsTokens = countTools(strategy.tools)
  const systemTokens = counter.countSystem(system, encoding)
  let landmarks: Window.Landmarks | undefined
  let maskGrid: Pipeline.Output["maskGrid"]
  let proactiveRung: number | undefined
  for (const messages of turns) {
    for (const message of messages) {
      history.push({ seq: history.length + 1, message, tokens: counter.countMessage(message, encoding) })
    }
    const out = Pipeline.run({
      tenant: "bench",
      session: "s",
      format: "anthropic",
      model,
      system,
      systemTokens,
      tools: strategy.tools,
      toolsTokens,
      history,
      options: strategy.options,
      counter: { backend: "tiktoken", encoding, exact: false, calibration: 1 },
      landmarks,
      maskGrid,
      proactiveRung,
      toolOrder: strategy.toolOrder,
      countTools,
      countText,
    })
    landmarks = out.landmarks
    maskGrid = out.maskGrid
    proactiveRung = out.proactiveRung
    bill(t, out.request, out.report.tokens.history)
  }
}

// ------------------------------------------------------------ (a) SWE-agent

/** SWE-agent commands that become their own tool; any other action is `bash`. */
const COMMANDS: ReadonlySet<string> = new Set([
  "open",
  "goto",
  "scroll_down",
  "scroll_up",
  "create",
  "edit",
  "insert",
  "search_dir",
  "search_file",
  "find_file",
  "submit",
  "decompile",
  "disassemble",
  "debug_start",
  "debug_add_breakpoint",
  "debug_continue",
  "debug_step",
  "debug_exec",
  "debug_stop",
  "connect_start",
  "connect_sendline",
  "connect_exec",
  "connect_stop",
  "exit_forfeit",
])

const commandOf = (action: string): string => {
  const first = action.trim().split(/\s+/)[0] ?? ""
  return COMMANDS.has(first) ? first : "bash"
}

type Raw = Record<string, unknown>
const str = (u: unknown): string => (typeof u === "string" ? u : u === undefined || u === null ? "" : JSON.stringify(u))

/** The trajectories as one session: system of the first, then each task, actions as calls, observations as results. */
export const sweSession = (): { system: string; messages: Array<Conversation.Message>; tools: Array<Conversation.Tool> } => {
  const dir = join(Workloads.fullDataDir(), "swe-agent")
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".traj"))
    .sort()
  let system = ""
  const messages: Array<Conversation.Message> = []
  const names = new Set<string>()
  files.forEach((file, f) => {
    const history = (JSON.parse(readFileSync(join(dir, file), "utf8")) as { history: Array<Raw> }).history
    let open: string | undefined
    history.forEach((m, k) => {
      const content = str(m["content"])
      if (m["role"] === "system") {
        if (system === "") system = content
        return
      }
      if (m["role"] === "assistant") {
        const action = str(m["action"]).trim()
        const thought = str(m["thought"] ?? m["content"]).trim()
        if (action === "") {
          messages.push({ role: "assistant", parts: [{ type: "text", text: content }] })
          open = undefined
          return
        }
        const name = commandOf(action)
        names.add(name)
        open = `call_${f}_${k}`
        const args = JSON.stringify({ command: action })
        messages.push({
          role: "assistant",
          parts: [
            ...(thought === "" ? [] : [{ type: "text" as const, text: thought }]),
            { type: "tool_call", id: open, name, input: { command: action }, arguments: args },
          ],
        })
        return
      }
      if (open !== undefined) {
        messages.push({
          role: "tool",
          parts: [{ type: "tool_result", callId: open, content: [{ type: "text", text: content }], isError: false }],
        })
        open = undefined
      } else {
        messages.push({ role: "user", parts: [{ type: "text", text: content }] })
      }
    })
  })
  const tools = [...names].sort().map((name): Conversation.Tool => ({
    name,
    description: name === "bash" ? "Run a shell command in the task's container." : `SWE-agent command \`${name}\`.`,
    inputSchema: {
      type: "object",
      properties: { command: { type: "string", description: "The full command line, with its arguments" } },
      required: ["command"],
    },
  }))
  return { system, messages, tools }
}

/** Each assistant message is a model call: turn k = the messages before assistant k that are new. */
export const turnsOf = (messages: ReadonlyArray<Conversation.Message>): Array<Array<Conversation.Message>> => {
  const turns: Array<Array<Conversation.Message>> = []
  let start = 0
  messages.forEach((m, i) => {
    if (m.role !== "assistant" || i === 0) return
    turns.push(messages.slice(start, i))
    start = i
  })
  return turns
}

const full = Pipeline.resolveOptions({ windowMessages: 1_000_000, windowStep: 1 })
const sliding = Pipeline.resolveOptions({ windowMessages: 40, windowStep: 1 })

const costRows = (bench: string, tallies: Record<"full" | "sliding" | "ctxd", Tally>, targets: boolean): Array<Row> => {
  const { full: f, sliding: s, ctxd: c } = tallies
  const fewer = 1 - c.history / f.history
  const rows: Array<Row> = []
  for (const [name, t] of Object.entries(tallies)) {
    rows.push(
      { bench, metric: `${name}: history tokens per turn (mean)`, value: round(t.history / t.turns, 0), unit: "tok" },
      { bench, metric: `${name}: input tokens (sum)`, value: t.input, unit: "tok" },
      { bench, metric: `${name}: cache hit share`, value: round((100 * t.cached) / t.input, 1), unit: "%" },
      { bench, metric: `${name}: effective cost (sum)`, value: round(t.cost, 0), unit: "tok-eq" },
    )
  }
  const vsFull = 1 - c.cost / f.cost
  const vsSliding = 1 - c.cost / s.cost
  rows.push(
    targets
      ? {
          bench,
          metric: "ctxd: history tokens vs full (sum over turns)",
          value: round(100 * fewer, 1),
          unit: "% fewer",
          target: "≥ 45",
          met: fewer >= 0.45,
        }
      : { bench, metric: "ctxd: history tokens vs full (sum over turns)", value: round(100 * fewer, 1), unit: "% fewer" },
    targets
      ? {
          bench,
          metric: "ctxd: effective cost vs full history",
          value: round(100 * vsFull, 1),
          unit: "% lower",
          target: "> 0",
          met: vsFull > 0,
        }
      : { bench, metric: "ctxd: effective cost vs full history", value: round(100 * vsFull, 1), unit: "% lower" },
    targets
      ? {
          bench,
          metric: "ctxd: effective cost vs sliding window",
          value: round(100 * vsSliding, 1),
          unit: "% lower",
          target: "> 0",
          met: vsSliding > 0,
        }
      : { bench, metric: "ctxd: effective cost vs sliding window", value: round(100 * vsSliding, 1), unit: "% lower" },
  )
  return rows
}

const runSwe = async (): Promise<Array<Row>> => {
  const session = sweSession()
  const system = Normalize.system(session.system)
  const turns = turnsOf(session.messages)
  const tallies = { full: tally(), sliding: tally(), ctxd: tally() }
  const strategies: Record<keyof typeof tallies, Strategy> = {
    full: { name: "full", options: full, tools: session.tools, toolOrder: "name" },
    sliding: { name: "sliding", options: sliding, tools: session.tools, toolOrder: "name" },
    ctxd: { name: "ctxd", options: full, tools: session.tools, toolOrder: "name", worker: {} },
  }
  for (const key of Object.keys(tallies) as Array<keyof typeof tallies>) await replay(turns, system, strategies[key], tallies[key])
  const bench = `optimizations (a) SWE-agent, ${turns.length} turns as one session`
  // What masking adds, and what its batching is worth: ctxd without masking, and masking every turn.
  const variants: ReadonlyArray<readonly [string, Turn.Options]> = [
    ["ctxd without masking", { ...Pipeline.defaults, maskKeep: undefined }],
    ["ctxd masking without batches (batch 1 token)", { ...Pipeline.defaults, maskBatchTokens: 1 }],
  ]
  const extra: Array<Row> = []
  for (const [name, options] of variants) {
    const t = tally()
    const o = Pipeline.resolveOptions(Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)))
    await replay(turns, system, { name, options: o, tools: session.tools, toolOrder: "name" }, t)
    extra.push(
      { bench, metric: `${name}: history tokens per turn (mean)`, value: round(t.history / t.turns, 0), unit: "tok" },
      { bench, metric: `${name}: effective cost (sum)`, value: round(t.cost, 0), unit: "tok-eq" },
    )
  }
  return [...costRows(bench, tallies, true), ...extra]
}

// ------------------------------------------------------------ (b) tau-bench + GitHub catalog

const githubTools = (): { tools: Array<Conversation.Tool>; config: Toolsets.Config } => {
  const catalog = Workloads.githubCatalog(Workloads.fullDataDir())
  return {
    tools: Normalize.tools("openai", catalog.tools),
    config: {
      defaultToolsets: catalog.toolsets.filter((t) => t.default).map((t) => t.id),
      descriptions: Object.fromEntries(catalog.toolsets.map((t) => [t.id, t.description])),
    },
  }
}

const runTau = async (): Promise<Array<Row>> => {
  const sessions = Workloads.tauBenchSessions(Workloads.fullDataDir())
  const github = githubTools()
  const airline = Normalize.tools("openai", sessions[0]!.tools)
  const all = [...airline, ...github.tools]
  const selected = Toolsets.selectTools(all, Toolsets.empty, github.config)
  const strategies = {
    full: { name: "full", options: full, tools: all, toolOrder: "name" as const },
    sliding: { name: "sliding", options: sliding, tools: all, toolOrder: "name" as const },
    ctxd: {
      name: "ctxd",
      options: full,
      tools: all,
      toolOrder: "given" as const,
      worker: { defaultToolsets: github.config.defaultToolsets },
    },
  }
  const tallies = { full: tally(), sliding: tally(), ctxd: tally() }
  for (const session of sessions) {
    const system = Normalize.system(session.system)
    const turns = session.turns.map((t) => Normalize.fromOpenAI(t.messages as ReadonlyArray<OpenAI.Message>))
    for (const key of Object.keys(tallies) as Array<keyof typeof tallies>) await replay(turns, system, strategies[key], tallies[key])
  }
  const bench = `optimizations (b) tau-bench + GitHub catalog, ${sessions.length} sessions`
  return [...costRows(bench, tallies, false), { bench, metric: "ctxd: tools sent / all", value: selected.length, unit: `of ${all.length}` }]
}

// ------------------------------------------------------------ compression, default context

const compressionRows = (): Array<Row> => {
  const rows: Array<Row> = []
  const raw = JSON.parse(readFileSync(join(Workloads.fullDataDir(), "tau-bench-tools.json"), "utf8")) as Record<string, Array<OpenAI.Tool>>
  const catalogs: ReadonlyArray<readonly [string, ReadonlyArray<Conversation.Tool>]> = [
    ["GitHub MCP catalog (117 tools)", githubTools().tools],
    ["tau-bench tools (airline + retail, 30)", Normalize.tools("openai", [...raw["airline"]!, ...raw["retail"]!])],
  ]
  for (const [name, tools] of catalogs) {
    const none = countTools(tools)
    for (const level of SchemaCompression.levels) {
      const n = countTools(SchemaCompression.compressAll(tools, level))
      const bench = `schema compression, ${name}`
      rows.push(
        { bench, metric: `${level}: tokens`, value: n, unit: "tok" },
        { bench, metric: `${level}: saved`, value: round(100 * (1 - n / none), 1), unit: "%" },
      )
    }
  }
  const github = githubTools()
  const everything = countTools(github.tools)
  const bench = "on-demand toolsets, GitHub catalog default context (default toolsets read-only + load_toolset)"
  for (const level of SchemaCompression.levels) {
    const share =
      countTools(SchemaCompression.compressAll(Toolsets.selectTools(github.tools, Toolsets.empty, github.config), level)) / everything
    rows.push(
      level === "truncate"
        ? {
            bench,
            metric: `${level} (the default): share of all-tools tokens`,
            value: round(100 * share, 1),
            unit: "%",
            target: "≤ 20",
            met: share <= 0.2,
          }
        : { bench, metric: `${level}: share of all-tools tokens`, value: round(100 * share, 1), unit: "%" },
    )
  }
  return rows
}

/** All rows: (a), (b), compression per level, default toolset context. */
export const run = async (): Promise<Row[]> => [...(await runSwe()), ...(await runTau()), ...compressionRows()]
