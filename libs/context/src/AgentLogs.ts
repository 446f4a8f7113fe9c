/**
 * Recorded agent logs → replay sessions: one entry per model call, each
 * carrying the messages that arrived since the previous call (what an agent
 * runtime sends in a turn request). Pure: text in, sessions out; the caller
 * reads the files (`ctxd replay`, the test workloads).
 *
 * Recognised shapes ({@link parse}):
 * - SWE-agent trajectory (`.traj`: `{history: [...]}`);
 * - tau-bench results (`[{task_id, trial, traj: [...]}, ...]`; their tools
 *   live in a separate file, passed as `tauTools`);
 * - OpenAI Chat Completions: a message array, `{messages, tools?}`, or JSONL
 *   with one such conversation per line;
 * - Anthropic Messages: `{system?, messages, tools?}` or a message array
 *   whose content holds `tool_use` / `tool_result` blocks;
 * - OpenAI Responses input items: an item array or `{instructions?, input, tools?}`.
 *
 * A turn ends at each assistant message: turn k holds the messages after
 * turn k−1's, up to but not including assistant message k; messages after
 * the last assistant message are dropped (no model call consumed them).
 */
import type { Anthropic, Conversation, OpenAI, OpenAIResponses } from "@ctxd/contracts"
import * as Normalize from "./Normalize.ts"

/** The log formats {@link parse} recognises. */
export type Source = "swe-agent" | "tau-bench" | "openai-chat" | "anthropic" | "openai-responses"

/** One recorded session in OpenAI Chat form (the shared test workloads are kept this way). */
export interface ChatSession {
  readonly id: string
  /** The session's first system message. */
  readonly system: string
  readonly tools: ReadonlyArray<OpenAI.Tool>
  readonly turns: ReadonlyArray<{ readonly messages: ReadonlyArray<OpenAI.Message> }>
}

/** One recorded session in neutral form, ready to replay. */
export interface Session {
  readonly id: string
  readonly source: Source
  readonly system: ReadonlyArray<Conversation.SystemSection>
  readonly tools: ReadonlyArray<Conversation.Tool>
  /** Per model call, the messages that arrived since the previous call. */
  readonly turns: ReadonlyArray<ReadonlyArray<Conversation.Message>>
}

type Raw = Record<string, unknown>
const isRecord = (u: unknown): u is Raw => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): string => (typeof u === "string" ? u : u === undefined || u === null ? "" : JSON.stringify(u))

/** Splits a conversation (without its leading system message) into turns (see the module comment). */
export const splitTurns = <M extends { readonly role: string }>(
  messages: ReadonlyArray<M>,
): Array<{ readonly messages: ReadonlyArray<M> }> => {
  const turns: Array<{ readonly messages: ReadonlyArray<M> }> = []
  let start = 0
  messages.forEach((message, i) => {
    if (message.role !== "assistant") return
    turns.push({ messages: messages.slice(start, i) })
    start = i
  })
  return turns
}

const toolCalls = (raw: unknown): Array<OpenAI.ToolCall> =>
  (Array.isArray(raw) ? raw : []).filter(isRecord).map((call) => {
    const fn = isRecord(call.function) ? call.function : {}
    return {
      id: str(call.id),
      type: "function" as const,
      function: { name: str(fn.name), arguments: typeof fn.arguments === "string" ? fn.arguments : JSON.stringify(fn.arguments ?? {}) },
    }
  })

const assistant = (raw: Raw): OpenAI.AssistantMessage => {
  const calls = toolCalls(raw.tool_calls)
  const content = typeof raw.content === "string" ? raw.content : null
  return calls.length > 0 ? { role: "assistant", content, tool_calls: calls } : { role: "assistant", content: content ?? "" }
}

/** Splits off the first system message; the rest are the conversation. */
const withSystem = (messages: ReadonlyArray<OpenAI.Message>): { system: string; rest: ReadonlyArray<OpenAI.Message> } => {
  const first = messages[0]
  return first !== undefined && first.role === "system"
    ? { system: str(first.content), rest: messages.slice(1) }
    : { system: "", rest: messages }
}

/**
 * Messages reduced to the keys of the contracts' OpenAI schemas (`agent`,
 * `thought`, `action`, a tool message's `name`... are dropped). A SWE-agent
 * tool observation with `tool_call_ids` becomes one `tool` message per id
 * (same content); one without ids (the answer to a plain-text action)
 * becomes a `user` message, as the model saw it.
 */
export const chatMessages = (raw: ReadonlyArray<unknown>): Array<OpenAI.Message> =>
  raw.filter(isRecord).flatMap((m): Array<OpenAI.Message> => {
    switch (m.role) {
      case "assistant":
        return [assistant(m)]
      case "tool": {
        const ids = Array.isArray(m.tool_call_ids) ? m.tool_call_ids.filter((id) => typeof id === "string" && id !== "") : []
        if (ids.length > 0) return ids.map((id): OpenAI.Message => ({ role: "tool", tool_call_id: id as string, content: str(m.content) }))
        return typeof m.tool_call_id === "string"
          ? [{ role: "tool", tool_call_id: m.tool_call_id, content: str(m.content) }]
          : [{ role: "user", content: str(m.content) }]
      }
      case "system":
      case "developer":
        return [{ role: "system", content: str(m.content) }]
      default:
        return [
          {
            role: "user",
            content:
              typeof m.content === "string" || Array.isArray(m.content) ? (m.content as OpenAI.UserMessage["content"]) : str(m.content),
          },
        ]
    }
  })

