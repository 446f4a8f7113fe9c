/**
 * Test helpers: message builders and independent checkers of the rendered
 * bodies (pairing, role alternation, cache breakpoints).
 */
import { type Conversation, OpenAIResponses } from "@ctxd/contracts"
import type * as CachePlanner from "../src/CachePlanner.ts"
import * as Pipeline from "../src/Pipeline.ts"
import * as Models from "../src/Models.ts"

export const text = (t: string): Conversation.TextPart => ({ type: "text", text: t })
export const user = (t: string): Conversation.Message => ({ role: "user", parts: [text(t)] })
export const assistant = (t: string): Conversation.Message => ({ role: "assistant", parts: [text(t)] })
export const sys = (t: string): Conversation.Message => ({ role: "system", parts: [text(t)] })
export const call = (id: string, name = "lookup", input: unknown = { q: id }): Conversation.ToolCallPart => ({
  type: "tool_call",
  id,
  name,
  input,
})
export const calls = (...ids: Array<string>): Conversation.Message => ({ role: "assistant", parts: ids.map((id) => call(id)) })
export const result = (callId: string, t = `result of ${callId}`, isError = false): Conversation.ToolResultPart => ({
  type: "tool_result",
  callId,
  content: [text(t)],
  isError,
})
export const results = (...ids: Array<string>): Conversation.Message => ({ role: "tool", parts: ids.map((id) => result(id)) })

/** Wraps messages as stored rows (seq from 1, `tokens` each). */
export const stored = (
  messages: ReadonlyArray<Conversation.Message>,
  tokens: number | ((i: number) => number) = 10,
): Array<Pipeline.StoredMessage> =>
  messages.map((message, i) => ({ seq: i + 1, message, tokens: typeof tokens === "number" ? tokens : tokens(i) }))

export const claude = Models.resolve({ provider: "anthropic", name: "claude-sonnet-4-5" })
export const gpt = Models.resolve({ provider: "openai", name: "gpt-4o" })

/** A definition of every tool `messages` call (an agent sends the tools it uses; Anthropic refuses tool blocks without any). */
export const toolsCalledIn = (messages: ReadonlyArray<Conversation.Message>): Array<Conversation.Tool> =>
  [...new Set(messages.flatMap((m) => m.parts.flatMap((p) => (p.type === "tool_call" ? [p.name] : []))))]
    .sort()
    .map((name) => ({ name, inputSchema: { type: "object" } }))

/** A complete assemble input with defaults for everything but the history (tools: those the history calls). */
export const input = (history: ReadonlyArray<Pipeline.StoredMessage>, over: Partial<Pipeline.Input> = {}): Pipeline.Input => ({
  tenant: "acme",
  session: "s1",
  format: "anthropic",
  model: over.format === "openai" || over.format === "openai-responses" ? gpt : claude,
  system: [{ id: "system", text: "You are helpful.", cache: "5m" }],
  systemTokens: 5,
  tools: toolsCalledIn(history.map((m) => m.message)),
  toolsTokens: 0,
  history,
  options: Pipeline.resolveOptions(undefined),
  counter: { backend: "test", encoding: "o200k_base", exact: false, calibration: 1 },
  ...over,
})

type Json = Record<string, unknown>
const blocks = (m: Json): Array<Json> => (typeof m["content"] === "string" ? [] : (m["content"] as Array<Json>))

/**
 * Pairing problems of an Anthropic body: every `tool_result` must answer a
 * `tool_use` of the assistant message right before, results come first in
 * their user message, every `tool_use` is answered in the next message, and
 * tool use ids are unique.
 */
