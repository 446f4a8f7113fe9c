/**
 * Reads the provider's usage from a response on its way to the client,
 * without holding the response back: the relay writes each chunk to the
 * client and hands the same chunk to the tap, which decodes a copy
 * (`content-encoding` gzip, deflate, br or zstd, through `node:zlib`) and
 * parses it. Whatever goes wrong in the tap (a codec it does not know, a
 * broken stream, a body past its bound) only loses the usage, never the
 * response.
 *
 * Where each API puts the usage:
 * - Anthropic (https://docs.claude.com/en/docs/build-with-claude/streaming):
 *   `message_start.message.usage` (input and cache tokens), then
 *   `message_delta.usage`, cumulative: the last one is the total; JSON: `usage`.
 * - OpenAI Chat (https://platform.openai.com/docs/api-reference/chat/streaming):
 *   with `stream_options.include_usage` one last chunk before `[DONE]`
 *   carries `usage` (the others `usage: null`); JSON: `usage`.
 * - OpenAI Responses (https://platform.openai.com/docs/api-reference/responses-streaming):
 *   `response.completed` (or `response.incomplete` / `response.failed`)
 *   carries `response.usage`; JSON: `usage`.
 * - Gemini (https://ai.google.dev/api/generate-content#v1beta.GenerateContentResponse):
 *   every chunk of `streamGenerateContent` may carry `usageMetadata`, the
 *   last is the total; without `alt=sse` the stream is one JSON array.
 */
import { StringDecoder } from "node:string_decoder"
import * as Zlib from "node:zlib"
import type { Api } from "./Port.ts"

/** What the tap read: the provider's own usage object and the response id. */
export interface Read {
  readonly usage: Record<string, unknown>
  readonly responseId: string | undefined
}

export interface Tap {
  /** A chunk of the response as it was relayed (encoded). */
  readonly write: (chunk: Buffer) => void
  /** The response ended: the usage, when one was read. */
  readonly end: () => Promise<Read | undefined>
}

type Json = Record<string, unknown>

const isRecord = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

const decoderOf = (encoding: string): Zlib.Gunzip | Zlib.Inflate | Zlib.BrotliDecompress | Zlib.ZstdDecompress | "identity" | undefined => {
  switch (encoding) {
    case "":
    case "identity":
      return "identity"
    case "gzip":
    case "x-gzip":
      return Zlib.createGunzip()
    case "deflate":
      return Zlib.createInflate()
    case "br":
      return Zlib.createBrotliDecompress()
    case "zstd":
      return Zlib.createZstdDecompress()
    default:
      return undefined
  }
}

/** Folds one parsed event or JSON body of `api` into the usage read so far. */
export const fold = (api: Api, event: unknown, so: Read | undefined): Read | undefined => {
  if (!isRecord(event)) return so
  switch (api) {
    case "anthropic-messages": {
      const message = event["message"]
      if (event["type"] === "message_start" && isRecord(message) && isRecord(message["usage"])) {
        return { usage: { ...message["usage"] }, responseId: typeof message["id"] === "string" ? message["id"] : so?.responseId }
      }
      if (event["type"] === "message_delta" && isRecord(event["usage"])) {
        return { usage: { ...so?.usage, ...event["usage"] }, responseId: so?.responseId }
      }
      if (event["type"] === "message" && isRecord(event["usage"])) {
        return { usage: event["usage"], responseId: typeof event["id"] === "string" ? event["id"] : undefined }
      }
      return so
    }
    case "openai-chat":
      return isRecord(event["usage"])
        ? { usage: event["usage"], responseId: typeof event["id"] === "string" ? event["id"] : so?.responseId }
        : so
    case "openai-responses": {
      const response = typeof event["type"] === "string" && event["type"].startsWith("response.") ? event["response"] : event
      if (!isRecord(response) || !isRecord(response["usage"])) return so
      return { usage: response["usage"], responseId: typeof response["id"] === "string" ? response["id"] : so?.responseId }
    }
    case "gemini":
      return isRecord(event["usageMetadata"])
        ? { usage: event["usageMetadata"], responseId: typeof event["responseId"] === "string" ? event["responseId"] : so?.responseId }
        : so
  }
}

/** Server-sent events, parsed incrementally; each event's `data` handed to `onData`. */
const sseParser = (onData: (data: string) => void, limit: number) => {
  let pending = ""
  let data: Array<string> = []
  let broken = false
  const line = (text: string) => {
    if (text === "") {
      if (data.length > 0) onData(data.join("\n"))
      data = []
      return
    }
    if (text.startsWith("data:")) data.push(text.slice(text[5] === " " ? 6 : 5))
  }
  return {
    push: (text: string) => {
      if (broken) return
      pending += text
      let at: number
      while ((at = pending.search(/\r\n|\r|\n/)) >= 0) {
        const sep = pending.startsWith("\r\n", at) ? 2 : 1
        line(pending.slice(0, at))
        pending = pending.slice(at + sep)
      }
      if (pending.length > limit) broken = true
    },
    end: () => {
      if (!broken && pending !== "") line(pending)
      line("")
    },
  }
}

/**
 * A tap for a response of `api`: SSE when `contentType` is
 * `text/event-stream`, else one JSON document (at most `limit` decoded bytes).
 */
export const make = (api: Api, contentType: string, contentEncoding: string, limit: number): Tap => {
  let read: Read | undefined
  let failed = false
  const sse = contentType.toLowerCase().startsWith("text/event-stream")
  const text = new StringDecoder("utf8")
  const parser = sseParser((data) => {
    if (data === "[DONE]") return
    try {
      read = fold(api, JSON.parse(data), read)
    } catch {
      // a frame that is not JSON (a comment, a keep-alive): no usage in it
    }
  }, limit)
  const json: Array<string> = []
  let size = 0
  const take = (decoded: Buffer) => {
    if (failed) return
    size += decoded.length
    if (sse) return parser.push(text.write(decoded))
    if (size > limit) {
      failed = true
      json.length = 0
      return
    }
    json.push(text.write(decoded))
  }
  const finish = (): Read | undefined => {
    if (failed) return undefined
    if (sse) {
      parser.push(text.end())
      parser.end()
      return read
    }
    try {
      const value: unknown = JSON.parse(json.join("") + text.end())
      // Gemini's streamGenerateContent without alt=sse: a JSON array of responses, the last with the total
      return Array.isArray(value)
        ? value.reduce<Read | undefined>((so, item) => fold(api, item, so), undefined)
        : fold(api, value, undefined)
    } catch {
      return undefined
    }
  }
  const decoder = decoderOf(contentEncoding.trim().toLowerCase())
  if (decoder === undefined) return { write: () => {}, end: () => Promise.resolve(undefined) }
  if (decoder === "identity") return { write: take, end: () => Promise.resolve(finish()) }
  decoder.on("data", take)
  const ended = new Promise<Read | undefined>((resolve) => {
    decoder.once("end", () => resolve(finish()))
    decoder.once("error", () => {
      failed = true
      resolve(undefined)
    })
  })
  return {
    write: (chunk) => {
      if (!failed) decoder.write(chunk)
    },
    end: () => {
      decoder.end()
      return ended
    },
  }
}
