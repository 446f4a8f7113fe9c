/**
 * Memory tools answered by ctxd: `memory_search`, `memory_read`,
 * `memory_list` and `memory_history` (read-only) and `memory_remember`
 * (write), virtual tools of the toolset `memory`. The read tools go out with
 * the default toolsets (when the turn's agent/user has any memory, or the
 * turn asks for them: `options.memoryTools`); `memory_remember` only once the
 * model loads the toolset with its write tools
 * (`load_toolset({toolset: "memory", include_write_tools: true})`), or when
 * write tools come by default (`options.toolsets.includeWrite`).
 *
 * A call needs the memory store: {@link parse} turns its arguments into an
 * operation (or an error the model sees at once), the shell runs it and
 * {@link render} writes the result as the tool result text, cut to the
 * memory budget ({@link defaults}.`resultTokens`) with a line saying what
 * was cut. Pure: no I/O here.
 *
 * Cache-aware: the tools' schemas never change, and they sort by name with
 * the other default tools, so offering them changes the tool list once.
 */
import type { Conversation } from "@ctxd/contracts"

/**
 * The defaults: a result takes at most 2,200 tokens (the memory budget's
 * default), a search returns 5 hits unless the model asks (at most 20), a
 * list 10 documents (at most 50).
 */
export const defaults = {
  resultTokens: 2_200,
  searchLimit: 5,
  maxSearchLimit: 20,
  listLimit: 10,
  maxListLimit: 50,
} as const

/** The toolset the memory tools belong to. */
export const TOOLSET = "memory"
export const SEARCH = "memory_search"
export const READ = "memory_read"
export const LIST = "memory_list"
export const HISTORY = "memory_history"
export const REMEMBER = "memory_remember"

const virtual = (tool: Omit<Conversation.Tool, "extra" | "toolset">): Conversation.Tool => ({
  ...tool,
  toolset: TOOLSET,
  extra: { ctxd: "virtual" },
})

/** The five tools (the same objects every time), sorted by name. */
export const tools: ReadonlyArray<Conversation.Tool> = [
  virtual({
    name: HISTORY,
    description: "Show the earlier versions of a memory by its id (newest first).",
    inputSchema: { type: "object", properties: { id: { type: "string", description: "The memory id" } }, required: ["id"] },
    readOnly: true,
  }),
  virtual({
    name: LIST,
    description: "List the stored memories, the most recent first, a page at a time.",
    inputSchema: {
      type: "object",
      properties: {
        cursor: { type: "string", description: "The cursor a previous memory_list returned, for the next page" },
        limit: { type: "integer", description: `Memories per page (default ${defaults.listLimit}, at most ${defaults.maxListLimit})` },
      },
    },
    readOnly: true,
  }),
  virtual({
    name: READ,
    description: "Read one memory in full by its id.",
    inputSchema: { type: "object", properties: { id: { type: "string", description: "The memory id" } }, required: ["id"] },
    readOnly: true,
  }),
  virtual({
    name: REMEMBER,
    description:
      "Store a fact, preference or lesson to remember in later sessions; with the id of a memory, replace its text (the old text stays in its history).",
    inputSchema: {
      type: "object",
      properties: {
        text: { type: "string", description: "What to remember, self-contained" },
        tags: { type: "array", items: { type: "string" }, description: "Optional keywords" },
        id: { type: "string", description: "The id of a memory to update" },
      },
      required: ["text"],
    },
    readOnly: false,
  }),
  virtual({
    name: SEARCH,
    description: "Search the stored memories (facts, preferences, lessons from earlier sessions) by words; the best matches first.",
    inputSchema: {
      type: "object",
      properties: {
        query: { type: "string", description: "Words to look for" },
        limit: { type: "integer", description: `Matches wanted (default ${defaults.searchLimit}, at most ${defaults.maxSearchLimit})` },
      },
      required: ["query"],
    },
    readOnly: true,
  }),
]

const NAMES = new Set(tools.map((t) => t.name))

/** True for the name of a memory tool. */
export const isMemoryTool = (name: string): boolean => NAMES.has(name)

/** An operation a call asks the store for. */
export type Operation =
  | { readonly op: "search"; readonly query: string; readonly limit: number }
  | { readonly op: "read"; readonly id: string }
  | { readonly op: "list"; readonly cursor?: string | undefined; readonly limit: number }
  | { readonly op: "history"; readonly id: string }
  | { readonly op: "remember"; readonly text: string; readonly tags?: ReadonlyArray<string> | undefined; readonly id?: string | undefined }

