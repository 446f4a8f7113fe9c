/**
 * A client's request body as a turn request, and a turn reply as the body
 * and headers the gateway sends upstream: the translation both ports share
 * (NATS and in-process), so the fleet and the one-command trial answer the
 * same request with the same body.
 *
 * A client sends its whole history on every call: the turn request carries
 * all of it with `history: "client"`, and the worker keeps only what is new
 * (matched by content; see `docs/gateway.md`).
 *
 * The reply's body holds only the keys ctxd owns (the prompt: system, tools,
 * history, and the cache keys it chose); the client's own settings stay the
 * client's: its output limit (ctxd's model default would change what the
 * caller asked for), its generation config, `stream`, `metadata`. Tools
 * ctxd does not model (Anthropic server tools, OpenAI custom tools) are
 * left out of the turn and appended after ctxd's, as the client sent them.
 */
import { RenderGemini } from "@ctxd/context"
import type { Turn } from "@ctxd/contracts"
import { createHash } from "node:crypto"
import type { Api, PromptReply, PromptRequest } from "./Port.ts"

type Json = Record<string, unknown>

/**
 * A client request ctxd cannot take whole (named in `message`): the ports
 * answer it with the client's own body, not a failure. A side request is
 * not declined: the session naming gave it a session of its own.
 */
export class Declined extends Error {
  readonly code: "unsupported"
  constructor(code: "unsupported", message: string) {
    super(message)
    this.code = code
  }
}

/** The wire format of each API. */
export const formatOf: Readonly<Record<Api, Turn.Format>> = {
  "anthropic-messages": "anthropic",
  "openai-chat": "openai",
  "openai-responses": "openai-responses",
  gemini: "gemini",
}

/** The provider of each API's models. */
export const providerOf: Readonly<Record<Api, Turn.Provider>> = {
  "anthropic-messages": "anthropic",
  "openai-chat": "openai",
  "openai-responses": "openai",
  gemini: "google",
}

/** The keys of the client's body that set how long the answer may be, per API. */
const outputLimit: Readonly<Record<Api, ReadonlyArray<string>>> = {
  "anthropic-messages": ["max_tokens"],
  "openai-chat": ["max_completion_tokens", "max_tokens"],
  "openai-responses": ["max_output_tokens"],
  gemini: [],
}

const isRecord = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)
const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

/** Without `cache_control`: ctxd places the breakpoints (at most 4; the client's added to them would be refused). */
const uncached = (value: unknown): unknown => {
  if (!isRecord(value) || !("cache_control" in value)) return value
  const { cache_control: _dropped, ...rest } = value
  return rest
}

const ttlOf = (block: Json): "1h" | "5m" => (isRecord(block.cache_control) && block.cache_control.ttl === "1h" ? "1h" : "5m")

/** The turn id of a client request: the same body again (a client's retry) is the same turn. */
export const turnIdOf = (request: PromptRequest): string =>
  `gw-${createHash("sha256")
    .update(JSON.stringify([request.api, request.key.tenant, request.key.session, request.model, request.body]))
    .digest("hex")
    .slice(0, 40)}`

