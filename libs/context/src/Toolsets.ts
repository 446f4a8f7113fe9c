/**
 * On-demand toolsets. Tools carry a `toolset` and a `readOnly` flag (MCP
 * `readOnlyHint`; a tool without the flag counts as a write tool). A session
 * starts with the configured default toolsets (their read-only tools unless
 * configured otherwise), every tool without a toolset, and the virtual
 * `load_toolset(toolset, include_write_tools)` tool; ctxd answers a call of
 * it itself ({@link answerVirtualCalls}), remembers the loaded toolset in the
 * session {@link State}, and the next request carries its tools.
 *
 * Cache-aware order ({@link selectTools}): the first group (virtual tools,
 * tools without a toolset, default toolsets) sorted by name, then one group
 * per load, in load order, each sorted by name. A load only appends: the
 * tools sent before stay a prefix of the list, so the cached prefix changes
 * once per load, not on every later turn. Render with `toolOrder: "given"`.
 */
import type { Conversation } from "@ctxd/contracts"
import * as Knowledge from "./Knowledge.ts"
import * as MemoryTools from "./MemoryTools.ts"
import * as Recall from "./Recall.ts"
import { collapse } from "./SchemaCompression.ts"

/** Name of the virtual tool. */
export const LOAD_TOOLSET = "load_toolset"

/** One load: a toolset and whether its write tools came with it. */
export interface Loaded {
  readonly toolset: string
  readonly write: boolean
}

/** Per-session state to persist (JSON-safe): the loads, in order. */
export interface State {
  readonly loaded: ReadonlyArray<Loaded>
}

/** A session that loaded nothing yet. */
export const empty: State = { loaded: [] }

/** Per tenant/agent configuration. */
export interface Config {
  /** Toolsets sent from the start. */
  readonly defaultToolsets: ReadonlyArray<string>
  /** Send the write tools of the default toolsets too (default false: read-only only). */
  readonly includeWriteByDefault?: boolean | undefined
  /** One line per toolset id for the `load_toolset` description; default: generated from its tool names. */
  readonly descriptions?: Readonly<Record<string, string>> | undefined
}

/** A toolset as the model sees it in `load_toolset`. */
export interface Info {
  readonly id: string
  readonly description: string
  readonly tools: number
  readonly readOnly: number
}

/** True for a tool that may change something: `readOnly` is not `true`. */
export const isWrite = (tool: Conversation.Tool): boolean => tool.readOnly !== true

/** True when some tool has a toolset (otherwise there is nothing to load on demand). */
export const inUse = (tools: ReadonlyArray<Conversation.Tool>): boolean => tools.some((t) => t.toolset !== undefined)

const byName = (a: Conversation.Tool, b: Conversation.Tool): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)

const members = (tools: ReadonlyArray<Conversation.Tool>, id: string): Array<Conversation.Tool> => tools.filter((t) => t.toolset === id)

/** The toolsets of `tools`, sorted by id, with one-line descriptions (configured, else the first tool names). */
export const available = (tools: ReadonlyArray<Conversation.Tool>, config: Config): Array<Info> => {
  const ids = [...new Set(tools.flatMap((t) => (t.toolset === undefined ? [] : [t.toolset])))].sort()
  return ids.map((id) => {
    const list = members(tools, id)
    const names = list.map((t) => t.name).sort()
    const given = config.descriptions?.[id]
    const description =
      given !== undefined && collapse(given) !== ""
        ? collapse(given)
        : `tools such as ${names.slice(0, 4).join(", ")}${names.length > 4 ? ", …" : ""}`
    return { id, description, tools: list.length, readOnly: list.filter((t) => !isWrite(t)).length }
  })
}

const infoLine = (t: Info): string => `- ${t.id}: ${t.description} (${t.tools} tools, ${t.readOnly} read-only)`

/**
 * The virtual `load_toolset` tool: `toolset` is an enum of every available
 * toolset id (sorted), and the description lists them with one line each.
 * Depends only on the tool catalog and the config, so it is stable for a
 * session. `extra.ctxd = "virtual"` keeps it out of schema compression.
 */
export const loadToolsetTool = (tools: ReadonlyArray<Conversation.Tool>, config: Config): Conversation.Tool => {
  const infos = available(tools, config)
  return {
    name: LOAD_TOOLSET,
    description: [
      "Load more tools by toolset. Their tools can be called from your next step on; a loaded toolset stays loaded.",
      "Only read-only tools are loaded unless include_write_tools is true. Toolsets:",
      ...infos.map(infoLine),
    ].join("\n"),
    inputSchema: {
      type: "object",
      properties: {
        toolset: { type: "string", enum: infos.map((t) => t.id), description: "The toolset to load" },
        include_write_tools: {
          type: "boolean",
          description: "Also load the tools that create, change or delete things (default false)",
        },
      },
      required: ["toolset"],
    },
    extra: { ctxd: "virtual" },
  }
}