/** One call for the shell to run. */
export interface Call {
  readonly callId: string
  readonly tool: string
  readonly operation: Operation
}

/** What the store said (the shape of `@ctxd/db` `MemoryStore`'s results), or why the call failed. */
export type Result =
  | {
      readonly op: "search"
      readonly hits: ReadonlyArray<{
        readonly id: string
        readonly text: string
        readonly tags: ReadonlyArray<string>
        readonly updatedAt: string
      }>
    }
  | {
      readonly op: "read"
      readonly document?:
        | {
            readonly id: string
            readonly text: string
            readonly tags: ReadonlyArray<string>
            readonly updatedAt: string
            readonly version: number
          }
        | undefined
    }
  | {
      readonly op: "list"
      readonly documents: ReadonlyArray<{ readonly id: string; readonly text: string; readonly updatedAt: string }>
      readonly nextCursor?: string | undefined
    }
  | {
      readonly op: "history"
      readonly versions?: ReadonlyArray<{ readonly version: number; readonly text: string; readonly at: string }> | undefined
    }
  | { readonly op: "remember"; readonly id: string; readonly version: number; readonly created: boolean }
  | { readonly op: "error"; readonly message: string }

/** A tool result: its text and whether it is an error. */
export interface Answer {
  readonly ok: boolean
  readonly text: string
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
const ID = /^[A-Za-z0-9_.:-]{1,128}$/
const limitOf = (u: unknown, fallback: number, max: number) =>
  typeof u === "number" && Number.isFinite(u) ? Math.min(max, Math.max(1, Math.floor(u))) : fallback

/** The operation a call of `tool` with `args` asks for, or the error the model gets instead. */
export const parse = (tool: string, args: unknown): Operation | string => {
  const a = isRecord(args) ? args : {}
  const id = () => (typeof a["id"] === "string" && ID.test(a["id"]) ? a["id"] : undefined)
  switch (tool) {
    case SEARCH: {
      const query = typeof a["query"] === "string" ? a["query"].trim() : ""
      return query === ""
        ? `missing argument "query" (words to look for)`
        : { op: "search", query: query.slice(0, 1_000), limit: limitOf(a["limit"], defaults.searchLimit, defaults.maxSearchLimit) }
    }
    case READ:
    case HISTORY: {
      const found = id()
      return found === undefined
        ? `missing or malformed argument "id" (a memory id)`
        : { op: tool === READ ? "read" : "history", id: found }
    }
    case LIST: {
      const cursor = typeof a["cursor"] === "string" && /^\d{1,18}$/.test(a["cursor"]) ? a["cursor"] : undefined
      return { op: "list", cursor, limit: limitOf(a["limit"], defaults.listLimit, defaults.maxListLimit) }
    }
    case REMEMBER: {
      const text = typeof a["text"] === "string" ? a["text"].trim() : ""
      if (text === "") return `missing argument "text" (what to remember)`
      const tags = Array.isArray(a["tags"])
        ? a["tags"].filter((t): t is string => typeof t === "string" && t.trim() !== "").slice(0, 16)
        : undefined
      if (a["id"] !== undefined && id() === undefined) return `malformed argument "id" (a memory id)`
      return { op: "remember", text, tags, id: id() }
    }
  }
  return `unknown memory tool ${JSON.stringify(tool)}`
}

const day = (iso: string) => iso.slice(0, 10)

/**
 * The tool result text for `result`, at most about `maxTokens` tokens (by
 * `countText`): items are kept whole, in order, while they fit (the first
 * one cut to fit when even it does not), and a last line says how many were
 * left out and how to get them.
 */
export const render = (result: Result, countText: (text: string) => number, maxTokens: number = defaults.resultTokens): Answer => {
  const fit = (head: string, items: ReadonlyArray<string>, more: (left: number) => string, tail = ""): string => {
    const lines = [head]
    let used = countText(head) + (tail === "" ? 0 : countText(tail))
    let kept = 0
    for (const item of items) {
      const cost = countText(item) + 1
      if (used + cost > maxTokens) {
        if (kept === 0) {
          // even the first does not fit: its start, cut by characters (about 3 per token)
          lines.push(`${item.slice(0, Math.max(0, (maxTokens - used - 20) * 3))}… [cut to fit the memory budget]`)
          kept = 1
        }
        break
      }
      lines.push(item)
      used += cost
      kept++
    }
    if (kept < items.length) lines.push(more(items.length - kept))
    if (tail !== "") lines.push(tail)
    return lines.join("\n")
  }
  switch (result.op) {
    case "search":
      return result.hits.length === 0
        ? { ok: true, text: "No memory matches." }
        : {
            ok: true,
            text: fit(
              `${result.hits.length} memories match, best first:`,
              result.hits.map((h) => `- [${h.id}] (${day(h.updatedAt)}${h.tags.length === 0 ? "" : `; ${h.tags.join(", ")}`}) ${h.text}`),
              (left) => `[${left} more matches left out to fit the memory budget; search with other words or read one by id]`,
            ),
          }
    case "read":
      return result.document === undefined
        ? { ok: false, text: "Error: no memory with that id." }
        : {
            ok: true,
            text: fit(
              `[${result.document.id}] version ${result.document.version}, ${day(result.document.updatedAt)}${result.document.tags.length === 0 ? "" : `; ${result.document.tags.join(", ")}`}`,
              [result.document.text],
              () => "",
            ),
          }
    case "list":
      return {
        ok: true,
        text:
          result.documents.length === 0
            ? "No memories stored."
            : fit(
                "Memories, most recent first:",
                result.documents.map((d) => `- [${d.id}] (${day(d.updatedAt)}) ${d.text}`),
                (left) => `[${left} more on this page left out to fit the memory budget]`,
                result.nextCursor === undefined ? "" : `[more: call ${LIST} with cursor "${result.nextCursor}"]`,
              ),
      }
    case "history":
      return result.versions === undefined
        ? { ok: false, text: "Error: no memory with that id." }
        : {
            ok: true,
            text: fit(
              `${result.versions.length} versions, newest first:`,
              result.versions.map((v) => `- version ${v.version} (${day(v.at)}): ${v.text}`),
              (left) => `[${left} older versions left out to fit the memory budget]`,
            ),
          }
    case "remember":
      return { ok: true, text: result.version === 1 ? `Remembered as ${result.id}.` : `Updated ${result.id} (version ${result.version}).` }
    case "error":
      return { ok: false, text: `Error: ${result.message}` }
  }
}

/** True when an assistant message of `incoming` calls a memory tool (the common case, none, costs one scan). */
export const called = (incoming: ReadonlyArray<Conversation.Message>): boolean =>
  incoming.some((m) => m.role === "assistant" && m.parts.some((p) => p.type === "tool_call" && isMemoryTool(p.name)))

/** {@link pending} of messages without memory calls. */
export const none: { readonly calls: ReadonlyArray<Call>; readonly answers: ReadonlyMap<string, Answer> } = {
  calls: [],
  answers: new Map(),
}

/**
 * The memory calls in a turn's incoming messages for the shell to run, in
 * order: calls of the memory tools in assistant messages that no later
 * incoming message answers (a runtime that answered one itself wins), with
 * their parsed operation; and the answers known already (malformed
 * arguments, `memory_remember` without the write tools). A tool of the
 * request's own with a memory tool's name is the runtime's: left alone.
 */
export const pending = (
  incoming: ReadonlyArray<Conversation.Message>,
  writeLoaded: boolean,
  clientTools: ReadonlyArray<Conversation.Tool> = [],
): { readonly calls: ReadonlyArray<Call>; readonly answers: ReadonlyMap<string, Answer> } => {
  const answeredByRuntime = new Set<string>()
  const own = new Set(clientTools.map((t) => t.name))
  for (const m of incoming) for (const p of m.parts) if (p.type === "tool_result") answeredByRuntime.add(p.callId)
  const calls: Array<Call> = []
  const answers = new Map<string, Answer>()
  for (const m of incoming) {
    if (m.role !== "assistant") continue
    for (const p of m.parts) {
      if (p.type !== "tool_call" || !isMemoryTool(p.name) || own.has(p.name) || answeredByRuntime.has(p.id)) continue
      if (p.name === REMEMBER && !writeLoaded) {
        answers.set(p.id, {
          ok: false,
          text: `Error: ${REMEMBER} is not loaded. Call load_toolset with toolset "${TOOLSET}" and include_write_tools: true first.`,
        })
        continue
      }
      const operation = parse(p.name, p.input)
      if (typeof operation === "string") answers.set(p.id, { ok: false, text: `Error: ${operation}.` })
      else calls.push({ callId: p.id, tool: p.name, operation })
    }
  }
  return { calls, answers }
}