/** JSON Schema type of a sample argument value. */
const jsonType = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "array" : typeof value === "number" ? "number" : typeof value

/**
 * Tool definitions synthesized from the recorded calls (logs that record
 * calls, not definitions): one per called name, its parameters the union of
 * the argument names seen.
 */
export const synthesizeTools = (messages: ReadonlyArray<OpenAI.Message>, label = "command"): Array<OpenAI.Tool> => {
  const seen = new Map<string, Map<string, string>>()
  for (const m of messages) {
    if (m.role !== "assistant") continue
    for (const call of m.tool_calls ?? []) {
      const properties = seen.get(call.function.name) ?? new Map<string, string>()
      seen.set(call.function.name, properties)
      try {
        const parsed: unknown = JSON.parse(call.function.arguments)
        if (isRecord(parsed)) for (const [k, v] of Object.entries(parsed)) properties.set(k, jsonType(v))
      } catch {
        // unparsable arguments: no parameters learned
      }
    }
  }
  return [...seen.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, properties]) => ({
      type: "function",
      function: {
        name,
        description: `${label} \`${name}\` (definition synthesized from the recorded calls)`,
        parameters: { type: "object", properties: Object.fromEntries([...properties].map(([k, type]) => [k, { type }])) },
      },
    }))
}

/** A chat conversation (system first, if any) as a session; tools synthesized from its calls when none are given. */
export const chatSession = (
  id: string,
  messages: ReadonlyArray<OpenAI.Message>,
  tools?: ReadonlyArray<OpenAI.Tool>,
  label?: string,
): ChatSession => {
  const { system, rest } = withSystem(messages)
  return { id, system, tools: tools ?? synthesizeTools(rest, label), turns: splitTurns(rest) }
}

/** A SWE-agent trajectory (`{history}`) as a session. */
export const sweAgent = (id: string, trajectory: unknown): ChatSession =>
  chatSession(
    id,
    chatMessages(isRecord(trajectory) && Array.isArray(trajectory.history) ? trajectory.history : []),
    undefined,
    "SWE-agent command",
  )

/** tau-bench results (`[{task_id, trial, traj}]`) with their tools; ids `<prefix>-<task_id>-<trial>`. */
export const tauBench = (entries: ReadonlyArray<unknown>, tools: ReadonlyArray<OpenAI.Tool>, prefix = "tau"): Array<ChatSession> =>
  entries
    .filter(isRecord)
    .map((entry) =>
      chatSession(`${prefix}-${str(entry.task_id)}-${str(entry.trial)}`, chatMessages(Array.isArray(entry.traj) ? entry.traj : []), tools),
    )

/** A chat session in neutral form. */
export const fromChat = (session: ChatSession, source: Source): Session => ({
  id: session.id,
  source,
  system: Normalize.system(session.system),
  tools: Normalize.tools("openai", session.tools),
  turns: session.turns.map((t) => Normalize.fromOpenAI(t.messages)),
})

const isAnthropicMessages = (messages: ReadonlyArray<unknown>): boolean =>
  messages.some(
    (m) =>
      isRecord(m) &&
      Array.isArray(m.content) &&
      m.content.some((b) => isRecord(b) && (b.type === "tool_use" || b.type === "tool_result" || b.type === "thinking")),
  )

const isResponsesItems = (items: ReadonlyArray<unknown>): boolean =>
  items.some((i) => isRecord(i) && typeof i.type === "string" && i.type !== "message") ||
  items.every((i) => isRecord(i) && i.type === "message")

const anthropicSystem = (system: unknown): Array<Conversation.SystemSection> =>
  typeof system === "string"
    ? Normalize.system(system)
    : Array.isArray(system)
      ? system.filter(isRecord).map((b, i) => ({ id: `system-${i}`, text: str(b.text), cache: "5m" as const }))
      : []

const anthropicSession = (id: string, raw: Raw | ReadonlyArray<unknown>): Session => {
  const messages = (Array.isArray(raw) ? raw : (raw as Raw).messages) as ReadonlyArray<Anthropic.Message>
  const tools = Array.isArray(raw) ? [] : ((raw as Raw).tools as ReadonlyArray<Anthropic.Tool> | undefined)
  const neutral = Normalize.fromAnthropic(messages)
  return {
    id,
    source: "anthropic",
    system: Array.isArray(raw) ? [] : anthropicSystem((raw as Raw).system),
    tools: Normalize.tools("anthropic", tools ?? []),
    turns: splitTurns(neutral).map((t) => t.messages),
  }
}