export const anthropicPairingProblems = (body: Json): Array<string> => {
  const problems: Array<string> = []
  const messages = body["messages"] as Array<Json>
  const seen = new Set<string>()
  messages.forEach((m, i) => {
    const bs = blocks(m)
    const uses = bs.filter((b) => b["type"] === "tool_use").map((b) => b["id"] as string)
    const answers = bs.filter((b) => b["type"] === "tool_result").map((b) => b["tool_use_id"] as string)
    for (const id of uses) {
      if (seen.has(id)) problems.push(`messages[${i}]: duplicate tool_use ${id}`)
      seen.add(id)
      const next = messages[i + 1]
      const answered = next === undefined ? [] : blocks(next).filter((b) => b["type"] === "tool_result")
      if (!answered.some((b) => b["tool_use_id"] === id)) problems.push(`messages[${i}]: tool_use ${id} unanswered`)
    }
    if (answers.length > 0) {
      if (m["role"] !== "user") problems.push(`messages[${i}]: tool_result in ${String(m["role"])} message`)
      const prev = messages[i - 1]
      const prevUses =
        prev === undefined
          ? []
          : blocks(prev)
              .filter((b) => b["type"] === "tool_use")
              .map((b) => b["id"])
      for (const id of answers) if (!prevUses.includes(id)) problems.push(`messages[${i}]: tool_result ${id} without tool_use`)
      if (new Set(answers).size !== answers.length) problems.push(`messages[${i}]: duplicate tool_result`)
      const firstOther = bs.findIndex((b) => b["type"] !== "tool_result")
      if (firstOther !== -1 && firstOther < answers.length) problems.push(`messages[${i}]: tool_result after other content`)
    }
  })
  return problems
}

/**
 * Pairing problems of an OpenAI body: an assistant message with `tool_calls`
 * must be followed directly by one `tool` message per call (any order), and
 * every `tool` message must belong to such a run. OpenAI pairs by position,
 * so an id may recur in a later run (real sessions do this).
 */
export const openaiPairingProblems = (body: Json): Array<string> => {
  const problems: Array<string> = []
  const messages = body["messages"] as Array<Json>
  let i = 0
  while (i < messages.length) {
    const m = messages[i]!
    if (m["role"] === "tool") {
      problems.push(`messages[${i}]: tool message without a preceding tool call`)
      i++
      continue
    }
    const toolCalls = (m["tool_calls"] as Array<Json> | undefined) ?? []
    i++
    if (m["role"] !== "assistant" || toolCalls.length === 0) continue
    const pending = new Set<string>()
    for (const c of toolCalls) {
      const id = c["id"] as string
      if (pending.has(id)) problems.push(`duplicate tool call ${id} in one message`)
      pending.add(id)
    }
    while (i < messages.length && messages[i]!["role"] === "tool") {
      const id = messages[i]!["tool_call_id"] as string
      if (!pending.delete(id)) problems.push(`messages[${i}]: tool result ${id} does not answer the calls before it`)
      i++
    }
    for (const id of pending) problems.push(`tool call ${id} unanswered`)
  }
  return problems
}

/** Problems with roles and cache marks of an Anthropic body. */
export const anthropicShapeProblems = (body: Json, breakpoints: number): Array<string> => {
  const problems: Array<string> = []
  const messages = body["messages"] as Array<Json>
  if (messages.length === 0) problems.push("no messages")
  if (messages[0]?.["role"] !== "user") problems.push("first message is not user")
  for (let i = 1; i < messages.length; i++) {
    if (messages[i]!["role"] === messages[i - 1]!["role"]) problems.push(`messages[${i}]: same role twice`)
  }
  const marks: Array<string> = []
  const collect = (b: Json) => {
    const cc = b["cache_control"] as Json | undefined
    if (cc !== undefined) marks.push((cc["ttl"] as string | undefined) ?? "5m")
  }
  for (const t of (body["tools"] as Array<Json> | undefined) ?? []) collect(t)
  for (const s of (body["system"] as Array<Json> | undefined) ?? []) collect(s)
  for (const m of messages) {
    const bs = blocks(m)
    if (bs.length === 0) problems.push("message without content")
    for (const b of bs) {
      collect(b)
      if (b["type"] === "text" && String(b["text"]).trim() === "") problems.push("blank text block")
    }
  }
  for (const s of (body["system"] as Array<Json> | undefined) ?? []) {
    if (String(s["text"]).trim() === "") problems.push("blank system block")
  }
  if (marks.length > 4) problems.push(`${marks.length} breakpoints`)
  if (marks.length !== breakpoints) problems.push(`reported ${breakpoints} breakpoints, found ${marks.length}`)
  const firstFive = marks.indexOf("5m")
  if (firstFive !== -1 && marks.slice(firstFive).includes("1h")) problems.push(`TTL order ${marks.join(",")}`)
  return problems
}

