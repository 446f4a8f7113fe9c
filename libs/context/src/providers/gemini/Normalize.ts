/**
 * Gemini `generateContent` input → the neutral model: contents (with their
 * source index; ids made up for calls without one and responses matched to
 * open calls), tools, and a whole turn request (`systemInstruction` one more
 * system section).
 */
import type { Conversation, Gemini, Turn } from "@ctxd/contracts"
import * as Common from "../Common.ts"

/** Options of {@link fromGeminiIndexed}. */
export interface GeminiOptions {
  /**
   * Mixed into the ids made up for calls without one (the turn id), so ids
   * of different requests differ. Default `""`.
   */
  readonly seed?: string | undefined
  /**
   * The session's open calls before these contents (steps below 0), read
   * only when a function response without id answers no call of these
   * contents ({@link openCalls}).
   */
  readonly open?: (() => ReadonlyArray<Common.OpenCall>) | undefined
}

/** 64-bit FNV-1a of `text`, as 16 hex digits. */
const fnv64 = (text: string): string => {
  let h = 0xcbf29ce484222325n
  for (let i = 0; i < text.length; i++) {
    h ^= BigInt(text.charCodeAt(i))
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn
  }
  return h.toString(16).padStart(16, "0")
}

/**
 * The id made up for a Gemini function call without one: `gc_` and a hash of
 * the seed (the turn id), the content's index and the part's index. Valid as
 * an Anthropic `tool_use` id and an OpenAI call id.
 */
export const geminiCallId = (seed: string, sourceIndex: number, partIndex: number): string =>
  `gc_${fnv64(`${seed}\u0000${sourceIndex}\u0000${partIndex}`)}`

const onlyKeys = (value: Record<string, unknown>, allowed: ReadonlyArray<string>): boolean =>
  Object.keys(value).every((k) => allowed.includes(k) && value[k] !== undefined)

/** A JSON text that is an object, written as `JSON.stringify` writes it (so it parses back to the same text). */
const canonicalObject = (text: string): Record<string, unknown> | undefined => {
  if (!text.startsWith("{")) return undefined
  try {
    const parsed: unknown = JSON.parse(text)
    return Common.isRecord(parsed) && JSON.stringify(parsed) === text ? parsed : undefined
  } catch {
    return undefined
  }
}

/**
 * A function response's content: `{output: "<text>"}` becomes that text,
 * `{error: "<text>"}` that text as an error, any other object its JSON text
 * (also an `output` text that is itself a JSON object's text, so the renderer
 * gives back the same object). Images in `parts` (`inlineData`) become images.
 */
const geminiResult = (fr: Gemini.FunctionResponse, callId: string): Conversation.ToolResultPart => {
  const response = fr.response
  const keys = Object.keys(response)
  const only = keys.length === 1 ? keys[0]! : undefined
  const value = only === undefined ? undefined : response[only]
  let isError = false
  let text: string
  if (only === "output" && typeof value === "string" && canonicalObject(value) === undefined) text = value
  else if (only === "error" && typeof value === "string") {
    isError = true
    text = value
  } else text = JSON.stringify(response)
  const content: Array<Conversation.ToolResultContent> = [{ type: "text", text }]
  const parts = fr["parts"]
  if (Array.isArray(parts)) {
    for (const p of parts) {
      const blob = Common.isRecord(p) ? p["inlineData"] : undefined
      if (Common.isRecord(blob) && typeof blob["mimeType"] === "string" && typeof blob["data"] === "string") {
        content.push({ type: "image", source: { kind: "base64", mediaType: blob["mimeType"], data: blob["data"] } })
      }
    }
  }
  return { type: "tool_result", callId, content, isError }
}

/**
 * A Gemini part that is neither a function call nor a function response: a
 * plain `text` (with its signature), an image `inlineData`, or, for anything
 * else (thoughts, `fileData`, code execution, signed media, extra fields), an
 * opaque `gemini` part kept verbatim.
 */
