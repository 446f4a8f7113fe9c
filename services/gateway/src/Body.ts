/**
 * Request bodies: read with a bound, parsed, and — in active mode — the
 * upstream body built from the client's and ctxd's.
 *
 * The upstream body is the client's with ctxd's keys replacing the
 * client's, so whatever ctxd does not model (`temperature`, `metadata`,
 * `stop_sequences`, `reasoning`, tool types it does not know, …) still
 * goes. Two exceptions keep the client's contract with its own SDK:
 * - the transport fields (`stream`, `stream_options`) stay the client's:
 *   the client parses what it asked for;
 * - the keys ctxd owns (the conversation: `messages`, `system`, `tools`,
 *   `input`, `instructions`, `contents`, `systemInstruction`) are ctxd's
 *   alone: one ctxd left out (it dropped every tool) is removed, not
 *   taken back from the client.
 *
 * Request bodies may come compressed: Codex CLI sends large Responses
 * bodies with `content-encoding: zstd` (gzip too). {@link decode} undoes
 * the codings (gzip, deflate, br, zstd, in reverse order of the header),
 * bounded by the same `maxBodyBytes` (a decompression bomb is a 413).
 *
 * A Gemini body from ctxd may be in `@google/genai`'s shape (`{model,
 * contents, config}`); the REST API wants `systemInstruction`, `tools` and
 * `generationConfig` at the top level and the model in the path
 * (https://ai.google.dev/api/generate-content#request-body), so it is
 * converted (`GeminiProvider.Render.toRest`), and the client's
 * `generationConfig` keeps its fields ctxd did not set.
 */
import type { IncomingMessage } from "node:http"
import * as Zlib from "node:zlib"
import { GeminiProvider } from "@ctxd/context"
import type { Api } from "./Port.ts"

/** The body was larger than allowed. */
export class TooLarge extends Error {
  readonly limit: number
  constructor(limit: number) {
    super(`request body larger than ${limit} bytes`)
    this.limit = limit
  }
}

/** Reads the whole body, at most `limit` bytes (rejects with {@link TooLarge} past it, and stops reading). */
export const read = (req: IncomingMessage, limit: number): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"])
    if (Number.isFinite(declared) && declared > limit) {
      req.resume()
      reject(new TooLarge(limit))
      return
    }
    const parts: Array<Buffer> = []
    let size = 0
    let done = false
    req.on("data", (chunk: Buffer) => {
      if (done) return
      size += chunk.length
      if (size > limit) {
        done = true
        parts.length = 0
        reject(new TooLarge(limit))
        return
      }
      parts.push(chunk)
    })
    req.on("end", () => {
      if (!done) resolve(Buffer.concat(parts))
    })
    req.on("error", (e) => {
      if (!done) reject(e)
      done = true
    })
  })

const CODECS: Readonly<Record<string, (bytes: Buffer, maxOutputLength: number) => Buffer>> = {
  gzip: (bytes, maxOutputLength) => Zlib.gunzipSync(bytes, { maxOutputLength }),
  "x-gzip": (bytes, maxOutputLength) => Zlib.gunzipSync(bytes, { maxOutputLength }),
  deflate: (bytes, maxOutputLength) => Zlib.inflateSync(bytes, { maxOutputLength }),
  br: (bytes, maxOutputLength) => Zlib.brotliDecompressSync(bytes, { maxOutputLength }),
  zstd: (bytes, maxOutputLength) => Zlib.zstdDecompressSync(bytes, { maxOutputLength }),
}

export type Decoded =
  | { readonly kind: "identity"; readonly bytes: Buffer }
  | { readonly kind: "decoded"; readonly bytes: Buffer }
  | { readonly kind: "unsupported" }
  | { readonly kind: "broken" }
  | { readonly kind: "too_large" }

/**
 * The body with its `content-encoding` undone: `identity` (as it came),
 * `decoded`, `unsupported` (a coding not in the list: the gateway does not
 * read it), `broken` (not what the header says), or `too_large` (decoded
 * past `limit`).
 */
export const decode = (bytes: Buffer, contentEncoding: string | undefined, limit: number): Decoded => {
  const codings = (contentEncoding ?? "")
    .split(",")
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== "" && c !== "identity")
  if (codings.length === 0) return { kind: "identity", bytes }
  if (codings.some((c) => CODECS[c] === undefined)) return { kind: "unsupported" }
  let out = bytes
  try {
    for (const coding of codings.reverse()) out = CODECS[coding]!(out, limit)
  } catch (e) {
    return (e as { code?: string }).code === "ERR_BUFFER_TOO_LARGE" ? { kind: "too_large" } : { kind: "broken" }
  }
  return { kind: "decoded", bytes: out }
}

/** The body as a JSON object, or `undefined` when it is not one. */
export const parseObject = (bytes: Buffer): Record<string, unknown> | undefined => {
  try {
    const value: unknown = JSON.parse(bytes.toString("utf8"))
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

const OWNED: Readonly<Record<Api, ReadonlyArray<string>>> = {
  "anthropic-messages": ["messages", "system", "tools"],
  "openai-chat": ["messages", "tools"],
  "openai-responses": ["input", "instructions", "tools"],
  gemini: ["contents", "systemInstruction", "system_instruction", "tools"],
}

const TRANSPORT = ["stream", "stream_options"]

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** The body sent upstream in active mode (see the module). */
export const merge = (
  api: Api,
  client: Readonly<Record<string, unknown>>,
  ctxd: Readonly<Record<string, unknown>>,
): Record<string, unknown> => {
  const theirs = api === "gemini" && isRecord(ctxd["config"]) ? GeminiProvider.Render.toRest(ctxd) : { ...ctxd }
  if (api === "gemini") delete theirs["model"]
  const out: Record<string, unknown> = { ...client }
  for (const key of OWNED[api]) delete out[key]
  for (const [key, value] of Object.entries(theirs)) {
    if (TRANSPORT.includes(key) && Object.hasOwn(client, key)) continue
    out[key] = value
  }
  if (api === "gemini" && isRecord(client["generationConfig"]) && isRecord(theirs["generationConfig"])) {
    out["generationConfig"] = { ...client["generationConfig"], ...theirs["generationConfig"] }
  }
  return out
}