/** The loads in effect: the defaults first, then the session's loads. */
const effectiveLoads = (state: State, config: Config): Array<Loaded> => [
  ...config.defaultToolsets.map((toolset) => ({ toolset, write: config.includeWriteByDefault === true })),
  ...state.loaded,
]

/**
 * The tools to send, in cache-stable order: group 0 = `virtual` tools (e.g.
 * `Knowledge.tool`), `load_toolset`, every tool without a toolset and the
 * default toolsets' tools (read-only ones unless `includeWriteByDefault`),
 * sorted by name; then per load in `state`, in order, the tools it adds,
 * sorted by name. A tool name is sent once (the first definition wins).
 * Without any toolset in `tools`: `virtual` and `tools` sorted by name, no
 * `load_toolset`.
 */
export const selectTools = (
  tools: ReadonlyArray<Conversation.Tool>,
  state: State,
  config: Config,
  virtual: ReadonlyArray<Conversation.Tool> = [],
): Array<Conversation.Tool> => {
  const sent = new Set<string>()
  const take = (list: ReadonlyArray<Conversation.Tool>): Array<Conversation.Tool> => {
    const out: Array<Conversation.Tool> = []
    for (const t of list) {
      if (sent.has(t.name)) continue
      sent.add(t.name)
      out.push(t)
    }
    return out.sort(byName)
  }
  if (!inUse(tools)) return take([...virtual, ...tools])
  const pick = (loads: ReadonlyArray<Loaded>) => tools.filter((t) => loads.some((l) => t.toolset === l.toolset && (l.write || !isWrite(t))))
  const out = take([
    ...virtual,
    loadToolsetTool(tools, config),
    ...tools.filter((t) => t.toolset === undefined),
    ...pick(effectiveLoads(empty, config)),
  ])
  for (const l of state.loaded) out.push(...take(pick([l])))
  return out
}

/** A virtual call ctxd answered (goes to `report.virtualCalls`). */
export interface VirtualCall {
  readonly tool: string
  readonly callId: string
  readonly args: unknown
  readonly ok: boolean
}