const responsesSession = (id: string, raw: Raw | ReadonlyArray<unknown>): Session => {
  const items = (Array.isArray(raw) ? raw : (raw as Raw).input) as ReadonlyArray<OpenAIResponses.Item>
  const instructions = Array.isArray(raw) ? undefined : (raw as Raw).instructions
  const tools = Array.isArray(raw) ? [] : (((raw as Raw).tools as ReadonlyArray<OpenAIResponses.Tool> | undefined) ?? [])
  const neutral = Normalize.fromResponses(items)
  // a leading system / developer item is the system prompt
  const first = neutral[0]
  const leading = first?.role === "system" ? first.parts.flatMap((p) => (p.type === "text" ? [p.text] : [])).join("\n") : ""
  const system = [typeof instructions === "string" ? instructions : "", leading].filter((s) => s !== "").join("\n\n")
  return {
    id,
    source: "openai-responses",
    system: Normalize.system(system),
    tools: Normalize.tools("openai-responses", tools),
    turns: splitTurns(leading === "" ? neutral : neutral.slice(1)).map((t) => t.messages),
  }
}

const chatConversation = (id: string, raw: Raw | ReadonlyArray<unknown>): Session => {
  const messages = (Array.isArray(raw) ? raw : (raw as Raw).messages) as ReadonlyArray<unknown>
  const tools = Array.isArray(raw) ? undefined : ((raw as Raw).tools as ReadonlyArray<OpenAI.Tool> | undefined)
  return fromChat(chatSession(id, chatMessages(messages), tools), "openai-chat")
}

/** One conversation (an array of messages or items, or an object holding them), or undefined if it is none. */
const conversation = (id: string, value: unknown): Session | undefined => {
  if (Array.isArray(value)) {
    if (value.length === 0 || !value.every(isRecord)) return undefined
    if (value.every((m) => typeof (m as Raw).role === "string") && isAnthropicMessages(value)) return anthropicSession(id, value)
    if (value.every((m) => typeof (m as Raw).role === "string" && (m as Raw).type === undefined)) return chatConversation(id, value)
    if (isResponsesItems(value)) return responsesSession(id, value)
    return undefined
  }
  if (!isRecord(value)) return undefined
  if (Array.isArray(value.input)) return responsesSession(id, value)
  if (!Array.isArray(value.messages)) return undefined
  const tools = Array.isArray(value.tools) ? value.tools : []
  const anthropic =
    value.system !== undefined || isAnthropicMessages(value.messages) || tools.some((t) => isRecord(t) && t.input_schema !== undefined)
  return anthropic ? anthropicSession(id, value) : chatConversation(id, value)
}

/** What {@link parse} found: sessions, or why the text is not a recognised log. */
export type Parsed =
  { readonly _tag: "Sessions"; readonly sessions: ReadonlyArray<Session> } | { readonly _tag: "Unrecognised"; readonly reason: string }

const unrecognised = (reason: string): Parsed => ({ _tag: "Unrecognised", reason })

/**
 * The sessions in one file's text. `name`: the file's base name without
 * extension (session ids derive from it); `jsonl`: one conversation per
 * line; `tauTools`: the tools of tau-bench results (default none).
 */
export const parse = (
  name: string,
  text: string,
  options: { readonly jsonl?: boolean; readonly tauTools?: ReadonlyArray<OpenAI.Tool> } = {},
): Parsed => {
  if (options.jsonl === true) {
    const sessions: Array<Session> = []
    const lines = text.split("\n")
    for (const [i, line] of lines.entries()) {
      if (line.trim() === "") continue
      let value: unknown
      try {
        value = JSON.parse(line)
      } catch (e) {
        return unrecognised(`line ${i + 1} is not JSON (${(e as Error).message})`)
      }
      const session = conversation(`${name}-${i + 1}`, value)
      if (session === undefined) return unrecognised(`line ${i + 1} is not a conversation (a message array or {messages} / {input})`)
      sessions.push(session)
    }
    return { _tag: "Sessions", sessions }
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (e) {
    return unrecognised(`not JSON (${(e as Error).message})`)
  }
  if (isRecord(value) && Array.isArray(value.history)) return { _tag: "Sessions", sessions: [fromChat(sweAgent(name, value), "swe-agent")] }
  if (Array.isArray(value) && value.length > 0 && value.every((e) => isRecord(e) && Array.isArray(e.traj))) {
    return { _tag: "Sessions", sessions: tauBench(value, options.tauTools ?? [], name).map((s) => fromChat(s, "tau-bench")) }
  }
  // an array of conversations
  if (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((c) => Array.isArray(c) || (isRecord(c) && (Array.isArray(c.messages) || Array.isArray(c.input))))
  ) {
    const sessions = value.map((c, i) => conversation(`${name}-${i + 1}`, c))
    if (sessions.every((s) => s !== undefined)) return { _tag: "Sessions", sessions }
  }
  const one = conversation(name, value)
  return one === undefined
    ? unrecognised(
        "not a recognised log (SWE-agent .traj, tau-bench results, OpenAI Chat messages, Anthropic Messages, OpenAI Responses items)",
      )
    : { _tag: "Sessions", sessions: [one] }
}