/**
 * Pairing problems of an OpenAI Responses body: every `function_call_output`
 * answers an earlier, still open `function_call` with its `call_id`; every
 * call is answered before the next `message` item (and at all); reasoning
 * items sit right before a `function_call`, a `message`, a hosted tool's
 * call item or another reasoning item of the assistant turn they belong to.
 */
const hostedCalls: ReadonlySet<string> = new Set(OpenAIResponses.HOSTED_CALL_TYPES)

export const responsesPairingProblems = (body: Json): Array<string> => {
  const problems: Array<string> = []
  const items = body["input"] as Array<Json>
  const open = new Set<string>()
  items.forEach((item, i) => {
    const type = item["type"]
    if (type === "function_call" || type === "custom_tool_call") {
      const id = item["call_id"] as string
      if (open.has(id)) problems.push(`input[${i}]: duplicate open call ${id}`)
      open.add(id)
    } else if (type === "function_call_output" || type === "custom_tool_call_output") {
      const id = item["call_id"] as string
      if (!open.delete(id)) problems.push(`input[${i}]: output ${id} without an open call`)
    } else if (type === "reasoning") {
      const next = items[i + 1]
      const ok =
        next !== undefined &&
        (next["type"] === "function_call" ||
          next["type"] === "custom_tool_call" ||
          next["type"] === "reasoning" ||
          hostedCalls.has(String(next["type"])) ||
          (next["type"] === "message" && next["role"] === "assistant"))
      if (!ok) problems.push(`input[${i}]: reasoning not followed by its assistant output`)
    } else if (!hostedCalls.has(String(type))) {
      for (const id of open) problems.push(`input[${i}]: call ${id} unanswered before a message`)
      open.clear()
    }
  })
  for (const id of open) problems.push(`call ${id} unanswered`)
  return problems
}

/**
 * Gemini's rules over a rendered body's `contents`: roles `user`/`model`
 * alternating (consecutive ones merged), no empty parts, every content with
 * function calls followed by a `user` content with exactly as many function
 * responses of the same names, every function response right after its
 * call turn; no made-up id (`gc_…`) sent.
 */
export const geminiPairingProblems = (body: Json): Array<string> => {
  const problems: Array<string> = []
  const contents = body["contents"] as Array<{ role: string; parts: Array<Json> }>
  const names = (parts: ReadonlyArray<Json>, key: string): Array<string> =>
    parts.flatMap((p) => (p[key] !== undefined ? [String((p[key] as Json)["name"])] : [])).sort()
  contents.forEach((c, i) => {
    if (c.role !== "user" && c.role !== "model") problems.push(`contents[${i}]: role ${c.role}`)
    if (i > 0 && contents[i - 1]!.role === c.role) problems.push(`contents[${i}]: same role as the content before`)
    if (c.parts.length === 0) problems.push(`contents[${i}]: no parts`)
    const calls = names(c.parts, "functionCall")
    const responses = names(c.parts, "functionResponse")
    if (calls.length > 0) {
      const next = contents[i + 1]
      const answered = next === undefined ? [] : names(next.parts, "functionResponse")
      if (next !== undefined && JSON.stringify(answered) !== JSON.stringify(calls)) {
        problems.push(`contents[${i}]: calls ${calls.join(",")} answered by ${answered.join(",")}`)
      }
    }
    if (responses.length > 0) {
      const previous = i > 0 ? names(contents[i - 1]!.parts, "functionCall") : []
      if (JSON.stringify(previous) !== JSON.stringify(responses))
        problems.push(`contents[${i}]: responses ${responses.join(",")} after calls ${previous.join(",")}`)
    }
  })
  if (/"id":"gc_/.test(JSON.stringify(contents))) problems.push("a made-up call id was sent")
  return problems
}

/** A planner candidate: 1,000 tokens of system and tools, then messages of 100, 1,000 and 100 tokens. */
export const candidate = (over: Partial<CachePlanner.Candidate> = {}): CachePlanner.Candidate => ({
  windowStart: 0,
  maskBoundary: 0,
  sent: [
    { index: 0, masked: false, tokens: 100 },
    { index: 1, masked: false, tokens: 1_000 },
    { index: 2, masked: false, tokens: 100 },
  ],
  systemKey: "s",
  toolsKey: "t",
  systemTokens: 500,
  toolsTokens: 500,
  total: 2_200,
  overBudget: false,
  ...over,
})