/** What answering needs: the request's tools, the toolset config, the registered documents, the stored history. */
export interface Context {
  readonly tools: ReadonlyArray<Conversation.Tool>
  readonly config: Config
  /** Registered documents; absent: `load_knowledge` is not answered (knowledge is off). */
  readonly knowledge?: ReadonlyArray<Knowledge.Doc> | undefined
  /** The stored history to restore masked results from; absent: `recall` is not answered (see `Recall.enabled`). */
  readonly recall?: Recall.Source | undefined
  /** The memory calls' answers, by call id (run by the shell: `MemoryTools.pending`); absent: memory tools are not answered. */
  readonly memory?: { readonly answers: ReadonlyMap<string, MemoryTools.Answer> } | undefined
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Answers one `load_toolset` call: result text, ok, and the new state. */
export const load = (args: unknown, state: State, context: Context): { text: string; ok: boolean; state: State } => {
  const { tools, config } = context
  const infos = available(tools, config)
  const id = isRecord(args) ? args["toolset"] : undefined
  const write = isRecord(args) && args["include_write_tools"] === true
  const list = `Available toolsets:\n${infos.map(infoLine).join("\n")}`
  if (typeof id !== "string" || !infos.some((t) => t.id === id)) {
    const what = typeof id === "string" ? `unknown toolset ${JSON.stringify(id)}` : `missing argument "toolset" (a string)`
    return { ok: false, state, text: `Error: ${what}. ${list}` }
  }
  const loads = effectiveLoads(state, config).filter((l) => l.toolset === id)
  const has = (t: Conversation.Tool): boolean => loads.some((l) => l.write || !isWrite(t))
  const wanted = members(tools, id).filter((t) => write || !isWrite(t))
  const fresh = wanted.filter((t) => !has(t))
  const names = (ts: ReadonlyArray<Conversation.Tool>) =>
    ts
      .map((t) => t.name)
      .sort()
      .join(", ")
  const mode = write ? "with write tools" : "read-only"
  if (wanted.length === 0) {
    const total = members(tools, id).length
    return {
      ok: false,
      state,
      text: `Error: toolset ${JSON.stringify(id)} has no read-only tools. Call ${LOAD_TOOLSET} again with include_write_tools: true to load its ${total} tools (they can change things).`,
    }
  }
  if (fresh.length === 0) {
    return { ok: true, state, text: `Toolset ${JSON.stringify(id)} is already loaded (${mode}): ${names(wanted)}.` }
  }
  return {
    ok: true,
    state: { loaded: [...state.loaded, { toolset: id, write }] },
    text: `Loaded toolset ${JSON.stringify(id)} (${mode}): ${names(fresh)}. They can be called from your next step on.`,
  }
}

/**
 * Answers the virtual calls of one assistant message, skipping call ids in
 * `answered` (a runtime that answered a call itself wins). `load_toolset`
 * is answered when some tool has a toolset; `load_knowledge` when
 * `context.knowledge` is given; `recall` when `context.recall` is given; a
 * memory tool when `context.memory` holds its answer.
 * Returns the tool results to append (in call order), the new state and the
 * report entries.
 */
export const answerCalls = (
  message: Conversation.Message,
  state: State,
  context: Context,
  answered: ReadonlySet<string> = new Set(),
): { results: Array<Conversation.ToolResultPart>; state: State; calls: Array<VirtualCall> } => {
  const results: Array<Conversation.ToolResultPart> = []
  const calls: Array<VirtualCall> = []
  let current = state
  const toolsets = inUse(context.tools)
  for (const part of message.parts) {
    if (part.type !== "tool_call" || answered.has(part.id)) continue
    let outcome: { text: string; ok: boolean } | undefined
    if (part.name === LOAD_TOOLSET && toolsets) {
      const loaded = load(part.input, current, context)
      current = loaded.state
      outcome = loaded
    } else if (part.name === Knowledge.LOAD_KNOWLEDGE && context.knowledge !== undefined) {
      outcome = Knowledge.answer(part.input, context.knowledge)
    } else if (part.name === Recall.RECALL && context.recall !== undefined) {
      outcome = Recall.answer(part.input, context.recall)
    } else if (MemoryTools.isMemoryTool(part.name)) {
      outcome = context.memory?.answers.get(part.id)
    }
    if (outcome === undefined) continue
    results.push({ type: "tool_result", callId: part.id, content: [{ type: "text", text: outcome.text }], isError: !outcome.ok })
    calls.push({ tool: part.name, callId: part.id, args: part.input ?? {}, ok: outcome.ok })
  }
  return { results, state: current, calls }
}

/** The outcome of {@link answerVirtualCalls}. */
export interface Answered {
  /** The incoming messages with a `tool` message of virtual results after each answered assistant message's results. */
  readonly messages: Array<Conversation.Message>
  readonly state: State
  readonly calls: Array<VirtualCall>
}

/**
 * Answers every virtual call in a turn's incoming messages: after each
 * assistant message that makes one (and after the run of `tool` messages
 * that follows it), a `tool` message with ctxd's results is inserted, so
 * pairing holds. Calls the incoming messages already answer are skipped.
 * Run it after the pairing check and before storing the messages.
 */
export const answerVirtualCalls = (incoming: ReadonlyArray<Conversation.Message>, state: State, context: Context): Answered => {
  const messages: Array<Conversation.Message> = []
  const calls: Array<VirtualCall> = []
  let current = state
  let i = 0
  while (i < incoming.length) {
    const message = incoming[i]!
    messages.push(message)
    i++
    if (message.role !== "assistant" || !message.parts.some((p) => p.type === "tool_call")) continue
    const answered = new Set<string>()
    for (const later of incoming.slice(i)) {
      for (const p of later.parts) if (p.type === "tool_result") answered.add(p.callId)
    }
    while (i < incoming.length && incoming[i]!.role === "tool") messages.push(incoming[i++]!)
    const out = answerCalls(message, current, context, answered)
    current = out.state
    calls.push(...out.calls)
    if (out.results.length > 0) messages.push({ role: "tool", parts: out.results })
  }
  return { messages, state: current, calls }
}

/**
 * The state a stored history implies: every `load_toolset` call in it
 * replayed with {@link load}, in order. Used to rehydrate a session on
 * another worker without storing the state separately (the history is the
 * truth).
 */
export const replay = (history: ReadonlyArray<Conversation.Message>, context: Context): State => {
  if (!inUse(context.tools)) return empty
  let state = empty
  for (const message of history) {
    if (message.role !== "assistant") continue
    for (const part of message.parts) {
      if (part.type === "tool_call" && part.name === LOAD_TOOLSET) state = load(part.input, state, context).state
    }
  }
  return state
}
