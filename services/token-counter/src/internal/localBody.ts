/**
 * Local estimate of a whole provider request body (Anthropic Messages,
 * OpenAI Chat Completions, OpenAI Responses: `instructions` and `input`
 * items, or Gemini: `contents`, with `systemInstruction` and `tools` in
 * `config` as `@google/genai` takes them or at the top level as REST does), for `ctx.v1.tokens.count` when no exact count
 * is possible. The body is walked structurally, never rejected: every text
 * is counted with the local counter (cached per segment), with the same
 * framing constants as `LocalCounter.overhead` (message, tool call, tool
 * result, image, system, tool definitions). A provider compaction (an
 * Anthropic `compaction` block, a Responses `compaction` item) starts the
 * count: the provider drops what precedes it; an Anthropic one counts as its
 * readable summary, a Responses one (encrypted) as its JSON, an upper bound.
 */
import { type ModelProvider, Providers } from "@ctxd/context"
import { type Encoding, LocalCounter } from "@ctxd/tokens"

const { overhead } = LocalCounter

type Counter = LocalCounter.LocalCounterService

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
const list = (u: unknown): ReadonlyArray<unknown> => (Array.isArray(u) ? u : [])
const json = (u: unknown): string => JSON.stringify(u) ?? ""

const text = (counter: Counter, value: unknown, encoding: Encoding.Encoding): number =>
  typeof value === "string" ? counter.countText(value, encoding) : 0

/** One content block or part of either provider. */
const block = (counter: Counter, b: unknown, encoding: Encoding.Encoding): number => {
  if (typeof b === "string") return counter.countText(b, encoding)
  if (!isRecord(b)) return 0
  switch (b["type"]) {
    case "text":
    case "input_text":
    case "output_text":
      return text(counter, b["text"], encoding)
    case "input_image":
      return b["detail"] === "low" ? overhead.imageLow : overhead.image
    case "image":
    case "image_url":
      return isRecord(b["image_url"]) && b["image_url"]["detail"] === "low" ? overhead.imageLow : overhead.image
    case "tool_use":
      return overhead.toolCall + text(counter, b["name"], encoding) + counter.countText(json(b["input"] ?? {}), encoding)
    case "tool_result": {
      const content = b["content"]
      const inner =
        typeof content === "string"
          ? counter.countText(content, encoding)
          : list(content).reduce<number>((n, c) => n + block(counter, c, encoding), 0)
      return overhead.toolResult + inner
    }
    case "thinking":
      return text(counter, b["thinking"], encoding)
    case "compaction":
      return text(counter, b["content"], encoding)
    default: {
      const { cache_control: _drop, ...rest } = b
      return counter.countText(json(rest), encoding)
    }
  }
}

const content = (counter: Counter, c: unknown, encoding: Encoding.Encoding): number =>
  typeof c === "string" ? counter.countText(c, encoding) : list(c).reduce<number>((n, b) => n + block(counter, b, encoding), 0)

const tools = (counter: Counter, defs: ReadonlyArray<unknown>, encoding: Encoding.Encoding): number => {
  if (defs.length === 0) return 0
  let n = overhead.tools
  for (const def of defs) {
    if (!isRecord(def)) continue
    // OpenAI nests the definition under `function`; Anthropic's is flat
    const fn = isRecord(def["function"]) ? def["function"] : def
    const schema = fn["input_schema"] ?? fn["parameters"]
    n += overhead.tool + counter.countText(json({ name: fn["name"], description: fn["description"], input_schema: schema }), encoding)
  }
  return n
}

/** One OpenAI Responses input item. */
const item = (counter: Counter, it: unknown, encoding: Encoding.Encoding): number => {
  if (!isRecord(it)) return 0
  switch (it["type"] ?? "message") {
    case "message":
      return overhead.message + content(counter, it["content"], encoding)
    case "function_call":
      return overhead.toolCall + text(counter, it["name"], encoding) + text(counter, it["arguments"], encoding)
    case "function_call_output":
      return overhead.toolResult + content(counter, it["output"], encoding)
    case "reasoning":
      // the encrypted reasoning is opaque here: its summary stands for it
      return overhead.message + list(it["summary"]).reduce<number>((n, s) => n + (isRecord(s) ? text(counter, s["text"], encoding) : 0), 0)
    default:
      return overhead.message + counter.countText(json(it), encoding)
  }
}

/** The index of the latest element of `list` for which `has` holds, or 0. */
const latest = (items: ReadonlyArray<unknown>, has: (u: unknown) => boolean): number => {
  for (let i = items.length - 1; i >= 0; i--) if (has(items[i])) return i
  return 0
}
const isCompaction = (u: unknown): boolean => isRecord(u) && u["type"] === "compaction"