/** The model the client named, without Gemini's `models/` prefix. */
const modelName = (request: PromptRequest): string => request.model.replace(/^models\//, "")

const maxOutput = (request: PromptRequest): number | undefined => {
  const value = outputLimit[request.api].map((key) => request.body[key]).find((v) => typeof v === "number")
  const gemini = isRecord(request.body.generationConfig) ? request.body.generationConfig.maxOutputTokens : undefined
  const n = value ?? gemini
  return typeof n === "number" && Number.isInteger(n) && n >= 1 && n <= 1_000_000 ? n : undefined
}

/** Splits tools into those ctxd models (custom or function tools) and the rest, kept as sent. */
const splitTools = (api: Api, tools: ReadonlyArray<unknown>): { readonly modeled: Array<unknown>; readonly kept: Array<unknown> } => {
  const modeled: Array<unknown> = []
  const kept: Array<unknown> = []
  for (const tool of tools) {
    const ok =
      isRecord(tool) &&
      (api === "anthropic-messages"
        ? (tool.type === undefined || tool.type === "custom") && isRecord(tool.input_schema)
        : api === "openai-chat"
          ? tool.type === "function"
          : true)
    if (!ok) kept.push(tool)
    else if (api === "anthropic-messages") {
      const { type: _type, ...rest } = uncached(tool) as Json
      modeled.push(rest)
    } else modeled.push(tool)
  }
  return { modeled, kept }
}

/** Anthropic `system`: a string, or text blocks (each a section of its own, its TTL kept). */
const anthropicSystem = (system: unknown): Turn.System | undefined => {
  if (typeof system === "string") return system
  const blocks = list(system).filter(isRecord)
  if (blocks.length === 0) return undefined
  return blocks.map((b, i) => ({ id: `system-${i}`, text: typeof b.text === "string" ? b.text : "", cache: ttlOf(b) }))
}

const anthropicMessages = (messages: ReadonlyArray<unknown>): Array<unknown> =>
  messages.map((m) => (isRecord(m) && Array.isArray(m.content) ? { ...m, content: m.content.map(uncached) } : m))

/** The leading system/developer messages of a chat as ctxd's `system`; the rest as its messages. */
const chatSplit = (messages: ReadonlyArray<unknown>): { readonly system: Turn.System | undefined; readonly rest: Array<unknown> } => {
  let n = 0
  while (n < messages.length && isRecord(messages[n]) && ["system", "developer"].includes((messages[n] as Json).role as string)) n++
  if (n === 0) return { system: undefined, rest: [...messages] }
  const text = (m: Json): string =>
    typeof m.content === "string"
      ? m.content
      : list(m.content)
          .map((p) => (isRecord(p) && typeof p.text === "string" ? p.text : ""))
          .join("\n")
  return {
    system: messages.slice(0, n).map((m, i) => ({ id: `system-${i}`, text: text(m as Json) })),
    rest: messages.slice(n),
  }
}

/**
 * The turn request for `request` (without `turnId`), or {@link Declined}.
 * `options` go as the turn's options (the gateway's agent, the tenant's).
 */
export const toTurn = (request: PromptRequest, options?: Turn.Options): DistributiveOmit<Turn.TurnRequest, "turnId"> & Json => {
  const body = request.body
  const model: Json = { provider: providerOf[request.api], name: modelName(request) }
  const max = maxOutput(request)
  if (max !== undefined) model.maxOutputTokens = max
  // the history in `clientHistory`: a worker of an earlier release refuses the turn (the gateway fails
  // open) instead of taking the whole history as new messages
  const common: Json = { format: formatOf[request.api], model, history: "client" }
  if (options !== undefined && Object.keys(options).length > 0) common.options = options
  const { modeled } = splitTools(request.api, list(body.tools))
  if (modeled.length > 0) common.tools = modeled
  switch (request.api) {
    case "anthropic-messages": {
      const system = anthropicSystem(body.system)
      return { ...common, ...(system === undefined ? {} : { system }), clientHistory: anthropicMessages(list(body.messages)) } as never
    }
    case "openai-chat": {
      const { system, rest } = chatSplit(list(body.messages))
      return { ...common, ...(system === undefined ? {} : { system }), clientHistory: rest } as never
    }
    case "openai-responses": {
      if (typeof body.previous_response_id === "string" || body.conversation !== undefined)
        throw new Declined("unsupported", "the history is held by the provider (previous_response_id or conversation)")
      const input = typeof body.input === "string" ? [{ type: "message", role: "user", content: body.input }] : list(body.input)
      return {
        ...common,
        ...(typeof body.instructions === "string" ? { instructions: body.instructions } : {}),
        clientHistory: input,
      } as never
    }
    case "gemini": {
      if (typeof body.cachedContent === "string") throw new Declined("unsupported", "the prefix is an explicit Gemini cachedContent")
      return {
        ...common,
        ...(body.systemInstruction === undefined ? {} : { systemInstruction: body.systemInstruction }),
        clientHistory: list(body.contents),
      } as never
    }
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

/** The keys of ctxd's body that are the client's to set (its output limit, its generation settings). */
const clientOwned: Readonly<Record<Api, ReadonlyArray<string>>> = {
  "anthropic-messages": ["model", "max_tokens", "stream"],
  "openai-chat": ["model", "max_completion_tokens", "max_tokens", "stream", "stream_options"],
  "openai-responses": ["model", "max_output_tokens", "stream"],
  gemini: ["model", "generationConfig"],
}

/**
 * The body ctxd would send for `request` (its keys only, to lay over the
 * client's) and the headers it needs, from the turn's `reply`.
 */
export const toReply = (request: PromptRequest, reply: Turn.TurnReply): PromptReply => {
  const rendered: Json = request.api === "gemini" ? RenderGemini.toRest(reply.request) : { ...reply.request }
  const body: Json = {}
  for (const [key, value] of Object.entries(rendered)) if (!clientOwned[request.api].includes(key)) body[key] = value
  // a binding the body asks for rides on the client's own thinking settings
  if (request.api === "anthropic-messages" && isRecord(body.thinking) && isRecord(request.body.thinking)) {
    const binding = body.thinking.block_binding
    body.thinking = { ...body.thinking, ...request.body.thinking, ...(binding === undefined ? {} : { block_binding: binding }) }
  }
  const { kept } = splitTools(request.api, list(request.body.tools))
  if (kept.length > 0) body.tools = [...list(body.tools), ...kept]
  const headers: Record<string, string> = {}
  const binding = reply.report.reasoning?.blockBinding
  if (request.api === "anthropic-messages" && binding !== undefined) headers["anthropic-beta"] = binding.betaHeader
  return { body, headers, turnId: reply.turnId, report: reply.report }
}