const geminiPart = (part: Gemini.Part): Conversation.Part => {
  const p = part as Record<string, unknown>
  const signature = part.thoughtSignature
  if (typeof part.text === "string" && onlyKeys(p, ["text", "thoughtSignature"]) && part.text !== "") {
    return signature === undefined ? { type: "text", text: part.text } : { type: "text", text: part.text, signature }
  }
  // an unsigned empty text is nothing (Gemini refuses it): an empty text part, which no renderer sends
  if (part.text === "" && onlyKeys(p, ["text"])) return { type: "text", text: "" }
  const blob = part.inlineData
  if (blob !== undefined && onlyKeys(p, ["inlineData"]) && onlyKeys(blob, ["mimeType", "data"]) && blob.mimeType.startsWith("image/")) {
    return { type: "image", source: { kind: "base64", mediaType: blob.mimeType, data: blob.data } }
  }
  return Common.opaque("gemini", p)
}

/**
 * {@link fromGemini} with the source index of every neutral message (the
 * index of the content it came from).
 */
export const fromGeminiIndexed = (
  contents: ReadonlyArray<Gemini.Content>,
  options: GeminiOptions = {},
): Array<Common.NormalizedMessage> => {
  const seed = options.seed ?? ""
  const out: Array<Common.NormalizedMessage> = []
  // the calls of these contents not answered yet, oldest first; the session's own are read lazily
  const open: Array<Common.OpenCall> = []
  let session: Array<Common.OpenCall> | undefined
  const answer = (fr: Gemini.FunctionResponse): string => {
    if (fr.id !== undefined && fr.id !== "") {
      const at = open.findIndex((c) => c.id === fr.id)
      if (at >= 0) open.splice(at, 1)
      return fr.id
    }
    const pick = (calls: Array<Common.OpenCall>): string | undefined => {
      let best = -1
      for (let i = 0; i < calls.length; i++) {
        if (calls[i]!.name === fr.name && (best < 0 || calls[i]!.step > calls[best]!.step)) best = i
      }
      if (best < 0) return undefined
      return calls.splice(best, 1)[0]!.id
    }
    const local = pick(open)
    if (local !== undefined) return local
    session ??= [...(options.open?.() ?? [])]
    // unanswerable: the function's name stands as the id, so the pairing check names it
    return pick(session) ?? fr.name
  }
  contents.forEach((content, sourceIndex) => {
    if (content.role === "model") {
      const parts = content.parts.map((part, partIndex): Conversation.Part => {
        const call = part.functionCall
        // a call is always a call (fields of the part beside its signature are not kept): it must pair
        if (call === undefined) return geminiPart(part)
        const given = call.id !== undefined && call.id !== ""
        const id = given ? call.id! : geminiCallId(seed, sourceIndex, partIndex)
        open.push({ id, name: call.name, step: sourceIndex })
        return {
          type: "tool_call",
          id,
          name: call.name,
          input: call.args ?? {},
          ...(part.thoughtSignature === undefined ? {} : { signature: part.thoughtSignature }),
          ...(given ? {} : { generatedId: true }),
        }
      })
      out.push({ message: { role: "assistant", parts }, sourceIndex })
      return
    }
    const results: Array<Conversation.ToolResultPart> = []
    const rest: Array<Conversation.Part> = []
    for (const part of content.parts) {
      const fr = part.functionResponse
      if (fr !== undefined) results.push(geminiResult(fr, answer(fr)))
      else if (part.functionCall !== undefined) rest.push(Common.opaque("gemini", part as Record<string, unknown>))
      else rest.push(geminiPart(part))
    }
    if (results.length > 0) out.push({ message: { role: "tool", parts: results }, sourceIndex })
    if (rest.length > 0 || results.length === 0) out.push({ message: { role: "user", parts: rest }, sourceIndex })
  })
  return out
}