/** `messages` from the latest one holding a compaction block, that one's content from the block on. */
const fromCompaction = (messages: ReadonlyArray<unknown>): ReadonlyArray<unknown> => {
  const at = latest(messages, (m) => isRecord(m) && list(m["content"]).some(isCompaction))
  const first = messages[at]
  if (!isRecord(first) || !list(first["content"]).some(isCompaction)) return messages
  const blocks = list(first["content"])
  return [{ ...first, content: blocks.slice(latest(blocks, isCompaction)) }, ...messages.slice(at + 1)]
}

/** One Gemini part: text, a function call or response, an image; anything else as its JSON. */
const geminiPart = (counter: Counter, p: unknown, encoding: Encoding.Encoding): number => {
  if (!isRecord(p)) return 0
  if (typeof p["text"] === "string") return counter.countText(p["text"], encoding)
  const call = p["functionCall"]
  if (isRecord(call))
    return overhead.toolCall + text(counter, call["name"], encoding) + counter.countText(json(call["args"] ?? {}), encoding)
  const response = p["functionResponse"]
  if (isRecord(response))
    return overhead.toolResult + text(counter, response["name"], encoding) + counter.countText(json(response["response"] ?? {}), encoding)
  if (isRecord(p["inlineData"]) || isRecord(p["fileData"])) return overhead.image
  const { thoughtSignature: _signature, ...rest } = p
  return counter.countText(json(rest), encoding)
}

/** A Gemini body (SDK or REST shape): system instruction, tool declarations, contents. */
const gemini = (counter: Counter, body: Readonly<Record<string, unknown>>, encoding: Encoding.Encoding): number => {
  const config = isRecord(body["config"]) ? body["config"] : body
  let n = 0
  const declarations = list(config["tools"]).flatMap((t) => (isRecord(t) ? list(t["functionDeclarations"]) : []))
  if (declarations.length > 0) {
    n += overhead.tools
    for (const d of declarations) {
      if (!isRecord(d)) continue
      const schema = d["parametersJsonSchema"] ?? d["parameters"]
      n += overhead.tool + counter.countText(json({ name: d["name"], description: d["description"], input_schema: schema }), encoding)
    }
  }
  const system = config["systemInstruction"]
  const sections = typeof system === "string" ? [{ text: system }] : isRecord(system) ? list(system["parts"]) : []
  if (sections.length > 0) {
    n += overhead.system + overhead.systemSection * (sections.length - 1)
    n += sections.reduce<number>((sum, p) => sum + geminiPart(counter, p, encoding), 0)
  }
  for (const c of list(body["contents"])) {
    if (!isRecord(c)) continue
    n += overhead.message + list(c["parts"]).reduce<number>((sum, p) => sum + geminiPart(counter, p, encoding), 0)
  }
  return n
}

/**
 * Local tokens of `body` in the layout of `provider`'s bodies
 * ({@link ModelProvider.LocalBody}: Gemini `contents` for Google, or any body
 * that has them; Chat Completions' message fields for OpenAI).
 */
export const count = (
  counter: Counter,
  provider: "anthropic" | "openai" | "google",
  body: Readonly<Record<string, unknown>>,
  encoding: Encoding.Encoding,
): number => {
  const layout: ModelProvider.LocalBody = Providers.ofProvider(provider).localBody
  if (layout.contents || Array.isArray(body["contents"])) return gemini(counter, body, encoding)
  let n = tools(counter, list(body["tools"]), encoding)
  const system = body["system"]
  const sections = typeof system === "string" ? (system === "" ? [] : [system]) : list(system)
  if (sections.length > 0) {
    n += overhead.system + overhead.systemSection * (sections.length - 1)
    n += sections.reduce<number>((sum, s) => sum + block(counter, s, encoding), 0)
  }
  if (typeof body["instructions"] === "string" && body["instructions"] !== "") {
    n += overhead.system + counter.countText(body["instructions"], encoding)
  }
  const input = body["input"]
  if (typeof input === "string") n += overhead.message + counter.countText(input, encoding)
  else {
    const items = list(input)
    for (const it of items.slice(latest(items, isCompaction))) n += item(counter, it, encoding)
  }
  for (const m of fromCompaction(list(body["messages"]))) {
    if (!isRecord(m)) continue
    n += overhead.message + content(counter, m["content"], encoding)
    if (typeof m["name"] === "string") n += overhead.name + counter.countText(m["name"], encoding)
    if (layout.chatFields) {
      for (const call of list(m["tool_calls"])) {
        const fn = isRecord(call) && isRecord(call["function"]) ? call["function"] : {}
        n += overhead.toolCall + text(counter, fn["name"], encoding) + text(counter, fn["arguments"], encoding)
      }
      if (m["role"] === "tool") n += overhead.toolResult
      if (typeof m["refusal"] === "string") n += counter.countText(m["refusal"], encoding)
    }
  }
  return n
}
