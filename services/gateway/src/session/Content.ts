/**
 * What session naming reads of a client's body, in each API's own shape:
 * the system text, the first user message's text, whether tools are
 * offered, how many conversation messages there are, and whether the call
 * asks for structured (JSON) output. The body is the client's, not yet
 * validated: anything of an unexpected shape reads as absent, never throws.
 */
import type { Api } from "../Port.ts"

/** What naming needs of one body. */
export interface Shape {
  /** The system prompt's text (the API's system field and system/developer messages before the first user one). */
  readonly system: string
  /** The first user message's text ("" when none). */
  readonly firstUser: string
  /** Tools offered (function or any other type). */
  readonly tools: boolean
  /** Conversation messages (user, assistant, tool), system ones not counted. */
  readonly messages: number
  /** The call asks for a JSON answer (a response schema or JSON mode). */
  readonly structured: boolean
}

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)
const arrayOf = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

/** The text of a content value: a string, or the `text` of its parts/blocks (any part type that carries one), joined by a newline. */
const textOf = (content: unknown): string => {
  if (typeof content === "string") return content
  return arrayOf(content)
    .flatMap((part) => (isObject(part) && typeof part["text"] === "string" ? [part["text"]] : typeof part === "string" ? [part] : []))
    .join("\n")
}

const nonEmptyArray = (value: unknown): boolean => Array.isArray(value) && value.length > 0

const anthropic = (body: Json): Shape => {
  const messages = arrayOf(body["messages"]).filter(isObject)
  const first = messages.find((m) => m["role"] === "user")
  const format = isObject(body["output_config"]) ? body["output_config"]["format"] : body["output_format"]
  return {
    system: textOf(body["system"]),
    firstUser: first === undefined ? "" : textOf(first["content"]),
    tools: nonEmptyArray(body["tools"]),
    messages: messages.length,
    structured: isObject(format) && format["type"] === "json_schema",
  }
}

const SYSTEM_ROLES = new Set(["system", "developer"])

const openaiChat = (body: Json): Shape => {
  const messages = arrayOf(body["messages"]).filter(isObject)
  const firstUserAt = messages.findIndex((m) => m["role"] === "user")
  const head = firstUserAt < 0 ? messages : messages.slice(0, firstUserAt)
  const format = body["response_format"]
  return {
    system: head
      .filter((m) => SYSTEM_ROLES.has(String(m["role"])))
      .map((m) => textOf(m["content"]))
      .join("\n\n"),
    firstUser: firstUserAt < 0 ? "" : textOf(messages[firstUserAt]!["content"]),
    tools: nonEmptyArray(body["tools"]) || nonEmptyArray(body["functions"]),
    messages: messages.filter((m) => !SYSTEM_ROLES.has(String(m["role"]))).length,
    structured: isObject(format) && (format["type"] === "json_schema" || format["type"] === "json_object"),
  }
}

const openaiResponses = (body: Json): Shape => {
  const input = body["input"]
  const items = typeof input === "string" ? [{ role: "user", content: input }] : arrayOf(input).filter(isObject)
  // an item without a type is a message (EasyInputMessage); typed ones are messages only as `message`
  const isMessage = (item: Json) => item["type"] === undefined || item["type"] === "message"
  const firstUserAt = items.findIndex((i) => isMessage(i) && i["role"] === "user")
  const head = firstUserAt < 0 ? items : items.slice(0, firstUserAt)
  const system = [
    typeof body["instructions"] === "string" ? body["instructions"] : "",
    ...head.filter((i) => isMessage(i) && SYSTEM_ROLES.has(String(i["role"]))).map((i) => textOf(i["content"])),
  ].filter((text) => text.length > 0)
  const text = isObject(body["text"]) ? body["text"]["format"] : undefined
  return {
    system: system.join("\n\n"),
    firstUser: firstUserAt < 0 ? "" : textOf(items[firstUserAt]!["content"]),
    tools: nonEmptyArray(body["tools"]),
    messages: items.filter((i) => !(isMessage(i) && SYSTEM_ROLES.has(String(i["role"])))).length,
    structured: isObject(text) && (text["type"] === "json_schema" || text["type"] === "json_object"),
  }
}

const gemini = (body: Json): Shape => {
  const contents = arrayOf(body["contents"]).filter(isObject)
  const first = contents.find((c) => c["role"] === "user" || c["role"] === undefined)
  const instruction = body["systemInstruction"] ?? body["system_instruction"]
  const config = isObject(body["generationConfig"])
    ? body["generationConfig"]
    : isObject(body["generation_config"])
      ? body["generation_config"]
      : {}
  return {
    system: typeof instruction === "string" ? instruction : isObject(instruction) ? textOf(instruction["parts"]) : "",
    firstUser: first === undefined ? "" : textOf(first["parts"]),
    tools: arrayOf(body["tools"]).some((t) => isObject(t) && Object.keys(t).length > 0),
    messages: contents.length,
    structured:
      config["responseSchema"] !== undefined ||
      config["responseJsonSchema"] !== undefined ||
      config["response_schema"] !== undefined ||
      config["responseMimeType"] === "application/json" ||
      config["response_mime_type"] === "application/json",
  }
}

const readers: Readonly<Record<Api, (body: Json) => Shape>> = {
  "anthropic-messages": anthropic,
  "openai-chat": openaiChat,
  "openai-responses": openaiResponses,
  gemini,
}

/** The {@link Shape} of a client's `body` sent to `api`. */
export const shapeOf = (api: Api, body: unknown): Shape => readers[api](isObject(body) ? body : {})