/**
 * Gemini contents → neutral messages. A `model` content becomes an
 * `assistant` message; a `user` content (or one without a role) a `tool`
 * message with its `functionResponse`s (in order) followed by a `user`
 * message with its other parts, if any.
 *
 * - `text` becomes a text part (its `thoughtSignature` kept as `signature`);
 *   an image `inlineData` an image; an unsigned empty text an empty text
 *   part (never rendered); thoughts (`thought: true`), empty signed texts, `fileData`, code execution and anything with extra fields become
 *   opaque `gemini` parts kept verbatim.
 * - `functionCall` becomes a `tool_call` (`input` its `args`, `{}` when
 *   absent; its `thoughtSignature` as `signature`; other fields of the call
 *   or its part are not kept). A call without `id` gets
 *   one made up ({@link geminiCallId}, `generatedId: true`): the Gemini
 *   renderer never sends it.
 * - `functionResponse` becomes a `tool_result`: with an `id`, for that call;
 *   without, for the open call of that name in the most recent content that
 *   has one (oldest first) — in these contents, else among the session's
 *   open calls (`options.open`); with none, the function's name stands as the
 *   id (and the pairing check reports it). `{output: text}` gives that text,
 *   `{error: text}` that text with `isError`, any other response object its
 *   JSON text.
 */
export const fromGemini = (contents: ReadonlyArray<Gemini.Content>, options: GeminiOptions = {}): Array<Conversation.Message> =>
  fromGeminiIndexed(contents, options).map((n) => n.message)

/**

/** The system instruction's text parts, joined by a blank line. */
const systemInstructionText = (value: Gemini.SystemInstruction | undefined): string => {
  if (value === undefined) return ""
  if (typeof value === "string") return value
  return value.parts.flatMap((p) => (typeof p.text === "string" && p.thought !== true ? [p.text] : [])).join("\n\n")
}

/**
 * Gemini tools → neutral tools: each function declaration one tool (the
 * schema from `parametersJsonSchema`, else `parameters`, remembered in
 * `extra.geminiSchema`; other declaration fields such as `response` or
 * `behavior` in `extra.gemini`); the other fields of a tool object (built-in
 * tools: `googleSearch`, `codeExecution`, ...) one hosted tool in
 * `extra.hosted`, named by its keys.
 */
export const tools = (defs: ReadonlyArray<Gemini.Tool> | undefined): Array<Conversation.Tool> =>
  (defs ?? []).flatMap((t): Array<Conversation.Tool> => {
    const { functionDeclarations, ...hosted } = t as Gemini.Tool & Record<string, unknown>
    const out: Array<Conversation.Tool> = (functionDeclarations ?? []).map((d): Conversation.Tool => {
      const { name, description, parameters, parametersJsonSchema, toolset, annotations, ...more } = d as Gemini.FunctionDeclaration &
        Record<string, unknown>
      const json = parametersJsonSchema !== undefined
      const extra: Record<string, unknown> = {
        geminiSchema: json ? "parametersJsonSchema" : parameters !== undefined ? "parameters" : "none",
      }
      if (Object.keys(more).length > 0) extra["gemini"] = more
      return {
        name,
        ...(description === undefined ? {} : { description }),
        inputSchema: json ? parametersJsonSchema : (parameters ?? { type: "object", properties: {} }),
        ...(toolset === undefined ? {} : { toolset }),
        ...Common.readOnlyOf(annotations),
        extra,
      }
    })
    const keys = Object.keys(hosted)
    if (keys.length > 0) out.push({ name: keys.join("+"), inputSchema: {}, extra: { hosted } })
    return out
  })

/** A whole Gemini turn request in neutral form; `openCalls`: the session's open calls, for responses without id. */
export const request = (
  req: Extract<Turn.TurnRequest, { readonly format: "gemini" }>,
  openCalls?: () => ReadonlyArray<Common.OpenCall>,
  workspace?: ReadonlyArray<Conversation.SystemSection>,
): Common.NormalizedRequest => {
  const text = systemInstructionText(req.systemInstruction)
  const instruction: Array<Conversation.SystemSection> = text === "" ? [] : [{ id: "systemInstruction", text, cache: "5m" }]
  return {
    messages: fromGeminiIndexed(req.contents, { seed: req.turnId, open: openCalls }),
    system: [...Common.system(req.system, workspace), ...instruction],
    tools: tools(req.tools),
  }
}
